"""A graph op that fails on run-time values (a tensor index out of range, overlapping memory in
an in-place op) inside the user's ``try`` is caught by the user's ``except`` as in eager: the
op runs outside the graph, inside the ``try``. Ops that
cannot fail, and blocks that cannot swallow an error (``finally``, ``with torch.no_grad()``, a
comprehension), keep one graph.

Each case runs with an index in range and one out of range, compared with eager (result, or
exception type and the effects made before it), counting the graphs of the first call."""

import contextlib

import pytest
import torch
from e2e_support import CountingBackend, outcome

import kiln


def _helper(y, idx):
    return y.index_select(0, idx) * 3  # an index out of range fails when the graph runs


def try_around_method_call(x, idx, lst):
    y = x * 2
    try:
        z = y.index_select(0, idx)
    except (IndexError, RuntimeError):
        z = y.new_zeros(1)
    return z + 1


def try_around_call(x, idx, lst):
    y = x * 2
    try:
        z = _helper(y, idx)
    except (IndexError, RuntimeError):
        z = y.sum()
    return z + 1


def try_around_index_add(x, idx, lst):
    b = x.clone()
    try:
        b.index_add_(0, idx, torch.ones(1))
    except Exception:
        lst.append("caught")
    return b.sin()


def try_around_overlapping_index_add(x, idx, lst):
    # found by scripts/fuzz.py (seed 910744): the memory overlap fails in eager every time
    b = x.clone()
    try:
        b.index_add_(0, torch.tensor([0, 2]), b[:2])
    except Exception:
        lst.append("caught")
    return b.sin() + idx


def try_finally_around_call(x, idx, lst):
    # a finally passes the error on: no break (transformers wraps every forward so); its
    # body's effects are replayed after the graph like the trace's others (none here)
    y = x * 2
    try:
        z = _helper(y, idx)
    finally:
        y = None
    return z


def suppressing_with_block(x, idx, lst):
    y = torch.zeros(())
    with contextlib.suppress(IndexError, RuntimeError):
        y = _helper(x, idx)
    return y + 1


def nullcontext_block(x, idx, lst):
    # nullcontext's __exit__ returns None: it cannot swallow the error, no break
    with contextlib.nullcontext():
        y = x.index_select(0, idx)
    return y + 1


def try_inside_no_grad(x, idx, lst):
    with torch.no_grad():
        try:
            z = _helper(x, idx)
        except (IndexError, RuntimeError):
            z = x.sum()
    return z


def nested_try_in_inlined_function(x, idx, lst):
    def inner(y):
        try:
            return _helper(y, idx)
        except (IndexError, RuntimeError):
            return y.mean()

    return inner(x * 2) + 1


def safe_ops_in_try(x, idx, lst):
    try:
        y = torch.relu(x * 2 + 1).sum()
    except RuntimeError:
        y = x.new_zeros(())
    return y + idx


def may_fail_without_try(x, idx, lst):
    y = x.index_select(0, idx) * 2
    return [t.index_select(0, idx * 0).sin() for t in (y, x)]


def may_fail_in_a_generator(x, idx, lst):
    # 3.12+ covers a generator body with a handler turning StopIteration into RuntimeError:
    # it re-raises everything else, so no break
    return tuple(t.index_select(0, idx).sin() for t in (x, x * 2))


# case -> graphs of the first call (index in range)
CASES = {
    try_around_method_call: 2,  # x * 2, a break at the call inside the try; the resumed + 1
    try_around_call: 3,  # x * 2; _helper as its own frame (no try there); + 1
    try_around_index_add: 2,  # clone and ones; after the try: sin
    try_around_overlapping_index_add: 1,  # the handler's resume (matching a real exception) is eager
    try_finally_around_call: 1,
    suppressing_with_block: 1,  # no break inside a Python with block: eager frame; _helper
    nullcontext_block: 1,
    try_inside_no_grad: 3,
    nested_try_in_inlined_function: 1,  # a frame with a cell runs eagerly; _helper compiled
    safe_ops_in_try: 1,  # float pointwise ops and a sum cannot fail: no break
    may_fail_without_try: 1,  # no handler catches (the comprehension's cleanup re-raises)
    may_fail_in_a_generator: 1,
}



@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_run_time_errors_reach_the_users_handlers(fn):
    x = torch.randn(4)
    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting)
    for index in (1, 9):
        idx = torch.tensor([index])
        lst_eager, lst_kiln = [], []
        expected, expected_error = outcome(fn, x, idx, lst_eager)
        got, error = outcome(compiled, x, idx, lst_kiln)
        assert error is expected_error, (index, error, expected_error)
        if expected_error is None:
            torch.testing.assert_close(got, expected)
        assert lst_kiln == lst_eager
        if index == 1:
            assert len(counting.graphs) == CASES[fn]
