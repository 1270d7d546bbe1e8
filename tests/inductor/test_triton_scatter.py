"""Scatters in Triton kernels (``kiln.inductor.triton._scatter``): stores and atomic sums at
loaded places (scatter, scatter_add, index_add, index_put, the gradients of indexing and
embedding) as flat Triton kernels, against eager; folds atomics lack here and deterministic
algorithms keep them ATen calls. CUDA tensors on a GPU; without one, CPU tensors through
triton's interpreter."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from triton_support import CUDA, DEVICE, OPTIONS
from triton_support import run_like_eager as _run

import kiln

pytest.importorskip("triton")


def _kernels_only(graphs, *ops):
    """No ATen call for ``ops``, and the scatters are Triton stores or atomic adds."""
    assert graphs and all(not g.cpp_code for g in graphs)
    fallbacks = {k for g in graphs for k in g.fallbacks}
    assert not any(op in k for op in ops for k in fallbacks), fallbacks
    code = "".join(g.triton_code for g in graphs)
    assert "at loaded places of" in code
    return code


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.float16,
                                   torch.bfloat16])
def test_scatter_add_and_index_add(graphs, dtype):
    """Half types fold in float32 atomics, rounded once (bfloat16 has no atomic add but on
    Hopper; eager's CUDA kernels round after each add, hence the half types' tolerances)."""
    x = torch.randn(6, 9).mul(4).to(dtype)
    index = torch.randint(0, 9, (5, 9))  # duplicates: atomic adds meet
    src = torch.randn(5, 9).mul(4).to(dtype)
    rows = torch.randint(0, 6, (7,))
    more = torch.randn(7, 9).mul(4).to(dtype)
    tol = {"atol": 2e-2, "rtol": 2e-3} if dtype == torch.float16 else \
        {"atol": 1.5e-1, "rtol": 1.6e-2} if dtype == torch.bfloat16 else {}
    _run(lambda x, i, s, r, m: (torch.scatter_add(x, 1, i, s) * 2, x.index_add(0, r, m)), x, index, src, rows, more,
         **tol)
    code = _kernels_only(graphs, "scatter_add", "index_add")
    assert "tl.atomic_add(" in code


def test_scatter_and_index_put_store(graphs):
    x = torch.randn(5, 7)
    once = torch.stack([torch.randperm(7)[:3] for _ in range(5)])  # one write per place: eager's order is undefined
    src = torch.randn(5, 3)
    rows, cols = torch.tensor([0, 2, 4]), torch.tensor([6, 1, 3])
    _run(lambda x, i, s, r, c: (x.scatter(1, i, s) + 1, x.index_put((r, c), torch.ones(3, device=x.device)), x.scatter(1, i, 2.5)),
         x, once, src, rows, cols)
    code = _kernels_only(graphs, "scatter", "index_put")
    assert "tl.atomic_add(" not in code


def test_index_put_accumulate_and_negative_indices(graphs):
    x = torch.zeros(4, 6)
    rows = torch.tensor([0, -1, 0, 3, 0])
    cols = torch.tensor([5, 2, 5, -6, 5])
    _run(lambda x, r, c, v: x.index_put((r, c), v, accumulate=True), x, rows, cols, torch.arange(5.0))
    _kernels_only(graphs, "index_put")


def test_embedding_gradient(graphs):
    weight = torch.randn(50, 16, device=DEVICE, requires_grad=True)
    ids = torch.randint(0, 50, (8, 30), device=DEVICE)  # repeated ids: their gradients add
    ref = weight.detach().clone().requires_grad_(True)
    kiln.compile(lambda w, i: F.embedding(i, w).square().sum(), options=OPTIONS)(weight, ids).backward()
    F.embedding(ids, ref).square().sum().backward()
    torch.testing.assert_close(weight.grad, ref.grad)
    assert any("tl.atomic_add(" in g.triton_code for g in graphs)


def test_scatter_reduce_sum_and_mean_without_self(graphs):
    x = torch.randn(6, 4)
    index = torch.tensor([[0, 1, 1, 3], [0, 0, 2, 3], [5, 1, 1, 0]])
    src = torch.randn(3, 4)
    for reduce in ("sum", "mean"):
        _run(lambda x, i, s, reduce=reduce: x.scatter_reduce(0, i, s, reduce, include_self=False) + 1, x, index, src)
    _kernels_only(graphs, "scatter_reduce")


def test_other_folds_stay_aten_calls(graphs):
    x, index, src = torch.randn(6, 4), torch.tensor([[0, 1, 1, 3]]), torch.randn(1, 4)
    _run(lambda x, i, s: x.scatter_reduce(0, i, s, "amax") * 2, x, index, src)
    assert any("folding by max" in why for g in graphs for why in g.fallbacks.values())


def test_deterministic_algorithms_keep_scatters_aten_calls(graphs):
    x, index, src = torch.zeros(3, 5), torch.tensor([[0, 1, 1, 4, 4]]), torch.randn(1, 5)
    fn = kiln.compile(lambda x, i, s: torch.scatter_add(x, 1, i, s) + 1, options=OPTIONS)
    args = [a.to(DEVICE) for a in (x, index, src)]
    torch.testing.assert_close(fn(*args), torch.scatter_add(args[0], 1, args[1], args[2]) + 1)
    assert not graphs[-1].fallbacks
    torch.use_deterministic_algorithms(True)
    try:  # a guard of the frame: compiled again, with the scatter an ATen call
        torch.testing.assert_close(fn(*args), torch.scatter_add(args[0], 1, args[1], args[2]) + 1)
    finally:
        torch.use_deterministic_algorithms(False)
    assert len(graphs) == 2 and "use_deterministic_algorithms" in "".join(graphs[-1].fallbacks.values())


def test_an_index_out_of_range_is_an_error_not_a_wrong_answer(graphs):
    if CUDA:
        pytest.skip("on a GPU the device-side assert ends the CUDA context, as eager's does")
    fn = kiln.compile(lambda x, i, s: torch.scatter_add(x, 1, i, s) * 2, options=OPTIONS)
    x, src = torch.zeros(2, 4), torch.ones(2, 3)
    torch.testing.assert_close(fn(x, torch.tensor([[0, 3, 3], [1, 1, 2]]), src),
                               torch.scatter_add(x, 1, torch.tensor([[0, 3, 3], [1, 1, 2]]), src) * 2)
    with pytest.raises(Exception, match=r"index out of range|out of bounds"):
        fn(x, torch.tensor([[0, 4, 3], [1, 1, 2]]), src)
