"""Cache hints of looped row kernels (``_kernel._evictions``): a row wider than
``triton_persistent_max`` is read by one loop for its statistics and again by the next to
normalize it; the first read is ``evict_last`` (the row stays in L2 for the second), the second
``evict_first`` (nothing reads it again), and what every row reads alike (a norm's weight and
bias) ``evict_last``. Persistent and flat kernels carry no hints. Checked against eager; CUDA
tensors on a GPU, otherwise CPU tensors through triton's interpreter."""

from __future__ import annotations

import re

import pytest
import torch
from triton_support import DEVICE
from triton_support import run_like_eager as _run

pytest.importorskip("triton")

WIDE = 40000  # above triton_persistent_max (32768): a looped row


def _loops(code):
    """The ``tl.load`` lines of each ``for roffset`` loop, in order."""
    loops, current = [], None
    for line in code.splitlines():
        if line.strip().startswith("for roffset"):
            current = []
            loops.append(current)
        elif current is not None and "tl.load(" in line:
            current.append(line)
    return loops


def _hint(line):
    found = re.search(r"eviction_policy='(\w+)'", line)
    return found and found.group(1)


def test_layer_norm_rereads_its_row_from_l2():
    x = torch.randn(3, WIDE)
    w, b = torch.randn(WIDE), torch.randn(WIDE)
    _run(lambda x, w, b: torch.nn.functional.layer_norm(x, (WIDE,), w, b), x, w, b, atol=1e-4, rtol=1e-4)


def test_layer_norm_hints(graphs):
    x = torch.randn(3, WIDE)
    w, b = torch.randn(WIDE), torch.randn(WIDE)
    _run(lambda x, w, b: torch.nn.functional.layer_norm(x, (WIDE,), w, b), x, w, b, atol=1e-4, rtol=1e-4)
    (graph,) = graphs
    first, second = _loops(graph.triton_code)
    assert [_hint(line) for line in first] == ["evict_last"]  # x, read again by the second loop
    hints = sorted(_hint(line) for line in second)
    assert hints == ["evict_first", "evict_last", "evict_last"]  # x's last read; w and b, alike for every row
    x_name = re.search(r"tl\.load\((\w+) \+", first[0]).group(1)
    assert _hint(next(line for line in second if f"tl.load({x_name} +" in line)) == "evict_first"


def test_softmax_online_loop_then_division(graphs):
    x = torch.randn(2, WIDE) * 3
    _run(lambda x: torch.softmax(x, -1), x)
    first, second = _loops(graphs[0].triton_code)
    assert [_hint(line) for line in first] == ["evict_last"]  # max and sum in one loop
    assert [_hint(line) for line in second] == ["evict_first"]


def test_a_row_read_once_has_no_hint(graphs):
    _run(lambda x: (x * 2).sum(-1), torch.randn(2, WIDE))
    (loop,) = _loops(graphs[0].triton_code)
    assert [_hint(line) for line in loop] == [None]


def test_two_sums_in_one_loop_hint_nothing(graphs):
    # the weight and bias gradients of a norm: two sums of one tensor share a loop (_loop_mates)
    def f(x, y):
        return (x * y).sum(-1), x.sum(-1)

    _run(f, torch.randn(2, WIDE), torch.randn(2, WIDE), atol=1e-3, rtol=1e-4)
    loops = _loops(graphs[0].triton_code)
    assert len(loops) == 1
    assert all(_hint(line) is None for line in loops[0])


def test_persistent_rows_carry_no_hints(graphs):
    x = torch.randn(4, 4096, device=DEVICE)
    _run(lambda x: torch.nn.functional.layer_norm(x, (4096,)), x, atol=1e-4, rtol=1e-4)
    assert "eviction_policy" not in graphs[0].triton_code
