"""The per-version table of known blind spots matches what the running CPython does."""

import kiln.frameeval as fe
from kiln.frameeval import _compat


class Point:
    def __init__(self, x):
        self.x = x


def test_table_has_the_running_version():
    assert fe.LIMITATIONS in (_compat.PY311, _compat.PY312, _compat.PY313)


def test_init_bypass_matches_the_table(recorder):
    """On 3.13.0 a warm ``Cls(...)`` call runs ``__init__`` without the evaluation function
    (CALL_ALLOC_AND_ENTER_INIT); on 3.11 and 3.12 every call reaches the hook."""
    with fe.callback_set(recorder):
        for i in range(120):  # one call site; the first 20 calls let it specialize
            assert Point(i).x == i
    hits = [L["x"] for L in recorder.locals_of(Point.__init__) if L["x"] >= 20]
    assert len(hits) == (0 if fe.LIMITATIONS.init_bypasses_hook else 100)


def test_explicit_init_calls_reach_the_hook_everywhere(recorder):
    """The documented way around the bypass: intercept a call of a function, not ``Cls()``."""

    def construct(x):
        return Point(x)

    with fe.callback_set(recorder):
        for i in range(100):
            construct(i)
    assert recorder.codes().count(construct.__code__) == 100
