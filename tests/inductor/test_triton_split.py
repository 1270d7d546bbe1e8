"""Split reductions (``kiln.inductor._lower_split``): a Triton reduction of many elements to a
few results runs as partial reductions of chunks over many programs, then a reduction of the
partials, instead of one program looping over everything. Against eager, with the kernels'
shapes. CUDA tensors on a GPU; without one, CPU tensors through triton's interpreter."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from triton_support import DEVICE, OPTIONS
from triton_support import run_like_eager as _run

import kiln

pytest.importorskip("triton")


def _programs(code):
    """The ``xnumel`` (rows, one per program at XBLOCK 1) of each kernel of a module."""
    return [int(line.split("=")[1]) for line in code.splitlines() if line.strip().startswith("xnumel = ")
            and line.split("=")[1].strip().isdigit()]


@pytest.mark.parametrize("shape", [(256, 1024), (300, 700), (70001,)])  # chunks dividing n, a masked last chunk
def test_full_reductions_are_split(graphs, shape):
    x = torch.randn(*shape)
    _run(lambda x: (x.sum(), x.amax(), x.amin(), (x * 2).mean(), (x > 3).any(), (x > -9).all()), x)
    code = graphs[0].triton_code
    assert all(g.kernels for g in graphs) and not graphs[0].cpp_code
    assert max(_programs(code)) >= 16  # the partials' kernel has many programs
    assert "xnumel = 1\n" in code  # the results' kernel


def test_a_contiguous_input_is_read_with_an_affine_index(graphs):
    _run(lambda x: x.sum(), torch.randn(512, 512))
    kernels = graphs[0].triton_code.split("\ndef kernel0", 1)[1]
    assert "kiln_floordiv_int" not in kernels and "kiln_mod_int" not in kernels and "tl.minimum" not in kernels


def test_prod_and_integer_and_half_sums(graphs):
    # factors 1, 2 and 1/2: every partial product exact, whatever the order
    factors = torch.ones(100000)
    factors[torch.randperm(100000)[:300]] = torch.tensor([2.0, 0.5]).repeat(150)
    _run(lambda x: x.prod(), factors)
    _run(lambda x: x.sum(), torch.randint(-9, 9, (300, 300), dtype=torch.int32))
    _run(lambda x: x.sum(), torch.rand(200000).to(torch.bfloat16))


def test_a_few_outputs_and_reductions_over_outer_dimensions(graphs):
    x = torch.randn(100000, 5)
    _run(lambda x: (x.sum(0), x.t().amax(1), x.sum(0, keepdim=True)), x)
    assert max(_programs(graphs[0].triton_code)) >= 16


def test_nan_and_infinities(graphs):
    x = torch.randn(100000)
    x[77777] = float("nan")
    y = torch.randn(100000)
    y[5] = float("inf")
    _run(lambda x, y: (x.sum(), x.amax(), y.sum(), y.amin(), y.amax()), x, y)


def test_variance_and_softmax_over_everything(graphs):
    x = torch.randn(400, 500) * 3 + 10
    _run(lambda x: (x.var(), x.std(correction=0), torch.softmax(x.flatten(), 0)), x)


def test_small_or_many_results_are_not_split(graphs):
    _run(lambda x: (x.sum(), x.sum(1)), torch.randn(100, 50))
    assert max(_programs(graphs[0].triton_code)) <= 100


def test_training_a_loss_over_everything(graphs):
    w = torch.randn(300, 400, device=DEVICE, requires_grad=True)
    ref = w.detach().clone().requires_grad_(True)
    loss = kiln.compile(lambda w: (w.tanh() - 0.5).square().mean(), options=OPTIONS)(w)
    loss.backward()
    expected = (ref.tanh() - 0.5).square().mean()
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(w.grad, ref.grad)



def _blocks(graph):
    """The XBLOCK of each Triton launch of a compiled graph, from the wrapper's comments."""
    return [int(m) for m in re.findall(r"# XBLOCK=(\d+)", graph.wrapper_code)]


# sums of integer-valued floats are exact in any order: any element read twice, missed or taken
# from another column changes the result
def _integers(*shape, dtype=torch.float32):
    return torch.randint(-8, 8, shape).to(dtype)


@pytest.mark.parametrize("shape,dims", [((2048, 256), 0), ((2000, 96), 0), ((8, 256, 128), (0, 1)),
                                        ((4096, 40), 0)])
def test_sums_over_leading_dims_to_many_results_are_split_by_rows(graphs, shape, dims):
    # a bias's gradient: each result a column. Chunks dividing the rows, a masked last chunk
    # (2000 rows), two leading dims, and fewer results (40) than a program's 64 lanes
    x = _integers(*shape)
    _run(lambda x: (x.sum(dims), (x * 3).amax(dims), x.sum(dims, keepdim=True)), x)
    graph = graphs[0]
    out = shape[-1]
    assert max(_programs(graph.triton_code)) >= 8 * out  # the partials: (splits, out) rows
    assert max(_blocks(graph)) >= 16  # many neighbouring results per program


