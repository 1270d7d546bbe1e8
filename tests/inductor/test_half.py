"""bfloat16 and float16 in kiln.inductor's C++ kernels: conversions bit for bit against eager
(every half value, the ties between them, NaN, infinities, signed zeros, subnormals,
overflow), pointwise chains computed in float32, reductions accumulated in float32,
normalizations, a bf16 MLP forward and training step, and that all of it runs as kernels,
not ATen calls.

Results are compared with eager at the default tolerances of the half type. A fused chain
rounds once where eager rounds after each op; float16's default rtol (1e-3) is about one
unit in the last place just above a power of two, so a chain of float16 ops is compared with
eager run in float32 and rounded (the result it computes; torch's Inductor tests call it
``reference_in_float``), and a bfloat16 chain with both."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import kiln

HALF = [torch.bfloat16, torch.float16]
_BITS = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}




def _check(fn, *args):
    compiled = kiln.compile(fn)
    with torch.no_grad():
        expected = fn(*args)
        got = compiled(*args)
    torch.testing.assert_close(got, expected, equal_nan=True)
    return got


def _check_fused(fn, dtype, *args, eager=True):
    """``fn`` compiled against eager computing in float32 and rounding to ``dtype`` at the end,
    and (bfloat16, ``eager``) against eager in ``dtype``."""
    compiled = kiln.compile(fn)
    with torch.no_grad():
        got = compiled(*args)
        in_float = fn(*(a.float() if a.dtype == dtype else a for a in args))
        torch.testing.assert_close(got, torch.utils._pytree.tree_map(lambda t: t.to(dtype), in_float))
        if eager and dtype == torch.bfloat16:
            torch.testing.assert_close(got, fn(*args))
    return got


def _only_kernels(graph):
    """Every op of ``graph`` ran in a C++ kernel: no ATen call, nothing refused for its dtype."""
    assert graph.externs == 0, graph.fallbacks
    assert graph.kernels >= 1


def _same_bits(got, expected):
    """Equal bit patterns, except that a NaN only has to be a NaN."""
    assert got.dtype == expected.dtype and got.shape == expected.shape
    nan = torch.isnan(expected)
    assert torch.equal(torch.isnan(got), nan)
    bits = _BITS[got.dtype]
    mismatch = (got.view(bits) != expected.view(bits)) & ~nan
    assert not mismatch.any(), f"{int(mismatch.sum())} differ, first at {expected[mismatch][:5].tolist()}"


def _every_value(dtype):
    """All 65536 values of a 16-bit float type."""
    return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)


def _hard_floats(dtype):
    """float32 values where rounding to ``dtype`` is delicate: every value of ``dtype``, the
    midpoints between neighbours (ties: to even), a float32 ulp either side of each
    midpoint, the largest finite value's half-way point (overflow), specials and float32
    subnormals; then random bit patterns."""
    values = _every_value(dtype).float()
    finite = torch.unique(values[torch.isfinite(values)])  # sorted; -0.0 and 0.0 merge
    mids = ((finite[:-1].double() + finite[1:].double()) / 2).float()  # exact: a few bits more than dtype
    top = torch.finfo(dtype).max
    edge = torch.tensor([top + (top - finite[-2].item()) / 2])
    edges = torch.cat([mids, edge, -edge])
    inf = torch.tensor(float("inf"))
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), -float("nan"), 1e-45, -1e-40,
                             torch.finfo(torch.float32).max, 65504.0, 65519.99, 65520.0, 65536.0, 1e5, 2.0**-24,
                             2.0**-25, 2.0**-25 * 1.5, 3 * 2.0**-26, 2.0**-14, 2.0**-14 - 2.0**-25])
    random_bits = torch.randint(-(2**31), 2**31 - 1, (1 << 18,), generator=torch.Generator().manual_seed(0),
                                dtype=torch.int32).view(torch.float32)
    return torch.cat([values, edges, torch.nextafter(edges, inf), torch.nextafter(edges, -inf), specials, random_bits])


# ---------------------------------------------------------------- conversions
@pytest.mark.parametrize("dtype", HALF)
def test_float_to_half_rounds_as_eager_bit_for_bit(graphs, dtype):
    x = _hard_floats(dtype)
    got = kiln.compile(lambda t: t.to(dtype))(x)
    _same_bits(got, x.to(dtype))
    _only_kernels(graphs[0])


@pytest.mark.parametrize("dtype", HALF)
def test_half_to_float_is_exact_for_every_value(graphs, dtype):
    x = _every_value(dtype)
    got = kiln.compile(lambda t: (t.float(), t.double()))(x)
    _same_bits(got[0], x.float())
    torch.testing.assert_close(got[1], x.double(), rtol=0, atol=0, equal_nan=True)
    _only_kernels(graphs[0])


@pytest.mark.parametrize("dtype", HALF)
def test_float_round_trip_through_half(graphs, dtype):
    """``x.to(half).float()``: rounded once by the explicit conversion, as eager."""
    x = _hard_floats(dtype)
    got = kiln.compile(lambda t: t.to(dtype).float() * 1)(x)
    _same_bits(got, x.to(dtype).float())
    _only_kernels(graphs[0])


def test_double_integers_and_bools_to_half_go_through_float_as_eager(graphs):
    doubles = torch.tensor([1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-8 + 2.0**-40, 1e300, -1e-300, 65519.99999, 0.1],
                           dtype=torch.float64)
    ints = torch.tensor([2**24 + 2**16 + 1, 2**24 + 1, -(2**40) - 1, 65519, 65520, 7])
    flags = torch.tensor([True, False])

    def fn(d, i, b):
        return d.to(torch.bfloat16), d.half(), i.to(torch.bfloat16), i.half(), b.to(torch.bfloat16), b.half()

    got = kiln.compile(fn)(doubles, ints, flags)
    for g, e in zip(got, fn(doubles, ints, flags), strict=True):
        _same_bits(g, e)
    _only_kernels(graphs[0])


@pytest.mark.parametrize("dtype", HALF)
def test_half_to_integers_bool_and_the_other_half_type(graphs, dtype):
    x = _every_value(dtype)
    x = x[torch.isfinite(x) & (x.float().abs() < 2**31)]
    other = torch.float16 if dtype == torch.bfloat16 else torch.bfloat16

    def fn(t):
        return t.to(torch.int64), t.to(torch.int32), t.bool(), t.to(other)

    got = kiln.compile(fn)(x)
    expected = fn(x)
    for g, e in zip(got[:3], expected[:3], strict=True):
        assert torch.equal(g, e)
    _same_bits(got[3], expected[3])
    _only_kernels(graphs[0])


# ---------------------------------------------------------------- pointwise
def test_an_amins_gradient_finds_the_minimum_it_saved(graphs):
    """amin's gradient divides by the count of elements equal to the saved minimum, recomputed
    in the backward: the product's sigmoid was inline (float32) in the forward and stored
    (bfloat16) in the backward, no element was equal, and the gradient was 0 / 0 in most of
    these draws (torch.compile's too). Each half op now rounds as eager does."""
    def fn(x, y):
        return (nn.functional.softplus(y) * x.sigmoid()).amin(0, keepdim=True) * 1

    torch.manual_seed(0)
    for _ in range(6):
        kiln.reset()
        x, y = torch.randn(2, 3).bfloat16(), torch.randn(2, 3).bfloat16()
        ours = [t.clone().requires_grad_() for t in (x, y)]
        theirs = [t.clone().requires_grad_() for t in (x, y)]
        out, expected = kiln.compile(fn)(*ours), fn(*theirs)
        torch.testing.assert_close(out, expected)
        weight = torch.randn(1, 3).bfloat16()
        out.backward(weight)
        expected.backward(weight)
        for mine, eager in zip(ours, theirs, strict=True):
            torch.testing.assert_close(mine.grad, eager.grad)


@pytest.mark.parametrize("dtype", HALF)
def test_pointwise_chain_is_one_kernel_in_float32(graphs, dtype):
    def fn(a, b):
        gate = nn.functional.gelu(a).sigmoid()
        return (torch.tanh(b) * gate * 0.5).exp() * (a * 0.25 + 2) + nn.functional.silu(b).sigmoid()

    a, b = torch.randn(33, 65).to(dtype), torch.randn(65).to(dtype)
    with torch.no_grad():
        got = kiln.compile(fn)(a, b)
        torch.testing.assert_close(got, fn(a, b))  # eager's rounding after each op, as kiln's
    assert got.dtype == dtype
    (graph,) = graphs
    assert (graph.kernels, graph.externs) == (1, 0)
    code = graph.cpp_code
    # each input loaded as float once and one conversion back on store; inside the chain
    # each op's half result rounded in its register as eager rounds it (the same bits whether
    # a reader computes it inline or loads it), at least one per op of the chain
    name = "bf16" if dtype == torch.bfloat16 else "fp16"
    kernel = code.split('extern "C" void kernel0')[1]
    assert (kernel.count(f"kiln_{name}_to_float("), kernel.count(f"kiln_float_to_{name}(")) == (2, 1)
    assert kernel.count("kiln_round_") >= 10


@pytest.mark.parametrize("dtype", HALF)
def test_arithmetic_comparisons_and_special_values(graphs, dtype):
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e-6, 3.5, -2.5, 0.1,
                      60000.0]).to(dtype)

    def fn(t):
        return (t * 2, t + 1, t - 0.5, t / 3, t.neg(), t.abs(), t.sign(), torch.maximum(t, t * -0.5), t.round(),
                t.clamp(-1, 1), t.relu(), t > 0.1, t == 0.1, t <= t * 0.5, t.isnan(), t.isinf(), t * t)

    got = _check(fn, x)
    assert [g.dtype for g in got[:11]] == [dtype] * 11
    assert graphs[0].externs == 0


