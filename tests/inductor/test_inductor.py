"""kiln.inductor end to end (backend "inductor"): results against eager, kernel counts of the
fusions the scheduler promises, views without copies, dtypes, the ATen fallback, training,
dynamic shapes, output layouts, the disk cache and the fusion switch."""

from __future__ import annotations

import copy
import logging
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import kiln
import kiln.inductor


def _check(fn, *args, dynamic=None, **kwargs):
    compiled = kiln.compile(fn, dynamic=dynamic, **kwargs)
    with torch.no_grad():
        expected = fn(*args)
        got = compiled(*args)
    torch.testing.assert_close(got, expected, equal_nan=True)
    return got


# ---------------------------------------------------------------- fusion
def test_layer_norm_gelu_residual_is_one_kernel(graphs):
    ln = nn.LayerNorm(64)

    def fn(x, y):
        return nn.functional.gelu(ln(x)) + y

    _check(fn, torch.randn(32, 64), torch.randn(32, 64))
    (graph,) = graphs
    assert (graph.kernels, graph.externs) == (1, 0)
    assert "std::erf" in graph.cpp_code


def test_softmax_and_log_softmax_are_one_kernel_each(graphs):
    x = torch.randn(16, 100) * 10
    _check(lambda t: torch.softmax(t, -1), x)
    _check(lambda t: torch.log_softmax(t, 1), x + 1)
    assert [(g.kernels, g.externs) for g in graphs] == [(1, 0), (1, 0)]


def test_pointwise_chain_is_one_kernel_with_one_buffer(graphs):
    def fn(a, b):
        return ((a * 2 + b).sin() * a.exp()).sigmoid() - b.abs()

    _check(fn, torch.randn(7, 33), torch.randn(33))
    (graph,) = graphs
    assert graph.kernels == 1
    assert graph.wrapper_code.count("_empty(") == 1


def test_fuse_false_gives_one_kernel_per_buffer_and_the_same_values(graphs):
    def fn(x):
        return torch.softmax(x, -1) * 2

    x = torch.randn(8, 16)
    fused = _check(fn, x)
    kiln.reset()
    unfused = _check(fn, x, options={"inductor.fuse": False})
    torch.testing.assert_close(fused, unfused)
    assert [g.kernels for g in graphs] == [1, 4]  # the max, the exponentials, their sum, the output


# ---------------------------------------------------------------- reductions
@pytest.mark.parametrize("dims,keepdim", [((0,), False), ((1,), True), ((0, 2), False), (None, False)])
def test_sum_mean_amax_amin_over_dims(graphs, dims, keepdim):
    x = torch.randn(5, 6, 7)

    def fn(t):
        if dims is None:
            return t.sum(), t.mean(), t.amax(), t.amin()
        return (t.sum(dims, keepdim=keepdim), t.mean(dims, keepdim=keepdim), t.amax(dims, keepdim=keepdim),
                t.amin(dims, keepdim=keepdim))

    _check(fn, x)
    assert graphs[0].externs == 0


def test_max_propagates_nan_and_argmax_takes_the_first_extreme(graphs):
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [1.0, float("nan"), 5.0, float("nan")], [-1.0, -1.0, -2.0, -3.0]])
    got = _check(lambda t: (t.amax(1), t.argmax(1), t.argmin(1), t.max(1), t.min(0)), x)
    assert got[1].tolist() == [1, 1, 0]
    assert graphs[0].externs == 0


def test_variance_std_prod_any_all_logsumexp(graphs):
    x = torch.randn(6, 9)
    x[2] = float("-inf")  # logsumexp of a row of -inf is -inf, not nan

    def fn(t):
        finite = torch.nan_to_num(t, neginf=0.0)
        return (finite.var(1), finite.var(0, correction=0), finite.std(1, keepdim=True), finite.prod(1),
                (t > 0).any(1), (t > -1).all(0), torch.logsumexp(t, 1))

    _check(fn, x)


