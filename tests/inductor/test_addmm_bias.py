"""``addmm`` of Triton tensors whose every reader is elementwise: an ATen ``mm`` and the bias
added in its readers' kernel (``_lower_matmul``), not cuBLAS's ``addmm`` (whose cuBLASLt path
with a bias measured 27 us against the plain product's 16 us for GPT-2's MLP on an H200).
Where a reader is not elementwise, the result is an output, or ``alpha`` scales the product,
it stays ``addmm``; C++ kernels keep it. Checked against eager; CUDA tensors on a GPU,
otherwise CPU tensors through triton's interpreter."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from triton_support import DEVICE, OPTIONS
from triton_support import run_like_eager as _run

import kiln

pytest.importorskip("triton")

aten = torch.ops.aten


def _calls(graph):
    return graph.wrapper_code.count("_aten_mm_default"), graph.wrapper_code.count("_aten_addmm_default")


def test_linear_gelu_linear_residual(graphs):
    torch.manual_seed(0)
    w1, b1, w2, b2 = torch.randn(128, 64) / 8, torch.randn(128), torch.randn(64, 128) / 11, torch.randn(64)

    def f(x, w1, b1, w2, b2):
        return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2) + x

    _run(f, torch.randn(4, 8, 64), w1, b1, w2, b2)
    (graph,) = graphs
    assert _calls(graph) == (2, 0)
    assert graph.kernels == 2  # bias + GELU; bias + residual
    assert graph.fallbacks == {"aten.mm.default": "matrix products are ATen calls (matmul templates are for "
                                                  "max-autotune)"}


def test_bfloat16_rounds_the_product_then_adds(graphs):
    # torch.compile's numerics on a GPU: the product rounded to bfloat16, then the bias added
    # in float32 and rounded once more (eager's addmm rounds once: they differ by a rounding)
    x, w, b = (torch.randn(32, 64, dtype=torch.bfloat16), torch.randn(96, 64, dtype=torch.bfloat16) / 8,
               torch.randn(96, dtype=torch.bfloat16))
    x, w, b = x.to(DEVICE), w.to(DEVICE), b.to(DEVICE)
    with torch.no_grad():
        out = kiln.compile(lambda x, w, b: torch.relu(F.linear(x, w, b)) * 2, options=OPTIONS)(x, w, b)
        product = (x @ w.t()).float()
    torch.testing.assert_close(out, (torch.relu(product + b.float()) * 2).to(torch.bfloat16))
    assert _calls(graphs[0]) == (1, 0)


@pytest.mark.parametrize("beta", [0.5, 0.0])
def test_beta(graphs, beta):
    bias = torch.randn(1, 48)
    if beta == 0:
        bias[0, 3] = float("nan")  # eager ignores the bias at beta 0, NaN included
    _run(lambda c, a, b: torch.tanh(torch.addmm(c, a, b, beta=beta)), bias, torch.randn(16, 32), torch.randn(32, 48))
    assert _calls(graphs[0]) == (1, 0)


def test_a_full_bias(graphs):
    _run(lambda c, a, b: torch.addmm(c, a, b).sigmoid(), torch.randn(16, 48), torch.randn(16, 32), torch.randn(32, 48))
    assert _calls(graphs[0]) == (1, 0)


def test_an_output_stays_addmm(graphs):
    def f(c, a, b):
        y = torch.addmm(c, a, b)
        return y, y.relu()

    _run(f, torch.randn(48), torch.randn(16, 32), torch.randn(32, 48))
    assert _calls(graphs[0]) == (0, 1)


def test_a_reduction_reader_keeps_addmm(graphs):
    _run(lambda c, a, b: torch.addmm(c, a, b).relu().sum(-1) + torch.addmm(c, a, b).amax(-1),
         torch.randn(48), torch.randn(16, 32), torch.randn(32, 48))
    assert _calls(graphs[0])[1] >= 1


def test_alpha_keeps_addmm(graphs):
    _run(lambda c, a, b: torch.addmm(c, a, b, alpha=0.5).relu(), torch.randn(48), torch.randn(16, 32),
         torch.randn(32, 48))
    assert _calls(graphs[0]) == (0, 1)


def test_cpp_kernels_keep_addmm(graphs):
    x, w, b = torch.randn(32, 64), torch.randn(96, 64), torch.randn(96)
    with torch.no_grad():
        out = kiln.compile(lambda x, w, b: torch.relu(F.linear(x, w, b)))(x, w, b)
    torch.testing.assert_close(out, torch.relu(F.linear(x, w, b)))
    assert _calls(graphs[0]) == (0, 1)


def test_training_step_gradients(graphs):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16)).to(DEVICE)
    copy = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16)).to(DEVICE)
    copy.load_state_dict(model.state_dict())
    x = torch.randn(8, 32, device=DEVICE)
    kiln.compile(lambda x: model(x).tanh().sum(), options=OPTIONS)(x).backward()
    copy(x).tanh().sum().backward()
    for p, q in zip(model.parameters(), copy.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)
