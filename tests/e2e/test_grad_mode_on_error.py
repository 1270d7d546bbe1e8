"""When a graph op fails on run-time values inside a grad-mode ``with`` block, the grad mode
after the error is eager's (the unwound blocks restored it), for graphs that switch the mode
themselves, resume functions inside a block, and calls made at a graph break. Before, a graph
that raised between its ``_set_grad_enabled(False)`` and ``(True)`` left grad mode off for
the rest of the process."""

import pytest
import torch
from e2e_support import CountingBackend, outcome

import kiln


def _helper(y, idx):
    if y.sum() > -1e9:  # a branch on tensor data: not inlined, a frame of its own
        return y.index_select(0, idx)
    return y


def in_block(x, idx):
    with torch.no_grad():
        y = x.index_select(0, idx) * 2
    return y


def nested_blocks(x, idx):
    with torch.enable_grad(), torch.no_grad():
        y = x.index_select(0, idx) * 2
    return y + 1


def set_grad_enabled_block(x, idx):
    with torch.set_grad_enabled(False):
        y = x.index_select(0, idx)
    return y.sin()


def break_inside_block(x, idx):
    with torch.no_grad():
        y = x * 2
        if y.sum() > -1e9:  # a graph break: the resume function runs inside the block
            y = y + 1
        z = y.index_select(0, idx)
    return z


def call_at_break_inside_block(x, idx):
    with torch.no_grad():
        y = x * 2
        z = _helper(y, idx)
    return z


def op_before_and_inside_block(x, idx):
    a = x.index_select(0, idx)
    with torch.no_grad():
        b = x.index_select(0, idx * 0) * 2
    return a + b


def immediate_switches(x, idx):
    # not a block: eager keeps the mode set before the error
    a = x.index_select(0, idx)
    torch.set_grad_enabled(False)
    b = x.index_select(0, idx)
    torch.set_grad_enabled(True)
    return a + b


# case -> graphs of the first call (index in range, grad mode on)
CASES = {
    in_block: 1,
    nested_blocks: 1,
    set_grad_enabled_block: 1,
    break_inside_block: 2,
    call_at_break_inside_block: 4,  # before the call; _helper and its resume; the resume
    op_before_and_inside_block: 1,  # both ops restore the same mode: one graph
    # the second op would restore another mode than the first: a break between them
    immediate_switches: 2,
}



def _after(fn, mode, *args):
    torch.set_grad_enabled(mode)
    out, error = outcome(fn, *args)
    state = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    return out, error, state


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_grad_mode_after_a_run_time_error_is_eagers(fn):
    x = torch.randn(4, requires_grad=True)
    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting)
    for mode in (True, False):
        for index in (1, 9):
            idx = torch.tensor([index])
            expected, expected_error, expected_mode = _after(fn, mode, x, idx)
            got, error, got_mode = _after(compiled, mode, x, idx)
            assert (error, got_mode) == (expected_error, expected_mode), (mode, index)
            if expected_error is None:
                torch.testing.assert_close(got, expected)
                assert got.requires_grad == expected.requires_grad
            if mode and index == 1:
                assert len(counting.graphs) == CASES[fn]


def _autocast_snapshot():
    from kiln.symexec._autocast_state import autocast_state

    return autocast_state()


def autocast_block(x, idx):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x.index_select(0, idx) @ x.t()
    return y.float()


def autocast_inside_no_grad(x, idx):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
        y = x.index_select(0, idx) @ x.t()
    return y.float() + 1


@pytest.mark.parametrize("fn", [autocast_block, autocast_inside_no_grad], ids=lambda f: f.__name__)
def test_autocast_state_after_a_run_time_error_is_eagers(fn):
    # enabled flags and dtypes per device, the cache switch and the nesting count (left
    # raised, the cast-weights cache would never be cleared again)
    x = torch.randn(4, 4)
    compiled = kiln.compile(fn, backend="eager")
    for index in (1, 9):
        idx = torch.tensor([index])
        states = []
        for f in (fn, compiled):
            before = _autocast_snapshot()
            out, error, mode = _after(f, True, x, idx)
            states.append((out, error, mode, _autocast_snapshot()))
            assert states[-1][3] == before
        (expected, expected_error, expected_mode, _), (got, error, got_mode, _) = states
        assert (error, got_mode) == (expected_error, expected_mode)
        if expected_error is None:
            torch.testing.assert_close(got, expected)