def test_integer_and_bool_sums_give_int64(graphs):
    x = torch.randint(-5, 5, (4, 5))
    got = _check(lambda t: (t.sum(1), (t > 0).sum(0), t.amax(0)), x)
    assert got[0].dtype == got[1].dtype == torch.int64


# ---------------------------------------------------------------- views and layouts
def test_views_are_index_remaps(graphs):
    def fn(x):
        a = x.permute(2, 0, 1)[1:, :, ::2]
        b = x.transpose(0, 1).reshape(6, -1)
        c = x[:, -1].unsqueeze(0).expand(3, 4, 5)
        return a * 2, b + 1, c.contiguous() * 3, x.select(1, 0).t() - 1

    _check(fn, torch.randn(4, 6, 5))
    assert graphs[0].externs == 0


def test_outputs_keep_eager_strides(graphs):
    x = torch.randn(8, 3)
    got = _check(lambda t: (t.t() * 2, t * 2), x)
    assert got[0].stride() == (x.t() * 2).stride() and got[1].stride() == (3, 1)


def test_reshape_of_a_non_contiguous_value(graphs):
    _check(lambda t: (t.t() + 1).reshape(-1), torch.randn(4, 6))


def test_non_contiguous_inputs(graphs):
    x = torch.randn(6, 8).t()
    y = torch.randn(12, 6)[::2]
    _check(lambda a, b: a.sum(0) + b.sum(1), x, y)


# ---------------------------------------------------------------- dtypes
def test_integer_bool_and_double_arithmetic(graphs):
    i = torch.randint(-10, 10, (5, 4))
    b = torch.rand(5, 4) > 0.5
    d = torch.randn(5, 4, dtype=torch.float64)

    def fn(i, b, d):
        return i * 3 + 1, i / 4, b & (i > 0), ~b, d * i, (i < 2.5), torch.where(b, i, -i), d.exp().to(torch.float32)

    got = _check(fn, i, b, d)
    assert [t.dtype for t in got] == [torch.int64, torch.float32, torch.bool, torch.bool, torch.float64,
                                      torch.bool, torch.int64, torch.float32]


def test_special_values_match_eager(graphs):
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e-30, 3.5, -2.5])

    def fn(t):
        return (t.sign(), torch.maximum(t, t.flip(0)), t.round(), t.rsqrt(), t.log1p(), t.sigmoid(),
                torch.remainder(t, 1.5), torch.div(t, 2, rounding_mode="floor"), t.clamp(-1, 1))

    _check(fn, x)


# ---------------------------------------------------------------- fallback
def test_ops_without_a_lowering_run_as_aten_calls(graphs):
    def fn(x, w):
        return torch.cummax(x @ w, 1).values.sort(1).values.relu()

    _check(fn, torch.randn(4, 5), torch.randn(5, 6))
    (graph,) = graphs
    assert graph.externs >= 3 and graph.kernels == 1
    assert "aten.cummax.default" in graph.fallbacks


def test_integer_division_by_zero_raises_as_in_eager(graphs):
    def fn(x, y):
        return x // y

    x, y = torch.tensor([4, 5]), torch.tensor([2, 0])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(x, y)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        kiln.compile(fn)(x, y)


@pytest.mark.parametrize("divisor", [3, -3, 7, 1, -1])
def test_integer_remainder_and_fmod_by_a_number(graphs, divisor):
    x = torch.randint(-20, 20, (50,))
    x[0] = torch.iinfo(torch.int64).min  # its remainder by -1 traps in C++: an ATen call there

    def fn(x):
        return x % divisor, torch.fmod(x, divisor), torch.remainder(x.to(torch.int8), divisor), x.roll(3)

    for got, expected in zip(kiln.compile(fn)(x), fn(x), strict=True):
        assert torch.equal(got, expected)
    (graph,) = graphs
    assert graph.externs == (3 if divisor == -1 else 0), graph.fallbacks


