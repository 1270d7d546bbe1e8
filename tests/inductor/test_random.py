"""Random ops in kernels (``inductor.random_in_kernels``, ``kiln.inductor._lower_random``): the
numbers are Philox4x32-10 of (the call's seed, the op's number, the element's index), checked
against a reference written here; their distributions; reproducibility under
``torch.manual_seed``; independence of threads and fusion; dropout fused into its
neighbours, its backward reading the forward's mask; and, with the config off (the
default), eager's numbers bit for bit."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import kiln
from kiln.inductor import InductorConfig, cache_identity
from kiln.inductor._lower_random import draw_seed

ON = {"inductor.random_in_kernels": True}
Z = 6.0  # statistical bounds: this many standard errors of the statistic (the seeds are fixed anyway)
_M32 = 0xFFFFFFFF


def _philox(counter: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, int, int, int]:
    """Philox4x32-10, written from the paper (Salmon et al., SC'11): the reference the kernels
    are checked against."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & _M32, p1 & _M32, ((p0 >> 32) ^ c3 ^ k1) & _M32, p0 & _M32
        k0, k1 = (k0 + 0x9E3779B9) & _M32, (k1 + 0xBB67AE85) & _M32
    return c0, c1, c2, c3


def _words(seed: int, offset: int, index: int) -> tuple[int, int, int, int]:
    return _philox((index & _M32, index >> 32, offset, 0), (seed & _M32, seed >> 32))


def _mean_bounds(values: torch.Tensor, mean: float, std: float) -> tuple[float, float]:
    """The sample mean of ``values`` and its bound: ``Z`` standard errors."""
    return values.double().mean().item(), Z * std / math.sqrt(values.numel())


# ---------------------------------------------------------------- the generator itself
def test_reference_philox_gives_the_published_known_answers():
    # Random123's known-answer vectors for philox4x32, 10 rounds
    assert _philox((0, 0, 0, 0), (0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
    assert _philox((_M32,) * 4, (_M32, _M32)) == (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)
    assert _philox((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0)) == (
        0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)


def test_rand_is_philox_of_the_seed_the_op_and_the_index(graphs):
    """Element i of the graph's random op k is Philox(seed, k, i): float from the first word's
    high 24 bits, double from the first two words' high 53; the seed is one draw of torch's
    generator per call (the state after the call is the state after that one draw)."""

    def fn(x):
        return torch.rand_like(x), torch.rand_like(x, dtype=torch.float64).t()

    x = torch.randn(3, 5)
    compiled = kiln.compile(fn, options=ON)
    torch.manual_seed(11)
    seed = draw_seed()
    after_one_draw = torch.get_rng_state()
    torch.manual_seed(11)
    single, double = compiled(x)
    assert torch.equal(torch.get_rng_state(), after_one_draw)
    expected_single = [(_words(seed, 0, i)[0] >> 8) / 2**24 for i in range(15)]
    expected_double = [(((w[0] << 32) | w[1]) >> 11) / 2**53 for w in (_words(seed, 1, i) for i in range(15))]
    assert single.flatten().tolist() == expected_single
    assert double.t().flatten().tolist() == expected_double  # the index is the element's, not its place in memory
    # the transposed result is computed in its own loop nest (5 x 3, eager's strides)
    assert (graphs[0].kernels, graphs[0].externs) == (2, 0)


# ---------------------------------------------------------------- distributions and dtypes
@pytest.mark.parametrize("like", [False, True])
def test_uniform_in_every_float_dtype(graphs, like):
    dtypes = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
    bits = {torch.float32: 24, torch.float64: 53, torch.bfloat16: 8, torch.float16: 11}
    n = 1 << 16

    def fn(x):
        if like:
            return tuple(torch.rand_like(x, dtype=d) for d in dtypes)
        return tuple(torch.rand(256, 256, dtype=d) for d in dtypes)

    torch.manual_seed(1)
    outs = kiln.compile(fn, options=ON)(torch.zeros(256, 256))
    for d, u in zip(dtypes, outs, strict=True):
        assert u.dtype == d and u.shape == (256, 256)
        assert u.min() >= 0 and u.max() < 1
        grid = u.double() * 2 ** bits[d]
        assert torch.equal(grid, grid.round())  # on the grid of the dtype's precision: exact in it
        mean, bound = _mean_bounds(u, 0.5, math.sqrt(1 / 12))
        assert abs(mean - 0.5) < bound
        # the variance's standard error: sqrt((mu4 - sigma^4) / n), mu4 = 1/80 for a uniform
        var = u.double().var().item()
        assert abs(var - 1 / 12) < Z * math.sqrt((1 / 80 - 1 / 144) / n)
        assert len(torch.unique(u)) > min(2 ** bits[d], n) // 2  # not a few repeated values
    assert (graphs[0].kernels, graphs[0].externs) == (1, 0)
    assert graphs[0].cpp_code.count("kiln_rand_") >= 4 and not graphs[0].fallbacks


def test_normal_in_every_float_dtype(graphs):
    dtypes = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
    n = 1 << 16

    def fn(x):
        return (*(torch.randn(128, 512, dtype=d) for d in dtypes), torch.randn_like(x))

    torch.manual_seed(2)
    outs = kiln.compile(fn, options=ON)(torch.zeros(128, 512))
    for d, z in zip((*dtypes, torch.float32), outs, strict=True):
        assert z.dtype == d and z.shape == (128, 512) and bool(torch.isfinite(z).all())
        mean, bound = _mean_bounds(z, 0.0, 1.0)
        assert abs(mean) < bound
        assert abs(z.double().std().item() - 1) < Z * math.sqrt(0.5 / n)
        # a normal's tails: 5% beyond 1.96 (a uniform with the same variance has none)
        tail = (z.double().abs() > 1.96).double().mean().item()
        assert abs(tail - 0.05) < Z * math.sqrt(0.05 * 0.95 / n)
        assert float(z.abs().max()) > 3.5
    # each random op draws its own numbers
    assert not torch.equal(outs[0], outs[4])
    assert (graphs[0].kernels, graphs[0].externs) == (1, 0)


def test_bernoulli_with_a_number_and_with_a_tensor(graphs):
    n = 1 << 16

    def fn(x, p):
        return (x.bernoulli(0.25), x.double().bernoulli(0.75), x.long().bernoulli(0.5), torch.bernoulli(p),
                x.bernoulli(0.0), x.bernoulli(1.0))

    p = torch.cat([torch.full((n // 2,), 0.1), torch.full((n // 2,), 0.9)])
    torch.manual_seed(3)
    quarter, three_quarters, half, by_tensor, never, always = kiln.compile(fn, options=ON)(torch.zeros(n), p)
    assert (quarter.dtype, three_quarters.dtype, half.dtype) == (torch.float32, torch.float64, torch.int64)
    for values, q in ((quarter, 0.25), (three_quarters, 0.75), (half, 0.5), (by_tensor[: n // 2], 0.1),
                      (by_tensor[n // 2:], 0.9)):
        assert set(values.unique().tolist()) <= {0, 1}
        mean, bound = _mean_bounds(values, q, math.sqrt(q * (1 - q)))
        assert abs(mean - q) < bound
    assert not never.any() and always.all()
    assert graphs[0].externs == 0 and not graphs[0].fallbacks


def test_bernoulli_in_place_into_an_input(graphs):
    x = torch.full((64, 16), 7.0)
    torch.manual_seed(14)
    out = kiln.compile(lambda t: t.bernoulli_(0.25), options=ON)(x)
    assert out is x and set(x.unique().tolist()) == {0.0, 1.0}
    mean, bound = _mean_bounds(x, 0.25, math.sqrt(0.25 * 0.75))
    assert abs(mean - 0.25) < bound
    assert (graphs[0].kernels, graphs[0].externs) == (1, 0)  # stored straight into the input


def test_a_probability_eager_rejects_raises_eagers_error():
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
        kiln.compile(lambda x: x.bernoulli(1.5) + 1, options=ON)(torch.zeros(4))


# ---------------------------------------------------------------- dropout
def test_dropout_fuses_with_its_neighbours_and_scales_what_it_keeps(graphs):
    p = 0.3

    def fn(x):
        return nn.functional.dropout(x * 2 + 1, p).relu()

    x = torch.rand(256, 256) + 0.5  # every x * 2 + 1 positive: zero only where dropped
    torch.manual_seed(4)
    with torch.no_grad():
        out = kiln.compile(fn, options=ON)(x)
    assert (graphs[0].kernels, graphs[0].externs) == (1, 0)
    kept = out != 0
    mean, bound = _mean_bounds(kept, 1 - p, math.sqrt(p * (1 - p)))
    assert abs(mean - (1 - p)) < bound
    assert torch.equal(out[kept], ((x * 2 + 1) * (1 / (1 - p)))[kept])  # eager's scale, in eager's order
    # off: the same function runs dropout as an ATen call (two results) between two kernels
    kiln.reset()
    with torch.no_grad():
        kiln.compile(fn)(x)
    assert (graphs[1].kernels, graphs[1].externs) == (2, 2)


def test_dropout_of_nothing_and_of_everything_is_eagers(graphs):
    """p = 0 keeps everything as it is; p = 1 multiplies by 0 as eager does (inf and NaN give
    NaN), and the mask is all false; both in every float dtype."""
    x = torch.tensor([1.5, -2.0, float("inf"), float("nan"), 0.0, -0.0])

    def fn(t):
        return tuple(r for d in (torch.float32, torch.float64, torch.bfloat16, torch.float16)
                     for r in (torch.native_dropout(t.to(d), 0.0, True), torch.native_dropout(t.to(d), 1.0, True)))

    torch.manual_seed(5)
    got = kiln.compile(fn, options=ON)(x)
    expected = fn(x)
    for (g_out, g_mask), (e_out, e_mask) in zip(got, expected, strict=True):
        torch.testing.assert_close(g_out, e_out, equal_nan=True, rtol=0, atol=0)
        numbers = ~e_out.isnan()  # a NaN's sign is the conversion's (bf16: eager's drops it)
        assert torch.equal(g_out[numbers].signbit(), e_out[numbers].signbit()) and torch.equal(g_mask, e_mask)
    assert graphs[0].externs == 0


def test_dropout_backward_zeroes_exactly_where_the_forward_dropped(graphs):
    p = 0.4
    drop = nn.Dropout(p)

    def fn(x, w):
        return drop((x * w).exp()) * 3  # exp is never 0: an output is 0 only where dropped

    x, w = torch.randn(64, 32, requires_grad=True), torch.randn(32, requires_grad=True)
    torch.manual_seed(6)
    out = kiln.compile(fn, options=ON)(x, w)
    out.backward(torch.ones_like(out))
    dropped = out == 0
    assert torch.equal(x.grad == 0, dropped) and bool(dropped.any()) and bool((~dropped).any())
    expected = (3 / (1 - p)) * (x * w).exp() * w
    torch.testing.assert_close(x.grad[~dropped], expected.detach()[~dropped])
    forward, backward = graphs
    assert (forward.kernels, forward.externs) == (1, 0) and "kiln_seed" in forward.wrapper_code
    assert "kiln_seed" not in backward.wrapper_code  # it reads the mask the forward saved


# ---------------------------------------------------------------- seeds, threads, fusion
def _mixed(x):
    return (torch.rand_like(x), torch.randn(x.shape[0], 8, dtype=torch.float64),
            nn.functional.dropout(x * 2, 0.5), x.bernoulli(0.5))


def test_manual_seed_reproduces_and_successive_calls_differ(graphs):
    x = torch.randn(16, 8)
    compiled = kiln.compile(_mixed, options=ON)
    torch.manual_seed(7)
    first = compiled(x)
    state = torch.get_rng_state()
    second = compiled(x)
    assert not torch.equal(state, torch.get_rng_state())  # the generator advances
    torch.manual_seed(7)
    again = compiled(x)
    torch.manual_seed(8)
    other = compiled(x)
    for a, b, c, d in zip(first, second, again, other, strict=True):
        assert torch.equal(a, c)
        assert not torch.equal(a, b) and not torch.equal(a, d)
    assert graphs[0].externs == 0


def test_threads_and_fusion_do_not_change_the_numbers(graphs):
    x = torch.randn(256, 512)  # past parallel_min_elements: the outer loop is split between threads

    def fn(t):
        y = nn.functional.dropout(t, 0.5) * torch.rand_like(t) + torch.randn_like(t)
        return y, y.sum(-1)

    compiled = kiln.compile(fn, options=ON)
    threads = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            torch.set_num_threads(n)
            torch.manual_seed(9)
            results.append(compiled(x))
    finally:
        torch.set_num_threads(threads)
    kiln.reset()
    torch.manual_seed(9)
    unfused = kiln.compile(fn, options={**ON, "inductor.fuse": False})(x)
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
    assert torch.equal(results[0][0], unfused[0])
    torch.testing.assert_close(results[0][1], unfused[1])
    assert "num_threads(kiln_threads)" in graphs[0].cpp_code
    assert (graphs[0].kernels, graphs[-1].kernels) == (1, 2)  # the last: fuse off


def test_dynamic_sizes(graphs):
    compiled = kiln.compile(lambda t: torch.rand_like(t) * t, dynamic=True, options=ON)
    for rows in (5, 9):
        torch.manual_seed(10)
        got = compiled(torch.ones(rows, 3))
        torch.manual_seed(10)
        assert torch.equal(compiled(torch.ones(rows, 3)), got) and got.shape == (rows, 3)
        assert got.min() >= 0 and got.max() < 1 and len(got.unique()) == rows * 3
    assert len(graphs) == 1


# ---------------------------------------------------------------- the config
def test_off_gives_eagers_numbers_bit_for_bit(graphs):
    x = torch.randn(16, 8)
    torch.manual_seed(12)
    expected = _mixed(x)
    torch.manual_seed(12)
    got = kiln.compile(_mixed)(x)
    for g, e in zip(got, expected, strict=True):
        assert torch.equal(g, e)
    assert "kiln_seed" not in graphs[0].wrapper_code and "kiln_seed" not in graphs[0].cpp_code
    assert {"aten.rand_like.default", "aten.randn.default", "aten.native_dropout.default",
            "aten.bernoulli.p"} <= set(graphs[0].fallbacks)


def test_the_config_is_part_of_the_cache_identity():
    assert InductorConfig().random_in_kernels is False
    assert cache_identity(InductorConfig()) != cache_identity(InductorConfig(random_in_kernels=True))


def test_a_graph_from_the_disk_cache_draws_its_seed_too(monkeypatch, tmp_path, fresh_kiln):
    from kiln._config import config

    monkeypatch.setattr(config, "graph_cache", True)
    options = {**ON, "inductor.cache_dir": str(tmp_path)}

    def fn(x):
        return nn.functional.dropout(x, 0.5) + torch.rand_like(x)

    x = torch.randn(8, 8)
    results = []
    for _ in range(2):
        kiln.reset()
        torch.manual_seed(13)
        results.append(kiln.compile(fn, options=options)(x))
        stats = kiln.session().graph_cache
    assert stats.hits == 1 and torch.equal(results[0], results[1])


# ---------------------------------------------------------------- Triton kernels
# The Triton code generator's random numbers: on a GPU CUDA tensors, without one CPU tensors
# in triton's interpreter (TRITON_INTERPRET=1, set by this folder's conftest, and
# inductor.cpu_backend='triton'); the C++ kernels (CPU tensors) are the reference.
CUDA = torch.cuda.is_available()
TRITON_DEVICE = "cuda" if CUDA else "cpu"
TRITON_ON = ON if CUDA else {**ON, "inductor.cpu_backend": "triton"}
_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


@pytest.fixture
def triton_graphs(graphs):
    pytest.importorskip("triton")
    return graphs


def _every_random_op(x):
    return (*(torch.rand_like(x, dtype=d) for d in _DTYPES), *(torch.randn_like(x, dtype=d) for d in _DTYPES),
            torch.rand(3, 50, dtype=torch.float64, device=x.device), *torch.native_dropout(x * 2 + 1, 0.3, True), x.bernoulli(0.25),
            x.double().bernoulli(0.75), *(torch.native_dropout(x.to(d), 0.5, True)[1] for d in _DTYPES[1:]))


def _triton_only(graphs, kernels):
    """Every graph is Triton kernels only (no C++, no ATen call), ``kernels`` of them in all."""
    assert graphs and all(not g.cpp_code and g.triton_code and g.externs == 0 and not g.fallbacks for g in graphs)
    assert sum(g.kernels for g in graphs) == kernels


def test_triton_kernels_draw_the_cpp_kernels_numbers(triton_graphs):
    """For one seed, a Triton kernel's uniform numbers (every float dtype), dropout masks and
    bernoulli draws are the C++ kernel's bit for bit; its normal numbers differ at most by the
    rounding of log and cos (libdevice's, numpy's under the interpreter, against libm's)."""
    x = torch.randn(37, 29)  # not a multiple of any block: masked lanes
    torch.manual_seed(21)
    cpp = kiln.compile(_every_random_op, options=ON)(x)
    kiln.reset()
    torch.manual_seed(21)
    tri = kiln.compile(_every_random_op, options=TRITON_ON)(x.to(TRITON_DEVICE))
    assert triton_graphs[0].cpp_code and not triton_graphs[0].triton_code  # the reference: C++
    # the 37 x 29 results (those after the 3 x 50 one joining the kernel before it), and the
    # 3 x 50 one (as in C++)
    _triton_only(triton_graphs[1:], 2)
    assert triton_graphs[0].kernels == 2
    assert "tl.philox" in triton_graphs[1].triton_code and "kiln_seed" in triton_graphs[1].wrapper_code
    assert len(cpp) == len(tri) == 16
    normal = range(4, 8)
    for k, (c, t) in enumerate(zip(cpp, tri, strict=True)):
        t = t.cpu()
        assert t.dtype == c.dtype and t.shape == c.shape
        if k in normal and c.dtype in (torch.float32, torch.float64):
            torch.testing.assert_close(t, c, rtol=1e-5, atol=1e-5)
            assert (t == c).double().mean() > 0.5  # most are the same numbers, not close ones
        elif k in normal:  # (the interpreter's conversion to bfloat16 truncates: not always the nearest)
            torch.testing.assert_close(t, c)
        else:
            assert torch.equal(t, c), f"result {k} ({c.dtype})"


@pytest.mark.parametrize("cols", [300, 40000])  # a persistent row kernel; one looping over its rows
def test_triton_dropout_fuses_into_a_row_kernel(triton_graphs, cols):
    """Dropout between a softmax and a sum: one row kernel, the mask drawn where it is used;
    the numbers are the C++ kernel's for the same seed."""
    def fn(x):
        y = nn.functional.dropout(torch.softmax(x, -1), 0.25)
        return y, y.sum(-1)

    x = torch.randn(3, cols)
    torch.manual_seed(22)
    with torch.no_grad():
        expected = kiln.compile(fn, options=ON)(x)
        kiln.reset()
        torch.manual_seed(22)
        got = kiln.compile(fn, options=TRITON_ON)(x.to(TRITON_DEVICE))
    _triton_only(triton_graphs[1:], 1)
    assert ("for roffset in range(0, rnumel, RBLOCK):" in triton_graphs[1].triton_code) == (cols > 32768)
    assert torch.equal(got[0].cpu() == 0, expected[0] == 0)
    torch.testing.assert_close(got[0].cpu(), expected[0])
    torch.testing.assert_close(got[1].cpu(), expected[1])
    kept = (expected[0] != 0).double().mean().item()
    assert abs(kept - 0.75) < Z * math.sqrt(0.75 * 0.25 / (3 * cols))


def test_triton_statistics(triton_graphs):
    n = 1 << 16
    bits = {torch.float32: 24, torch.float64: 53, torch.bfloat16: 8, torch.float16: 11}

    def fn(x):
        return (*(torch.rand_like(x, dtype=d) for d in _DTYPES), torch.randn_like(x),
                torch.randn_like(x, dtype=torch.float64), x.bernoulli(0.25))

    torch.manual_seed(23)
    outs = kiln.compile(fn, options=TRITON_ON)(torch.zeros(n, device=TRITON_DEVICE))
    _triton_only(triton_graphs, 1)
    for d, u in zip(_DTYPES, outs[:4], strict=True):
        u = u.cpu()
        assert u.dtype == d and u.min() >= 0 and u.max() < 1
        grid = u.double() * 2 ** bits[d]
        assert torch.equal(grid, grid.round())
        mean, bound = _mean_bounds(u, 0.5, math.sqrt(1 / 12))
        assert abs(mean - 0.5) < bound
        assert abs(u.double().var().item() - 1 / 12) < Z * math.sqrt((1 / 80 - 1 / 144) / n)
    for z in outs[4:6]:
        z = z.cpu()
        mean, bound = _mean_bounds(z, 0.0, 1.0)
        assert abs(mean) < bound and bool(torch.isfinite(z).all())
        assert abs(z.double().std().item() - 1) < Z * math.sqrt(0.5 / n)
        tail = (z.double().abs() > 1.96).double().mean().item()
        assert abs(tail - 0.05) < Z * math.sqrt(0.05 * 0.95 / n)
    mean, bound = _mean_bounds(outs[6].cpu(), 0.25, math.sqrt(0.25 * 0.75))
    assert abs(mean - 0.25) < bound and set(outs[6].unique().tolist()) == {0.0, 1.0}
    assert not torch.equal(outs[4].cpu(), outs[5].cpu().float())  # each op its own numbers


def test_triton_manual_seed_reproduces_and_calls_differ(triton_graphs):
    x = torch.randn(16, 8, device=TRITON_DEVICE)
    compiled = kiln.compile(_mixed, options=TRITON_ON)
    torch.manual_seed(24)
    first = compiled(x)
    second = compiled(x)
    torch.manual_seed(24)
    again = compiled(x)
    for a, b, c in zip(first, second, again, strict=True):
        assert torch.equal(a, c) and not torch.equal(a, b)
    assert triton_graphs[0].externs == 0 and not triton_graphs[0].fallbacks


def test_triton_dropout_training_step(triton_graphs):
    """The forward draws the mask in its kernel and saves it; the backward reads it."""
    p = 0.4

    def fn(x, w):
        return nn.functional.dropout((x * w).exp(), p) * 3

    x = torch.randn(64, 32, device=TRITON_DEVICE, requires_grad=True)
    w = torch.randn(32, device=TRITON_DEVICE, requires_grad=True)
    torch.manual_seed(25)
    out = kiln.compile(fn, options=TRITON_ON)(x, w)
    out.backward(torch.ones_like(out))
    dropped = out == 0
    assert torch.equal(x.grad == 0, dropped) and bool(dropped.any()) and bool((~dropped).any())
    torch.testing.assert_close(x.grad[~dropped], ((3 / (1 - p)) * (x * w).exp() * w).detach()[~dropped])
    forward, backward = triton_graphs
    assert (forward.kernels, forward.externs) == (1, 0) and forward.triton_code and not forward.cpp_code
    assert "kiln_seed" in forward.wrapper_code and "kiln_seed" not in backward.wrapper_code