@pytest.mark.parametrize("dtype", HALF)
def test_mixed_types_follow_the_traced_types(graphs, dtype):
    h, f = torch.randn(8, 5).to(dtype), torch.randn(8, 5)
    s = torch.tensor(0.75)  # a 0-dim float32 tensor does not promote a half tensor
    i = torch.tensor([257, 1025, 4097, -3, 70000])  # not all representable: cast to the half type first

    def fn(h, f, s, i):
        return (h + f, h * s, h.float() * f, (h > f), torch.where(h > 0, h, s), h.masked_fill(h < 0, 0.5),
                h * i, h < i)

    got = _check(fn, h, f, s, i)
    assert [g.dtype for g in got] == [torch.float32, dtype, torch.float32, torch.bool, dtype, dtype, dtype, torch.bool]
    assert graphs[0].externs == 0


@pytest.mark.parametrize("dtype", HALF)
def test_constants_and_factories_in_half(graphs, dtype):
    def fn(x):
        full = torch.full((3, 4), 0.1, dtype=dtype)
        ramp = torch.arange(12, dtype=dtype).reshape(3, 4)
        return x + full, ramp * x, torch.zeros_like(x) + 1e-3, torch.ones(3, 4, dtype=dtype)

    got = _check(fn, torch.rand(3, 4).to(dtype))
    assert all(g.dtype == dtype for g in got)
    assert graphs[0].externs == 0