def test_input_mutation_is_seen_by_the_caller(graphs):
    def fn(x):
        x.mul_(2)
        return x.sum()

    a, b = torch.randn(4, 4), None
    b = a.clone()
    expected = fn(b)
    got = kiln.compile(fn)(a)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(a, b)


def test_values_computed_before_an_input_is_written_see_the_old_values(graphs):
    # `before` is not computed when the graph writes x (it is inlined where it is read): it
    # must be computed before the write, not recomputed from the new x
    def fn(x, y):
        before = x * 2 + 1
        x.add_(y)
        after = x * 3
        x.mul_(2)
        return before + after, before.sum()

    x, y = torch.randn(5), torch.randn(5)
    x_eager = x.clone()
    expected = fn(x_eager, y)
    got = kiln.compile(fn)(x, y)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x, x_eager)


def test_size_arithmetic_nodes_and_dynamic_numbers(graphs):
    def fn(x, n):
        return x * n + x.shape[0]

    compiled = kiln.compile(fn)
    for n, size in ((2, 3), (3, 3), (4, 5), (7, 6)):
        x = torch.randn(size)
        torch.testing.assert_close(compiled(x, n), fn(x, n))


# ---------------------------------------------------------------- training
def test_training_steps_match_eager(graphs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 4), nn.Softmax(-1))
    reference = copy.deepcopy(model)
    compiled = kiln.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(8, 16)
        loss, ref_loss = compiled(x).square().sum(), reference(x).square().sum()
        loss.backward()
        ref_loss.backward()
        torch.testing.assert_close(loss, ref_loss)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)
        opt.step()
        ref_opt.step()
        opt.zero_grad()
        ref_opt.zero_grad()
    assert len(graphs) == 2  # forward and backward, compiled once
    assert all(g.kernels >= 1 for g in graphs)


# ---------------------------------------------------------------- dynamic shapes
def test_dynamic_batch_compiles_once_and_matches_every_size(graphs):
    ln = nn.LayerNorm(16)

    def fn(x, y):
        return torch.softmax(nn.functional.gelu(ln(x)) + y, -1).sum(0)

    compiled = kiln.compile(fn, dynamic=True)
    for n in (3, 5, 8, 1, 2):
        x, y = torch.randn(n, 16), torch.randn(n, 16)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x, y), fn(x, y))
    assert len(graphs) == 1
    assert "int64_t s" in graphs[0].cpp_code  # the size is a kernel argument


def test_dynamic_reshape_through_floor_division(graphs):
    def fn(x):
        return x.view(-1, 4).t().contiguous() * 2

    compiled = kiln.compile(fn, dynamic=True)
    for n in (8, 12, 20):
        x = torch.randn(n)
        got = compiled(x)
        torch.testing.assert_close(got, fn(x))
        assert got.stride() == fn(x).stride()
    assert len(graphs) == 1


def test_a_float_of_sizes_is_computed_by_the_wrapper(graphs):
    """``x.shape[1] / 3`` is a float of the sizes (a SymFloat the graph computes): the wrapper
    computes it for each call's sizes (kiln.inductor failed on the graph: "an ATen call
    without a traced value")."""
    def fn(x):
        return x * (2.0 / (x.shape[0] - 1)) + x.shape[1] / 3

    compiled = kiln.compile(fn, dynamic=True, fullgraph=True)
    for rows, cols in ((5, 8), (7, 11), (2, 3)):
        x = torch.randn(rows, cols)
        torch.testing.assert_close(compiled(x), fn(x))
    assert len(graphs) == 1
    assert "(2.0 / (" in graphs[0].wrapper_code


