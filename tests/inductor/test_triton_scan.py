"""Scans (cumsum, cumprod) in Triton kernels (``kiln.inductor.triton._scan``): against eager,
with the number of kernels, for rows scanned as one block and rows scanned in blocks with a
carry. CUDA tensors on a GPU; without one, CPU tensors through triton's interpreter."""

from __future__ import annotations

import pytest
import torch
from triton_support import DEVICE, OPTIONS
from triton_support import run_like_eager as _run

import kiln

pytest.importorskip("triton")


def _scan_kernels(graphs, kernels, looped):
    """Every graph is Triton kernels only, ``kernels`` in all, and its scan kernel loops over
    the row's blocks with a carry (``looped``) or scans the row as one block."""
    assert graphs and all(not g.cpp_code for g in graphs)
    assert sum(g.kernels for g in graphs) == kernels
    code = "".join(g.triton_code for g in graphs)
    assert ("tl.cumsum(" in code) or ("tl.cumprod(" in code)
    assert ("carry_" in code) == looped
    assert "aten.cumsum" not in "".join(g.wrapper_code for g in graphs)
    assert "aten.cumprod" not in "".join(g.wrapper_code for g in graphs)


@pytest.mark.parametrize("cols, looped", [(50, False), (1024, False), (3000, True)])
def test_cumsum_of_rows_fuses_its_input(graphs, cols, looped):
    _run(lambda x: torch.cumsum(x * 2 + 1, -1), torch.randn(6, cols))
    _scan_kernels(graphs, 1, looped)


def test_cumsum_along_an_outer_dimension(graphs):
    _run(lambda x: torch.cumsum(x, 0), torch.randn(37, 5, 3))
    _scan_kernels(graphs, 1, False)


def test_cumsum_of_a_transposed_view(graphs):
    _run(lambda x: torch.cumsum(x.t(), 1), torch.randn(2000, 4))
    _scan_kernels(graphs, 1, True)


def test_cumprod_near_one(graphs):
    _run(lambda x: torch.cumprod(1 + x * 0.01, -1), torch.randn(4, 1500))
    _scan_kernels(graphs, 1, True)


def test_integer_and_bool_inputs_scan_in_int64(graphs):
    x = torch.randint(-50, 50, (3, 2500), dtype=torch.int32)
    out = _run(lambda x: torch.cumsum(x, -1), x)
    assert out.dtype == torch.int64
    out = _run(lambda x: torch.cumsum(x > 0, 1), x)
    assert out.dtype == torch.int64
    _run(lambda x: torch.cumprod(x.clamp(-2, 2), 1), x[:, :40])


def test_half_types(graphs):
    # kiln adds half-type elements in float32 and rounds each sum once, as eager's CPU kernel
    # and torch.compile do; eager's CUDA scan adds in the half type itself (its rounding errors
    # pile up along the row: 2 fp16 ulps apart at the 300th sum on an H100), so the reference
    # is the float32 scan, rounded
    compiled = kiln.compile(lambda x: torch.cumsum(x, -1), options=OPTIONS)
    for dtype in (torch.bfloat16, torch.float16):
        x = torch.rand(5, 300).to(dtype).to(DEVICE)
        torch.testing.assert_close(compiled(x), torch.cumsum(x.float(), -1).to(dtype))
    _scan_kernels(graphs, 2, False)


def test_a_scan_feeding_pointwise_and_a_reduction(graphs):
    def fn(x):
        c = torch.cumsum(x, -1)
        return torch.softmax(c, -1), c.sum()
    _run(fn, torch.randn(4, 100))
    assert all(not g.cpp_code for g in graphs)
    assert "tl.cumsum(" in graphs[0].triton_code


def test_symbolic_rows_loop_over_blocks(graphs):
    fn = kiln.compile(lambda x: torch.cumsum(x, -1), options=OPTIONS, dynamic=True)
    for cols in (7, 2100):
        x = torch.randn(3, cols, device=DEVICE)
        torch.testing.assert_close(fn(x), torch.cumsum(x, -1))
    assert len(graphs) == 1
    _scan_kernels(graphs, 1, True)


def test_cumsum_gradient(graphs):
    w = torch.randn(3, 700, device=DEVICE, requires_grad=True)
    w2 = w.detach().clone().requires_grad_(True)
    fn = kiln.compile(lambda w: (torch.cumsum(w, -1) * torch.arange(700.0, device=w.device)).sum(), options=OPTIONS)
    loss = fn(w)
    loss.backward()
    expected = (torch.cumsum(w2, -1) * torch.arange(700.0, device=w2.device)).sum()
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(w.grad, w2.grad)
    assert all(not g.cpp_code for g in graphs)