# ---------------------------------------------------------------- reductions
@pytest.mark.parametrize("dtype", HALF)
def test_reductions_accumulate_in_float32(graphs, dtype):
    x = torch.rand(6, 4096).to(dtype)  # 4096 positive terms: a half-precision sum would drift far

    def fn(t):
        return t.sum(1), t.mean(1), t.sum(), t.mean(0), t.amax(1), t.amin(0), t.argmax(1), t.max(0), t.var(1)

    got = _check(fn, x)
    assert got[0].dtype == got[1].dtype == dtype
    assert graphs[0].externs == 0
    code = graphs[0].cpp_code
    assert "double acc_" in code  # sums in double, as float32's


@pytest.mark.parametrize("dtype", HALF)
def test_softmax_log_softmax_and_layer_norm(graphs, dtype):
    ln = nn.LayerNorm(96).to(dtype)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    x = (torch.randn(16, 96) * 4).to(dtype)

    _check(lambda t: (torch.softmax(t, -1), ln(t)), x)
    # eager's half log_softmax and logsumexp round inside (near a row's maximum it is off by
    # far more than the tolerance): compared with them in float32
    _check_fused(lambda t: (torch.log_softmax(t, 1), torch.logsumexp(t, 1)), dtype, x, eager=False)
    assert [(g.kernels, g.externs) for g in graphs] == [(1, 0), (1, 0)]