def test_a_variances_gradient_with_a_symbolic_count(graphs):
    """The backward of ``var`` over a symbolic count scales by ``2.0 / (s0 - 1)``: aotgrad
    builds that float (it refused the graph: "a size expression kiln cannot compute in the
    graph: 2.0"), and the wrapper computes it."""
    def fn(x):
        return torch.var(x, 0) * 3

    compiled = kiln.compile(fn, dynamic=True, fullgraph=True)
    for rows in (5, 9, 2):
        x = torch.randn(rows, 6, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        out, expected = compiled(x), fn(x_ref)
        torch.testing.assert_close(out, expected)
        weight = torch.randn(6)
        out.backward(weight)
        expected.backward(weight)
        torch.testing.assert_close(x.grad, x_ref.grad)
    assert len(graphs) == 2  # the forward and the backward, for every size


def test_cumprods_gradient_with_symbolic_sizes_is_compiled(graphs):
    """cumprod's backward scatters into a tensor and reads it again: aotgrad rebuilds the read
    as an ``as_strided`` of the written storage, holding the same traced tensor as the
    scatter, which kiln.inductor took for the record of an in-place view op and refused."""
    def fn(x):
        return torch.sigmoid(x).cumprod(-1) + x

    compiled = kiln.compile(fn, dynamic=True, fullgraph=True)
    for rows, cols, transposed in ((2, 130, False), (7, 134, True)):
        x = torch.randn(cols, rows).t() if transposed else torch.randn(rows, cols)
        x, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
        out, expected = compiled(x), fn(x_ref)
        torch.testing.assert_close(out, expected)
        weight = torch.randn(rows, cols)
        out.backward(weight)
        expected.backward(weight)
        torch.testing.assert_close(x.grad, x_ref.grad)
    assert len(graphs) == 4  # a forward and a backward for each layout (the transposed one recompiles)


def test_an_aten_argument_named_by_a_python_keyword(graphs):
    """``uniform``'s ``from``: the wrapper passes it in a ``**`` dict (``from=-1.0`` was a
    SyntaxError once kiln.inductor took this graph, which aotgrad's ``as_strided`` of the
    written tensor had kept from it before)."""
    def fn(x):
        return x + torch.empty_like(x).uniform_(-1.0, 1.0) * 0

    x = torch.randn(3, 4)
    torch.testing.assert_close(kiln.compile(fn, fullgraph=True)(x), x)
    assert len(graphs) == 1 and "**{'from': -1.0}" in graphs[0].wrapper_code


def test_expand_of_a_size_guarded_to_be_1_broadcasts(graphs):
    # after a recompile every size is a symbol; expand's guard makes the middle one 1
    def fn(x, n):
        return x.expand(5, 5, n) * 2

    compiled = kiln.compile(fn)
    for shape in ((5, 1, 1), (5, 1, 5), (5, 1, 3)):
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x, shape[2]), fn(x, shape[2]))


# ---------------------------------------------------------------- cache and logs
def test_a_second_process_compiles_no_cpp(tmp_path):
    script = textwrap.dedent("""
        import torch, kiln
        kiln.config.raise_internal_errors = True
        f = kiln.compile(lambda x: torch.softmax(x * 3, -1) + 1)
        x = torch.randn(4, 8)
        torch.testing.assert_close(f(x), torch.softmax(x * 3, -1) + 1)
        (builder,) = kiln.session().kernels.values()
        print("compiled", builder.stats.compiled, "disk", builder.stats.disk_hits)
    """)
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
            for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert runs[0].stdout.split() == ["compiled", "1", "disk", "0"]
    assert runs[1].stdout.split() == ["compiled", "0", "disk", "1"]


def test_output_code_log_shows_wrapper_and_kernels(graphs, caplog):
    with caplog.at_level(logging.INFO, logger="kiln.output_code"):
        _check(lambda x: (x + 1).sum(1), torch.randn(3, 4))
    text = caplog.text
    assert "def call(args):" in text and 'extern "C" void kernel0' in text and "// buf" in text


