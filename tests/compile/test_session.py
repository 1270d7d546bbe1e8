"""kiln.Session: the counters and caches of the compiler in one object; kiln.reset() makes a
new one current, and a test activates its own with ``with kiln.Session() as s:``."""

import torch
from e2e_support import eager_item

import kiln


def _double(x):
    return x * 2


def _with_a_break(x):
    y = x.sin()
    n = eager_item(y.sum())  # a graph break: a resume function after it
    return y * n


def test_a_session_of_its_own_sees_only_its_own_counters():
    outer = kiln.session()
    kiln.compile(_double, backend="eager")(torch.randn(3))
    assert outer.stats.captures == 1
    with kiln.Session() as mine:
        assert kiln.session() is mine
        compiled = kiln.compile(_with_a_break, backend="eager")
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), _with_a_break(x))
    assert kiln.session() is outer
    assert mine.stats.captures == 2 and mine.stats.entries == 2  # the frame and its resume function
    assert len(mine.stats.breaks) == 1 and _with_a_break.__code__ in mine.stats.broken_codes
    assert outer.stats.captures == 1 and outer.stats.breaks == []
    # the caches captures share are the session's too
    assert len(mine.symexec.resume_functions) == 1 and not outer.symexec.resume_functions
    assert _with_a_break.__code__ in mine.symexec.decoded and _with_a_break.__code__ not in outer.symexec.decoded


def test_reset_makes_a_fresh_session_current():
    before = kiln.session()
    kiln.compile(_double, backend="eager")(torch.randn(3))
    kiln.reset()
    after = kiln.session()
    assert after is not before and after.stats.captures == 0 and not after.symexec.resume_functions
    assert before.stats.captures == 1


def test_two_sessions_share_no_resume_function():
    compiled = kiln.compile(_with_a_break, backend="eager")
    x = torch.randn(3)
    with kiln.Session() as first:
        compiled(x)
    kiln.reset()  # forget the compiled entries too, so that the second session compiles again
    with kiln.Session() as second:
        compiled(x)
    (a,), (b,) = first.symexec.resume_functions.values(), second.symexec.resume_functions.values()
    assert a is not b and a.__code__ is not b.__code__


def test_sessions_nest_and_a_reset_inside_lasts_until_the_block_ends():
    outer = kiln.session()
    with kiln.Session() as a:
        with kiln.Session() as b:
            assert kiln.session() is b
        assert kiln.session() is a
        kiln.reset()
        assert kiln.session() not in (outer, a)
    assert kiln.session() is outer


def test_explain_reports_the_breaks_of_its_own_call():
    out = kiln.explain(_with_a_break)(torch.randn(3))
    assert out.graph_break_count == 1 and out.graph_count == 2
