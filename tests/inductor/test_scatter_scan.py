"""Writes at loaded places (scatter and its reduce forms, index_add, index_put, embedding's
gradient) and scans (cumsum, cumprod) in kiln.inductor: C++ kernels instead of ATen calls,
values as eager's, indices checked as eager checks them (eager's error, and nothing the
caller can see written first)."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import kiln


def _check(graphs, fn, *args, externs=0, dynamic=None, equal_nan=False):
    with torch.no_grad():
        expected = fn(*[a.clone() for a in args])
        got = kiln.compile(fn, dynamic=dynamic)(*args)
    torch.testing.assert_close(got, expected, equal_nan=equal_nan)
    assert graphs and all(g.externs == externs for g in graphs), [(g.externs, g.fallbacks) for g in graphs]
    return got


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_scatter_forms(graphs, dtype):
    x = torch.randn(5, 7).mul(4).to(dtype)
    index = torch.randint(0, 7, (4, 3))  # duplicates along dim 1: the folds meet
    src = torch.randn(4, 5).mul(4).to(dtype)
    rows = torch.randint(0, 5, (3, 7))

    def fn(x, index, src, rows):
        return (x.scatter(1, index, src) * 2, x.scatter(1, index, 1.5 if dtype.is_floating_point else 3),
                x.scatter(1, index, src, reduce="add"), x.scatter(1, index, src, reduce="multiply"),
                torch.scatter_add(x, 1, index, src), x.scatter_add(0, rows, src.repeat(1, 2)[:3, :7]))

    # scatter without a fold: each place is written once (eager does not define which of
    # two writes of one place wins); the folds take duplicates
    once = torch.stack([torch.randperm(7)[:3] for _ in range(4)])
    _check(graphs, lambda x, i, s, r: fn(x, once, s, r)[:2] + fn(x, i, s, r)[2:], x, index, src, rows)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
def test_scatter_reduce(graphs, reduce, include_self):
    x = torch.randn(6, 4)
    x[1, 2] = float("nan")  # NaN propagates through amax and amin, as in eager
    index = torch.tensor([[0, 1, 1, 3], [0, 0, 2, 3], [5, 1, 1, 0]])
    src = torch.randn(3, 4)
    src[2, 3] = float("nan")

    def fn(x, index, src):
        return x.scatter_reduce(0, index, src, reduce, include_self=include_self) + 1

    got = _check(graphs, fn, x, index, src, equal_nan=True)  # NaN where eager has NaN, nowhere else
    # a scattered NaN propagates; the input's own NaN only where the fold includes it
    assert got[0, 3].isnan() and bool(got[1, 2].isnan()) == include_self


def test_index_add(graphs):
    x, source = torch.randn(5, 6), torch.randn(5, 4)
    index = torch.tensor([0, 5, 5, 2])

    def fn(x, index, source):
        return x.index_add(1, index, source, alpha=-2.5), x.index_add(0, index[1:] - 1, source[:3, :].repeat(1, 2)[:, :6])

    _check(graphs, fn, x, index, source)


def test_bfloat16_sums_fold_in_float32_as_eagers_cpu_scatter_add(graphs):
    """Each row of 64 bfloat16 values summed into one place: eager's CPU scatter_add folds in
    float32 and rounds once; kiln's buffer was bfloat16, rounding after every add (10 ulps off
    at 36 values, found by the fuzzer). The result is eager's, bit for bit."""
    x = torch.randn(6, 64).bfloat16()
    src = torch.randn(6, 64).bfloat16()
    index = torch.zeros(6, 64, dtype=torch.int64)
    got = _check(graphs, lambda x, i, s: torch.zeros_like(x).scatter_add(1, i, s), x, index, src)
    assert torch.equal(got, torch.zeros_like(x).scatter_add(1, index, src))
    assert "scatter_add" not in "".join(str(k) for g in graphs for k in g.fallbacks)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_index_put_forms(graphs, dtype):
    x = torch.randn(5, 6, 3)
    i = torch.tensor([4, -1, 0], dtype=dtype)  # -1 is 4: accumulated twice, written once
    j = torch.tensor([[1], [5]], dtype=dtype)

    def fn(x, i, j):
        a = x.clone()
        a[torch.tensor([0, 2])] = 7.0  # a constant index and a number
        b = x.clone()
        b[:, j.flatten()] = torch.ones(2, 3)  # a None before the index, values broadcast
        c = x.clone()
        c[i[:2].abs(), :, i[1:].abs()] = torch.arange(6.0)  # indexed dims apart: theirs go in front
        return (a, b, c, torch.index_put(x, (i,), torch.full((3, 6, 3), 2.0), accumulate=True),
                torch.index_put(x, (i[None, :2].abs(), j), torch.tensor(5.0), accumulate=True))

    _check(graphs, fn, x, i, j)


def test_a_later_write_of_one_place_wins_as_in_eager(graphs):
    x, values = torch.zeros(4), torch.tensor([1.0, 2.0, 3.0])
    index = torch.tensor([2, 2, 2])

    def fn(x, index, values):
        return torch.index_put(x, (index,), values) + 0

    got = _check(graphs, fn, x, index, values)
    assert got[2] == 3.0