def test_gelu_tanh_and_silu_and_erf_in_double(graphs):
    x = torch.linspace(-6, 6, 97, dtype=torch.float64)
    _check(lambda t: (nn.functional.gelu(t, approximate="tanh"), nn.functional.silu(t), torch.erf(t) * math.pi), x)


# ---------------------------------------------------------------- found by the OpInfo sweep
def test_channel_shuffle_is_not_taken_for_a_view_of_its_input(graphs):
    x = torch.arange(16.0).reshape(1, 4, 2, 2)
    _check(lambda t: nn.functional.channel_shuffle(t, 2), x)


def test_in_place_view_op_on_an_aten_result_keeps_its_sizes(graphs):
    def fn(x):
        y = torch.cumsum(x, 0)
        y.unsqueeze_(0)
        return y.transpose(1, 2)

    got = _check(fn, torch.randn(3, 4))
    assert got.shape == (1, 4, 3)


def test_data_dependent_values_and_sizes(graphs):
    assert kiln.compile(lambda t: t.item())(torch.tensor(2.5)) == 2.5
    assert kiln.compile(lambda t: int(t.argmax().item()))(torch.arange(3.0)) == 2
    x = torch.tensor([0.0, 1.0, 0.0, 2.0])
    torch.testing.assert_close(kiln.compile(torch.nonzero)(x), torch.nonzero(x))


def test_zero_dim_squeeze_empty_reshape_and_fused_sizes(graphs):
    _check(lambda t: t.squeeze(0) * 2, torch.tensor(1.5))
    assert _check(lambda t: t.reshape(0, 1, 1) + 1, torch.randn(1, 0, 1, 1)).shape == (0, 1, 1)
    # two loops of different symbolic sizes in one kernel: both sizes are parameters
    compiled = kiln.compile(lambda a, b: (torch.zeros(b.shape[0]), a + 1), dynamic=True)
    a, b = torch.randn(3), torch.randn(2)
    got = compiled(a, b)
    torch.testing.assert_close(got, (torch.zeros(2), a + 1))


def test_attention_then_contiguous_view_as_in_gpt2(graphs):
    def fn(q, k, v):
        o = nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(2, 16, 64)
        return o.contiguous().view(-1, 64)

    q, k, v = (torch.randn(2, 4, 16, 16) for _ in range(3))
    got = _check(fn, q, k, v)
    assert got.stride() == (64, 1)
    assert graphs and "scaled_dot_product" in graphs[0].wrapper_code


def test_in_place_optimizer_update_is_compiled(graphs):
    def update(m, g):
        m.mul_(0.9).add_(g, alpha=0.1)
        return m

    m, g = torch.randn(1000), torch.randn(1000)
    expected = update(m.clone(), g)
    kiln.compile(update)(m, g)
    torch.testing.assert_close(m, expected)
    assert graphs and graphs[0].kernels >= 1


def test_reductions_over_outer_dimensions_run_blocked(graphs):
    x = torch.randn(37, 50)
    x[3, 7] = float("nan")
    y = torch.randn(5, 9, 21)
    _check(lambda a, b: (a.sum(0), a.amax(0), (a * 0.5).prod(0), b.sum(1), b.amin((0, 1))), x, y)
    assert graphs[0].cpp_code.count("outputs at a time") >= 2  # a lone reduction per kernel


def test_arange_is_lowered(graphs):
    def fn(x):
        return torch.arange(x.shape[0]) * 2 + x, torch.arange(3, 11, 2, dtype=torch.float32) + 1

    _check(fn, torch.randn(6))
    assert "aten.arange.start_step" not in graphs[0].fallbacks


# ---------------------------------------------------------------- interop with torch.compile
def test_kiln_inductor_behind_torch_compile(graphs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4))
    reference = copy.deepcopy(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=kiln.inductor.backend)
    x = torch.randn(5, 8)
    compiled(x).square().sum().backward()
    reference(x).square().sum().backward()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)
    assert len(graphs) == 2 and all(g.kernels >= 1 for g in graphs)  # forward and backward
    torch._dynamo.reset()