def test_leading_dim_sums_of_half_types_and_a_transposed_input(graphs):
    x = _integers(4096, 128, dtype=torch.bfloat16)
    _run(lambda x: (x.sum(0), x.float().sum(0)), x)
    assert max(_blocks(graphs[0])) >= 16
    # a transposed input: each result's elements are neighbours in memory
    _run(lambda y: y.t().sum(0), _integers(256, 2048))


def test_a_leading_dim_sum_over_a_dynamic_batch_reads_along_results(graphs):
    x = _integers(1500, 512)
    _run(lambda x: (x * 2).sum(0), x, dynamic=True)
    assert "def kernel0" in graphs[0].triton_code and "for roffset in range" in graphs[0].triton_code
    assert max(_blocks(graphs[0])) >= 2  # not one result per program: 512 results, 128 programs


def test_dynamic_sizes_are_split_by_their_example_and_right_for_every_size(graphs):
    """A dynamic size is split as its example value would be (the chunk count fixed, the chunk
    ``ceil(n / splits)`` a kernel argument): one compiled graph, right for sizes that leave the
    last chunks short or empty (3 rows in 23 chunks), for sums over leading dims (split by
    rows) and over everything, with NaN and infinities."""
    column = kiln.compile(lambda x: (x.sum(0), (x * 3).amax(0), x.sum(0, keepdim=True)), options=OPTIONS,
                          dynamic=True)
    full = kiln.compile(lambda y: (y.sum(), y.amax(), y.amin()), options=OPTIONS, dynamic=True)
    for rows, cols in [(1500, 512), (2047, 512), (700, 96), (37, 300), (3, 64)]:
        x = _integers(rows, cols).to(DEVICE)
        torch.testing.assert_close(column(x), (x.sum(0), (x * 3).amax(0), x.sum(0, keepdim=True)))
    for n in [100000, 70001, 5000, 7]:
        y = torch.randn(n, device=DEVICE)
        y[n // 2] = float("inf")
        torch.testing.assert_close(full(y), (y.sum(), y.amax(), y.amin()))
        y[n // 3] = float("nan")
        torch.testing.assert_close(full(y), (y.sum(), y.amax(), y.amin()), equal_nan=True)
    assert [g.kernels for g in graphs] == [2, 2]  # one graph each: partials, then results
    # the chunk, ceil(n / splits), by Triton's own division (n is a size: nonnegative)
    assert all(re.search(r"rnumel = \(\(\d+ \+ s\d+\) // \d+\)", g.triton_code) for g in graphs)


def test_training_a_linear_layer_bias_and_norm_weight_gradients(graphs):
    # each gradient as close to float64's as eager's float32 one is (sums over 2048 rows in
    # another order than eager's differ from it by rounding)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.LayerNorm(128)).to(DEVICE)
    eager, exact = copy.deepcopy(model), copy.deepcopy(model).double()
    x = torch.randn(32, 64, 64, device=DEVICE)
    kiln.compile(model, options=OPTIONS)(x).square().sum().backward()
    eager(x).square().sum().backward()
    exact(x.double()).square().sum().backward()
    for (name, p), q, r in zip(model.named_parameters(), eager.parameters(), exact.parameters(), strict=True):
        ours, theirs = (p.grad.double() - r.grad).abs().max(), (q.grad.double() - r.grad).abs().max()
        assert ours <= 2 * theirs + 1e-6 * r.grad.abs().max(), (name, ours, theirs)
    assert any(b >= 16 for g in graphs for b in _blocks(g))  # the bias's and weights' sums


def test_sums_over_the_same_rows_share_their_kernels(graphs):
    # a norm's weight and bias gradients: both partial sums in one kernel reading g once, both
    # results in another; a sum of the first's results (it reads the kernel just before) after
    g, x = _integers(2048, 256), _integers(2048, 256)
    _run(lambda g, x: ((g * x).sum(0), g.sum(0)), g, x)
    assert graphs[0].kernels == 2
    assert graphs[0].triton_code.count("tl.load(arg0 + ") == 1 or graphs[0].triton_code.count("tl.load(arg1 + ") == 1
    _run(lambda g, x: (g.sum(0) * 2).sum() + x.sum(0), g, x)
    assert graphs[1].kernels >= 3


@pytest.mark.parametrize("rows", [100, 300, 1500])  # held whole, looped over (online), split by rows
def test_normalizations_over_the_leading_dim(graphs, rows):
    x = torch.randn(rows, 96) * 2 + 1
    _run(lambda x: (torch.softmax(x, 0), torch.log_softmax(x, 0), x.var(0), x.std(0, correction=0),
                    x.logsumexp(0), x.argmax(0)), x)
    assert max(_blocks(graphs[0])) >= 8  # read across rows