def test_embedding_gradient_is_kernels(graphs):
    emb = nn.Embedding(30, 16, padding_idx=3)
    ref = nn.Embedding(30, 16, padding_idx=3)
    ref.load_state_dict(emb.state_dict())
    ids = torch.tensor([[1, 3, 3, 7], [7, 7, 29, 0]])  # repeated ids accumulate; 3 is padding

    def fn(m, ids):
        return (m(ids) * torch.arange(16.0)).sum()

    compiled = kiln.compile(fn)
    compiled(emb, ids).backward()
    fn(ref, ids).backward()
    torch.testing.assert_close(emb.weight.grad, ref.weight.grad)
    assert emb.weight.grad[3].abs().sum() == 0
    forward, backward = graphs
    assert (forward.externs, backward.externs) == (0, 0), (forward.fallbacks, backward.fallbacks)
    assert backward.kernels == 2  # the zeros, then the accumulation


def test_gradients_of_gather_and_advanced_indexing(graphs):
    x = torch.randn(4, 9, requires_grad=True)
    ref = x.detach().clone().requires_grad_()
    g = torch.randint(0, 9, (4, 5))
    i = torch.tensor([3, 0, 3])

    def fn(x, g, i):
        return (torch.gather(x, 1, g).exp().sum() + (x[i] * x[i]).sum()) * 2

    kiln.compile(fn)(x, g, i).backward()
    fn(ref, g, i).backward()
    torch.testing.assert_close(x.grad, ref.grad)
    assert graphs[1].externs == 0, graphs[1].fallbacks


_CASES = {
    "scatter": lambda x, i: x.scatter(0, i, 1.0),
    "scatter_negative": lambda x, i: x.scatter_add(1, -i - 1, x[:2, :3]),
    "index_put": lambda x, i: torch.index_put(x, (i.flatten(),), torch.tensor(1.0)),
    "index_put_negative": lambda x, i: torch.ops.aten.index_put(x, [None, -i.flatten() - 4], torch.tensor(1.0), True),
    "index_add": lambda x, i: x.index_add(0, i.flatten(), torch.ones(6, 3)),
}


def _escaped(message: str) -> str:
    return re.escape(message)


@pytest.mark.parametrize("case", list(_CASES))
def test_an_index_out_of_range_raises_eagers_error(graphs, case):
    x = torch.randn(5, 3)
    i = torch.tensor([[1, 2, 0], [4, 5, 1]])  # 5 is out of range of dim 0; -i - 4 of dim 1
    fn = _CASES[case]
    with pytest.raises((IndexError, RuntimeError)) as eager:
        fn(x, i)
    with pytest.raises(eager.type, match=_escaped(str(eager.value))):
        kiln.compile(fn)(x, i)
    assert graphs and all(g.externs == 0 for g in graphs)


def test_an_in_place_write_with_a_bad_index_leaves_the_input_as_it_was(graphs):
    x = torch.randn(5, 3)
    before = x.clone()

    def fn(x, i):
        x.index_put_((i,), torch.ones(3))
        x.mul_(2)
        return x.sum()

    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 5"):
        kiln.compile(fn)(x, torch.tensor([1, 9]))
    assert torch.equal(x, before)
    good = x.clone()
    fn(good, torch.tensor([1, 4]))
    kiln.compile(fn)(x, torch.tensor([1, 4]))
    torch.testing.assert_close(x, good)


def test_scatter_with_dynamic_sizes_is_one_graph(graphs):
    def fn(x, index, src):
        return torch.scatter_add(x, 0, index, src).relu().cumsum(1)

    compiled = kiln.compile(fn, dynamic=True)
    for n, m in ((6, 4), (9, 7)):
        x, src = torch.randn(n, 5), torch.randn(m, 5)
        index = torch.randint(0, n, (m, 5))
        with torch.no_grad():
            torch.testing.assert_close(compiled(x, index, src), fn(x, index, src))
    assert len(graphs) == 1 and graphs[0].externs == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_cumsum_and_cumprod_are_eagers_bits(graphs, dtype):
    x = (torch.rand(6, 33, 5) + 0.5).to(dtype)

    def fn(x):
        return x.cumsum(1), x.cumprod(0), torch.cumsum(x, -1) * 2, x[:, 3].cumprod(-1)

    with torch.no_grad():
        expected = fn(x)
        got = kiln.compile(fn)(x)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=0, atol=0)  # the same accumulation and rounding
    assert graphs[0].externs == 0, graphs[0].fallbacks


def test_integer_and_boolean_scans(graphs):
    x = torch.randint(-5, 6, (4, 10))

    def fn(x):
        return (x.cumsum(1), (x > 0).cumsum(0), x.cumsum(1, dtype=torch.float32), x.to(torch.int32).cumprod(1),
                x[1, 2].float().cumsum(0))

    got = _check(graphs, fn, x)
    assert [t.dtype for t in got] == [torch.int64, torch.int64, torch.float32, torch.int64, torch.float32]


def test_a_scan_in_training(graphs):
    x = torch.randn(3, 8, requires_grad=True)
    ref = x.detach().clone().requires_grad_()

    def fn(x):
        return (x.cumsum(1).sin() * torch.arange(8.0)).sum()

    kiln.compile(fn)(x).backward()
    fn(ref).backward()
    torch.testing.assert_close(x.grad, ref.grad)
    assert all(g.externs == 0 for g in graphs), [g.fallbacks for g in graphs]


def test_dropout_gradient_converts_its_mask_in_a_kernel(graphs):
    x = torch.randn(8, 32, requires_grad=True)

    def fn(x):
        return (torch.nn.functional.dropout(x, 0.25, training=True) * x).sum()

    torch.manual_seed(3)
    kiln.compile(fn)(x).backward()
    got = x.grad.clone()
    x.grad = None
    torch.manual_seed(3)  # the same mask: native_dropout stays eager's ATen call
    fn(x).backward()
    torch.testing.assert_close(got, x.grad)
    _, backward = graphs
    assert backward.externs == 0, backward.fallbacks  # to.dtype_layout of the mask is lowered
