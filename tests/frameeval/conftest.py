"""Fixtures for kiln.frameeval tests: every test starts and ends with no callback, no cache
entries, no skip marks, and kiln's evaluation function uninstalled."""

import pytest

import kiln.frameeval as fe


@pytest.fixture(autouse=True)
def clean_frameeval():
    fe.set_callback(None)
    fe.reset()
    fe.keep_installed(False)  # kiln.compile keeps it installed for whatever ran before
    assert not fe.is_installed()
    yield
    leftover = fe.set_callback(None)
    fe.reset()
    assert leftover is None, "a test left its callback set"
    assert fe.active_threads() == 0
    assert not fe.is_installed()


class Recorder:
    """A callback that records (code, L, func) and answers with `answer(code)` or `answer`."""

    def __init__(self, answer=None):
        self.calls = []
        self.answer = answer

    def __call__(self, code, L, func):
        self.calls.append((code, dict(L), func))
        return self.answer(code) if callable(self.answer) else self.answer

    def codes(self):
        return [code for code, _, _ in self.calls]

    def locals_of(self, fn):
        return [L for code, L, _ in self.calls if code is fn.__code__]


@pytest.fixture
def recorder():
    return Recorder()


@pytest.fixture
def make_recorder():
    """Recorder factory: make_recorder(answer) for callbacks with other answers."""
    return Recorder