def test_layer_norm_of_bf16_with_float32_weights_gives_float32_statistics(graphs):
    x = torch.randn(4, 32).to(torch.bfloat16)
    w, b = torch.randn(32), torch.randn(32)
    got = _check(lambda t, w, b: torch.ops.aten.native_layer_norm(t, [32], w, b, 1e-5), x, w, b)
    assert [g.dtype for g in got] == [torch.bfloat16, torch.float32, torch.float32]
    assert graphs[0].externs == 0


@pytest.mark.parametrize("dtype", HALF)
def test_argmax_ties_and_nan_as_eager(graphs, dtype):
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [1.0, float("nan"), 5.0, float("nan")], [-1.0, -1.0, -2.0, -3.0]])
    x = x.to(dtype)
    got = _check(lambda t: (t.argmax(1), t.argmin(1), t.amax(1), t.argmax()), x)
    assert got[0].tolist() == [1, 1, 0]
    assert graphs[0].externs == 0


# ---------------------------------------------------------------- models
_MATMULS = {"aten.addmm.default", "aten.mm.default"}


def test_bf16_mlp_forward(graphs):
    model = nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 16), nn.Softmax(-1))
    model = model.to(torch.bfloat16)
    x = torch.randn(8, 32).to(torch.bfloat16)
    compiled = kiln.compile(model)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    (graph,) = graphs
    assert graph.kernels >= 1
    assert set(graph.fallbacks) <= _MATMULS, graph.fallbacks  # only the matrix products are ATen calls


def test_bf16_mlp_training_step(graphs):
    """Without a LayerNorm: with one, the weight gradients upstream of its backward differ
    from eager's by more than the tolerance (its input gradient cancels; kiln.aotgrad traces
    its statistics as float32 where eager keeps them bf16), as torch.compile's do."""
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 16),
                          nn.Softmax(-1))
    model = model.to(torch.bfloat16)
    reference = copy.deepcopy(model)
    compiled = kiln.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.5)
    for _ in range(3):
        x = torch.randn(8, 32).to(torch.bfloat16)
        loss = compiled(x).float().square().mean()
        ref_loss = reference(x).float().square().mean()
        loss.backward()
        ref_loss.backward()
        torch.testing.assert_close(loss, ref_loss)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            assert p.grad.dtype == torch.bfloat16
            torch.testing.assert_close(p.grad, q.grad)
        opt.step()
        ref_opt.step()
        opt.zero_grad()
        ref_opt.zero_grad()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q)
    assert len(graphs) == 2  # forward and backward, compiled once
    for graph in graphs:
        assert graph.kernels >= 1
        assert set(graph.fallbacks) <= _MATMULS, graph.fallbacks


def test_layer_norm_statistics_of_a_half_input_have_its_dtype_on_the_cpu():
    # the CPU kernel returns mean and rstd in the input's dtype (the meta kernel, written for
    # other devices, says float32): the traced graph must agree, and the backward that reads
    # them must give eager's gradients
    torch.manual_seed(0)
    ln = torch.nn.LayerNorm(16).to(torch.bfloat16)
    x = torch.randn(8, 16, dtype=torch.bfloat16)

    def stats(x):
        return torch.ops.aten.native_layer_norm(x, [16], ln.weight, ln.bias, 1e-5)

    kiln.reset()
    with torch.no_grad():
        got, expected = kiln.compile(stats)(x), stats(x)
    assert [t.dtype for t in got] == [t.dtype for t in expected] == [torch.bfloat16] * 3
    for mine, theirs in zip(got, expected, strict=True):
        torch.testing.assert_close(mine, theirs)

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4))
    model = model.to(torch.bfloat16)
    eager, reference = copy.deepcopy(model), copy.deepcopy(model).float()
    kiln.compile(model)(x).float().square().mean().backward()
    eager(x).float().square().mean().backward()
    reference(x.float()).square().mean().backward()
    for k in (0, 2):  # before and after the norm: eager's gradients (the ones before read mean and rstd)
        for mine, theirs in zip(model[k].parameters(), eager[k].parameters(), strict=True):
            torch.testing.assert_close(mine.grad, theirs.grad)
    for mine, theirs, exact in zip(model[1].parameters(), eager[1].parameters(), reference[1].parameters(),
                                   strict=True):
        # the norm's own gradients are reductions kept in float32 (eager rounds in between):
        # never further from the float32 computation than eager's
        assert (mine.grad.float() - exact.grad).abs().max() <= (theirs.grad.float() - exact.grad).abs().max()
    kiln.reset()