def test_torch_inductor_behind_kiln_frontend():
    kiln.reset()

    def fn(x, y):
        return torch.softmax(x * 2 + y, -1).sum(0)

    compiled = kiln.compile(fn, backend="torch_inductor")
    for rows in (4, 6):
        x, y = torch.randn(rows, 8), torch.randn(8)
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    assert kiln.session().stats.unique_graphs >= 1
    kiln.reset()


def test_split_unbind_cat_and_pad_are_lowered(graphs):
    def fn(x, y, i):
        a, b, c = x.split([1, 1, 2], dim=1)
        d, e = x.unbind(1)[:2]
        return (a * 2, b + c[:, :1], d - e, torch.cat([x, y * 2], 1).sin(),
                torch.cat([x, x.t()[:2], torch.zeros(0, 4)], 0) + 1, torch.cat([i.float(), x[0]], 0),
                nn.functional.pad(x, (1, 2, 3, 0), value=7.0), nn.functional.pad(y, (2, 2)))

    _check(fn, torch.randn(4, 4), torch.randn(4, 3), torch.arange(4))
    (graph,) = graphs
    assert graph.externs == 0, graph.wrapper_code


def test_rotary_style_cat_with_symbolic_lengths(graphs):
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def fn(q, cos, sin):
        return q * cos + rotate_half(q) * sin

    compiled = kiln.compile(fn, dynamic=True)
    for length in (5, 9, 12):
        q, cos, sin = torch.randn(2, length, 8), torch.randn(length, 8), torch.randn(length, 8)
        torch.testing.assert_close(compiled(q, cos, sin), fn(q, cos, sin))
    assert len(graphs) == 1 and graphs[0].externs == 0


def test_a_float_made_dynamic_is_read_at_run_time(graphs):
    # kiln turns a float argument that changes into a graph input: the compiled graph must use
    # each call's value (it embedded the traced SymFloat: NaN, found by the OpInfo sweep)
    def fn(x, margin):
        return (x + margin).clamp_min(0).mean(), x * margin, margin

    x = torch.randn(5, 10, requires_grad=True)
    compiled = kiln.compile(fn)
    for margin in (1e-6, 1.0, 10.0, -3.5):
        got, expected = compiled(x, margin), fn(x, margin)
        torch.testing.assert_close(got, expected)
        got[0].backward()
        grad, x.grad = x.grad, None
        expected[0].backward()
        torch.testing.assert_close(grad, x.grad)
        x.grad = None
    assert any(g.externs for g in graphs)  # the ops reading the number are ATen calls


@pytest.mark.parametrize("fn", [torch.tanh, torch.sin, nn.functional.gelu], ids=["tanh", "sin", "gelu"])
@pytest.mark.parametrize("shape", [(33, 7), (5, 37)])
@pytest.mark.parametrize("dim", [0, -1])
def test_a_maximum_is_an_element_of_what_it_reduced(fn, shape, dim):
    """``v == v.amax()`` holds somewhere in every row: ``v`` has the same bits wherever a kernel
    computes it. glibc's vector ``tanhf`` and its scalar one (a vectorized loop's tail) differ
    in an ulp, so ``v`` is computed once (or in loops of the same shape), never by two kernels
    that map elements to lanes differently (the backward's recomputation did:
    tests/aotgrad/test_partition.py)."""
    def f(x, y):
        v = fn(x * 1.3 + y)
        m = v.amax(dim, keepdim=True)
        return (v == m).sum(dim), v * 2, m

    torch.manual_seed(0)
    x, y = torch.randn(*shape), torch.randn(*shape)
    hits, twice, m = kiln.compile(f)(x, y)
    assert hits.min().item() >= 1
    assert ((twice / 2) == m).any(dim).all()  # the stored v too
