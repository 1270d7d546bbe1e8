"""Tiled pointwise Triton kernels (``kiln.inductor.triton._kernel._tile_axis``): a flat kernel
whose loads or stores are contiguous along a variable other than the one its block runs along
(a transpose: ``x.t() + y``, NCHW to NHWC) computes 2-D tiles of both, so that each access
runs along its own contiguous direction. Checked against eager at ragged sizes, dtypes, an
input written in place, dynamic sizes and max-autotune's tile candidates; coalesced kernels
(a permute keeping the innermost dimension) and short dimensions stay flat. CUDA tensors on a
GPU; without one, CPU tensors through triton's interpreter."""

from __future__ import annotations

import pytest
import torch
from triton_support import CUDA, DEVICE, OPTIONS
from triton_support import run_like_eager as _run

import kiln

pytest.importorskip("triton")


def _tiled(graph):
    return "tiles_r = " in graph.triton_code


def test_a_transposed_add_is_one_tiled_kernel(graphs):
    _run(lambda x, y: x.t() + y, torch.randn(64, 96), torch.randn(96, 64))
    assert [g.kernels for g in graphs] == [1]
    assert _tiled(graphs[0])
    assert "XBLOCK=64, RBLOCK=64" in graphs[0].wrapper_code


@pytest.mark.parametrize("shape", [(50, 70), (17, 300), (129, 33)])
def test_ragged_tiles_are_masked(graphs, shape):
    x = torch.randn(*shape)
    out = _run(lambda x: x.t().contiguous() * 3 - 1, x)
    assert out.is_contiguous()
    assert _tiled(graphs[0])


def test_nchw_to_channels_last(graphs):
    x = torch.randn(2, 24, 20, 18)
    out = _run(lambda x: torch.relu(x).contiguous(memory_format=torch.channels_last), x)
    assert out.stride() == x.contiguous(memory_format=torch.channels_last).stride()
    assert _tiled(graphs[0])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int32, torch.bool])
def test_dtypes(graphs, dtype):
    x = (torch.randn(40, 72) * 10).to(dtype)
    y = (torch.randn(72, 40) * 10).to(dtype)
    _run(lambda x, y: x.t() + y if dtype != torch.bool else x.t() | y, x, y)
    assert _tiled(graphs[0])


def test_an_input_written_in_place_through_a_transpose(graphs):
    def f(y, x):
        y.copy_(x.t() * 2)
        return y

    y, x = torch.zeros(48, 80), torch.randn(80, 48)
    expected = f(y.clone(), x)
    y, x = y.to(DEVICE), x.to(DEVICE)
    with torch.no_grad():
        out = kiln.compile(f, options=OPTIONS)(y, x)
    torch.testing.assert_close(out.cpu(), expected)
    torch.testing.assert_close(y.cpu(), expected)  # the caller's tensor written
    assert _tiled(graphs[0])


def test_a_kept_value_and_a_tile_together(graphs):
    def f(x, y):
        z = torch.sin(x.t()) * torch.cos(y) + torch.tanh(x.t()) * torch.exp(y)  # read twice: realized
        return z * 2 + torch.sigmoid(z)

    _run(f, torch.randn(32, 64), torch.randn(64, 32))
    assert _tiled(graphs[0]) and graphs[0].kernels == 1


def test_a_permute_keeping_the_innermost_dimension_stays_flat(graphs):
    _run(lambda x: x.permute(0, 2, 1, 3).contiguous() * 2, torch.randn(2, 16, 4, 32))
    assert not _tiled(graphs[0])


def test_short_dimensions_stay_flat(graphs):
    _run(lambda x: x.t().contiguous() + 1, torch.randn(1000, 8))  # a load contiguous along 8 elements
    _run(lambda x: x.t().contiguous() + 1, torch.randn(8, 1000))  # the store's run 8 elements long
    assert not any(_tiled(g) for g in graphs)


def test_dynamic_sizes(graphs):
    f = kiln.compile(lambda x, y: x.t() + y, options=OPTIONS, dynamic=True)
    for n, m in ((40, 72), (33, 65)):
        x, y = torch.randn(n, m, device=DEVICE), torch.randn(m, n, device=DEVICE)
        with torch.no_grad():
            torch.testing.assert_close(f(x, y), x.t() + y)


def test_max_autotune_measures_tiles(graphs, tmp_path):
    options = {"inductor.max_autotune": True, "inductor.cache_dir": str(tmp_path)}
    if not CUDA:
        options["inductor.cpu_backend"] = "triton"
    x, y = torch.randn(96, 160, device=DEVICE), torch.randn(160, 96, device=DEVICE)
    with torch.no_grad():
        out = kiln.compile(lambda x, y: x.t() + y, options=options)(x, y)
    torch.testing.assert_close(out, x.t() + y)
    (graph,) = graphs
    assert _tiled(graph)
    (result,) = graph.autotuned
    assert len(result.candidates) > 1 and result.chosen in result.candidates
    assert all("RBLOCK" in c and c["XBLOCK"] * c["RBLOCK"] <= 256 * 256 for c in result.candidates)
    launch = ", ".join(f"{k}={v}" for k, v in result.chosen.items())
    assert launch in graph.wrapper_code


def test_a_transpose_in_the_backward(graphs):
    x = torch.randn(48, 40, device=DEVICE, requires_grad=True)
    w = torch.randn(40, 48, device=DEVICE, requires_grad=True)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()

    def f(x, w):
        return (torch.sin(x.t() * w) * w).sum()

    kiln.compile(f, options=OPTIONS)(x, w).backward()
    f(x2, w2).backward()
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(w.grad, w2.grad)
    assert len(graphs) == 2 and _tiled(graphs[1])  # the backward's gradient of x is written transposed
