"""kiln.inductor's Triton code generator: the kernels of CUDA tensors, checked against eager
with the number of kernels each graph becomes. On a GPU the tests run CUDA tensors; without
one, CPU tensors through triton's interpreter (``TRITON_INTERPRET=1``, set by this folder's
conftest, and ``inductor.cpu_backend='triton'``), which runs the same generated kernels."""

from __future__ import annotations

import logging
import re

import pytest
import torch
import torch.nn.functional as F

import kiln

pytest.importorskip("triton")

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
OPTIONS = None if CUDA else {"inductor.cpu_backend": "triton"}


@pytest.fixture
def interpreted(graphs):
    """The CompiledGraph of every graph compiled in the test."""
    return graphs


def _on(value):
    if isinstance(value, torch.Tensor):
        return value.to(DEVICE)
    return value


def _run(fn, *args, dynamic=None, **compare):
    args = [_on(a) for a in args]
    compiled = kiln.compile(fn, options=OPTIONS, dynamic=dynamic)
    actual = compiled(*args)
    torch.testing.assert_close(actual, fn(*args), equal_nan=True, **compare)
    return actual


def _triton_only(graphs, kernels):
    """Every graph is Triton kernels only (no C++), ``kernels`` of them in all."""
    assert graphs and all(not g.cpp_code for g in graphs)
    assert [len(re.findall(r"^@triton\.jit(\(.*\))?\ndef kernel", g.triton_code, re.MULTILINE))
            for g in graphs] == [g.kernels for g in graphs]
    assert sum(g.kernels for g in graphs) == kernels


def _synchronized(code):
    """Whether every kernel of a Triton module loads an element an earlier stage of it stored
    only after a barrier (on a GPU another thread of the block may have stored it): stored
    values are reused from registers, else reloaded behind ``tl.debug_barrier()``."""
    for kernel in code.split("@triton.jit")[1:]:
        stored, fenced = set(), set()
        for line in kernel.splitlines():
            line = line.strip()
            if line == "tl.debug_barrier()":
                fenced |= stored
            if line.startswith("tl.store("):
                stored.add(line[len("tl.store("):].split(" ")[0])
            for name in stored - fenced:
                if f"tl.load({name} +" in line:
                    return False
    return True


def test_pointwise_chain_is_one_flat_kernel(interpreted):
    _run(lambda x, y: F.gelu(x + y) * 2 - torch.tanh(x), torch.randn(5, 7), torch.randn(7))
    _triton_only(interpreted, 1)
    assert "xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)\n" in interpreted[0].triton_code


@pytest.mark.parametrize("cols", [33, 40000])  # persistent (a row in registers), looped (above 32768)
def test_softmax_rows_are_one_kernel(interpreted, cols):
    _run(lambda x: torch.softmax(x, -1), torch.randn(3, cols))
    _triton_only(interpreted, 1)
    assert _synchronized(interpreted[0].triton_code)
    code = interpreted[0].triton_code
    assert ("for roffset in range(0, rnumel, RBLOCK):" in code) == (cols > 32768)


@pytest.mark.parametrize(("dtype", "cols", "warps"), [(torch.float32, 4096, 8), (torch.bfloat16, 4096, 4),
                                                      (torch.float32, 32768, 32), (torch.bfloat16, 32768, 32),
                                                      (torch.float32, 100, 2)])
def test_row_kernel_warps_follow_the_bytes_of_a_row(interpreted, dtype, cols, warps):
    """The launch heuristic measured on an H100 (``_kernel._rows_launch``): a persistent row of
    32768 gets 32 warps, a float32 row of 4096 eight, a bfloat16 one four."""
    _run(lambda x: torch.softmax(x, -1), torch.randn(2, cols).to(dtype))
    assert re.search(rf"\bnum_warps={warps}\b", interpreted[0].wrapper_code), interpreted[0].wrapper_code


def test_norms(interpreted):
    x, w, b = torch.randn(6, 50), torch.randn(50), torch.randn(50)
    _run(lambda x, w, b: F.layer_norm(x, (50,), w, b), x, w, b)
    _run(lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, x, w)
    _run(lambda x, y, w, b: F.gelu(F.layer_norm(x + y, (50,), w, b)), x, torch.randn(6, 50), w, b)
    _triton_only(interpreted, 3)
    assert all(_synchronized(g.triton_code) for g in interpreted)
    # the row is loaded once: the reductions and the normalization share its block
    assert interpreted[0].triton_code.count("tl.load(arg0") == 1


def test_independent_looped_reductions_share_one_loop(interpreted):
    """Rows too long for registers (40000): reductions of one row that read no other's result
    fold in one loop, loading the row once; one reading another's result (a sum after the
    max it subtracts) gets a loop of its own, after the first's. The shared loop's sums are of
    whole numbers, exact in float32 in any order (a sum of 40000 random floats differs from
    eager's by more than the default tolerance on a GPU), and its argmin sees ties across
    blocks (the first index wins)."""
    x = torch.randn(3, 40000)
    whole, other = (torch.randint(-8, 8, (3, 40000)).float() for _ in range(2))
    _run(lambda x, y: (x.sum(1), (x * y).sum(1), x.amax(1), x.argmin(1)), whole, other)
    code = interpreted[0].triton_code
    assert code.count("for roffset in range(0, rnumel, RBLOCK):") == 1
    assert code.count("tl.load(arg0") == 1
    _run(lambda x: (x - x.amax(1, keepdim=True)).abs().sum(1), x, atol=1e-2, rtol=1e-5)
    _run(lambda x: (x.sum(1), (x - x.amax(1, keepdim=True)).abs().sum(1)), x, atol=1e-2, rtol=1e-5)
    for graph in interpreted[1:]:
        assert graph.triton_code.count("for roffset in range(0, rnumel, RBLOCK):") == 2
    _triton_only(interpreted, 3)


def test_reductions_with_nan_and_ties(interpreted):
    x = torch.randn(7, 9)
    x[1, 3] = float("nan")
    x[2, :] = 1.0  # ties: the first index wins
    x[4, 5] = float("inf")
    _run(lambda x: (x.amax(1), x.amin(0), x.argmax(1), x.argmin(0), x.sum(), x.prod(1), (x > 0).any(1),
                    (x > -3).all(0)), x)
    # the same reductions looped over rows too long for registers (the accumulators' fold)
    y = torch.randn(2, 40000)
    y[0, 1234] = float("nan")
    y[1, 30000] = 9.0
    _run(lambda y: (y.amax(1), y.argmax(1), y.argmin(1), y.sum(1), (y > 3.5).any(1)), y)


def test_integers_bools_and_python_division(interpreted):
    a = torch.tensor([7, -7, 7, -7, 0, 5])
    b = torch.tensor([2, 2, -2, -2, 3, -5])
    _run(lambda a, b: (a // b, a % b, torch.fmod(a, b), torch.remainder(a, b), a.sum(), a.max(), ~(a > 0),
                       (a * b).to(torch.int32)), a, b)
    f = torch.tensor([7.5, -7.5, 7.5, -7.5, 0.0, -0.0])
    g = torch.tensor([2.0, 2.0, -2.0, -2.0, 3.0, 3.0])
    _run(lambda f, g: (f // g, f % g, torch.fmod(f, g), torch.floor(f), torch.sign(f), f.to(torch.int64)), f, g)


def test_half_types_compute_in_float(interpreted):
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    _run(lambda x: torch.softmax(x, -1), x)
    _run(lambda x: (x.half() * 3 + 1, x.float().sum(1)), x)
    _run(lambda x: torch.exp(x.double()).sqrt(), x)


def test_views_gather_and_concat(interpreted):
    x = torch.randn(4, 6, 5)
    _run(lambda x: (x.transpose(0, 2) * 2, x.permute(1, 0, 2).sum(-1), torch.flip(x, [1]) + 1), x)
    w = torch.randn(10, 8)
    idx = torch.tensor([[1, 9, 0], [3, 3, 7]])
    _run(lambda w, i: F.embedding(i, w) * 2, w, idx)
    _run(lambda x, y: torch.cat([x, y * 2], 1).sum(1), torch.randn(3, 4), torch.randn(3, 5))


def test_dynamic_sizes_are_kernel_arguments(interpreted):
    def fn(x):
        return torch.softmax(x, -1) * x.sum(0)

    compiled = kiln.compile(fn, options=OPTIONS, dynamic=True)
    for rows, cols in ((3, 20), (5, 70)):
        x = torch.randn(rows, cols, device=DEVICE)
        torch.testing.assert_close(compiled(x), fn(x))
    assert len(interpreted) == 1  # one graph for both sizes
    code = interpreted[0].triton_code
    assert "for roffset in range(0, rnumel, RBLOCK):" in code  # a symbolic row: looped
    assert kiln.session().stats.unique_graphs == 1


def test_zero_size_and_zero_dim(interpreted):
    _run(lambda x: (x * 2, x.sum(0)), torch.randn(0, 4))
    _run(lambda x: (x + 1, x.sum(), x.argmax()), torch.tensor(3.0))


def test_training_step(interpreted):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 4)).to(DEVICE)
    reference = [p.detach().clone().requires_grad_() for p in model.parameters()]

    def loss_of(x):
        return torch.log_softmax(model(x), -1).sum()

    x = torch.randn(5, 8, device=DEVICE)
    kiln.compile(loss_of, options=OPTIONS)(x).backward()
    expected = torch.func.functional_call(model, dict(zip([n for n, _ in model.named_parameters()], reference,
                                                          strict=True)), (x,))
    torch.log_softmax(expected, -1).sum().backward()
    for p, r in zip(model.parameters(), reference, strict=True):
        torch.testing.assert_close(p.grad, r.grad)
    assert len(interpreted) == 2 and all(g.triton_code and not g.cpp_code for g in interpreted)
    # the forward stores the normalization's statistics (saved for the backward) and reads them
    # back in the same kernel: from registers, never unsynchronized from memory
    assert all(_synchronized(g.triton_code) for g in interpreted)


def test_attention_inference(interpreted):
    """CUDA's attention returns None for the logsumexp no gradient needs, where the trace saw a
    tensor: the wrapper checks its layout only when it is there."""
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    with torch.no_grad():
        _run(lambda q, k, v: F.scaled_dot_product_attention(q * 2, k, v, is_causal=True) + 1, q, k, v)


def test_scans_and_scatters_are_kernels(interpreted):
    x = torch.randn(4, 6)
    index = torch.tensor([[0, 1, 2, 0, 1, 2]] * 4)
    _run(lambda x, i: (torch.cumsum(x, 1) + 1, torch.zeros(4, 3, device=x.device).scatter_add(1, i, x) * 2), x, index)
    assert not interpreted[0].fallbacks
    assert "tl.cumsum(" in interpreted[0].triton_code and "tl.atomic_add(" in interpreted[0].triton_code


@pytest.mark.skipif(CUDA, reason="on a GPU the device-side assert ends the CUDA context, as eager's does")
def test_an_index_out_of_range_is_an_error_not_a_wrong_answer(interpreted):
    compiled = kiln.compile(lambda w, i: F.embedding(i, w) + 1, options=OPTIONS)  # CPU tensors
    w = torch.randn(10, 3)
    torch.testing.assert_close(compiled(w, torch.tensor([1, 9])), F.embedding(torch.tensor([1, 9]), w) + 1)
    with pytest.raises(Exception, match="index out of range"):
        compiled(w, torch.tensor([1, 10]))


def test_an_index_read_twice_is_checked_once(interpreted):
    """Two tables gathered at the same indices: one check of the index in the kernel, which
    still fails for an index out of range (under the interpreter: on a GPU the device-side
    assert ends the CUDA context, as eager's does)."""
    def fn(w, v, i):
        return w[i] * 2 + v[i]

    w, v = torch.randn(10, 3, device=DEVICE), torch.randn(10, 3, device=DEVICE)
    compiled = kiln.compile(fn, options=OPTIONS)
    i = torch.tensor([1, 9, 0, 9], device=DEVICE)
    torch.testing.assert_close(compiled(w, v, i), fn(w, v, i))
    (graph,) = interpreted
    assert graph.triton_code.count("kiln_index_check(") == 1
    if not CUDA:
        with pytest.raises(Exception, match="out of bounds"):
            compiled(w, v, torch.tensor([1, 10]))


def test_positions_from_the_kernels_own_loop_variables_are_not_checked(interpreted):
    """A position embedding's positions (an arange: the kernel's own loop variable) are in
    range by construction: no device-side check (a kernel without one compiles without
    triton's debug mode, about a third faster for a GPT-2's first kernel), while token ids
    loaded from memory are still checked."""
    def fn(ids, wte, wpe):
        positions = torch.arange(ids.shape[1], device=ids.device)
        return F.embedding(ids, wte) + F.embedding(positions, wpe)

    ids = torch.randint(0, 50, (2, 16), device=DEVICE)
    wte, wpe = torch.randn(50, 8, device=DEVICE), torch.randn(32, 8, device=DEVICE)
    compiled = kiln.compile(fn, options=OPTIONS)
    torch.testing.assert_close(compiled(ids, wte, wpe), fn(ids, wte, wpe))
    (graph,) = interpreted
    assert graph.triton_code.count("kiln_index_check(") == 1  # the ids'
    if not CUDA:
        with pytest.raises(Exception, match="index out of range"):
            compiled(torch.full((2, 16), 50, device=DEVICE), wte, wpe)


@pytest.mark.parametrize(("shift", "checks"), [(4, 0), (5, 1), (-3, 1)])
def test_an_index_from_loop_variables_is_checked_where_it_may_leave_the_range(interpreted, shift, checks):
    """Positions shifted within the table need no check; shifted past its end, or below 0,
    they keep it (negative ones wrap, as indexing does): eager's answers and errors."""
    def fn(w):
        return w[torch.arange(6, device=w.device) + shift] * 2

    w = torch.randn(10, 3, device=DEVICE)
    compiled = kiln.compile(fn, options=OPTIONS)
    if shift == 5 and not CUDA:  # index 10 of 10 rows
        with pytest.raises(Exception, match="out of bounds"):
            compiled(w)
    elif shift != 5:
        torch.testing.assert_close(compiled(w), fn(w))
    (graph,) = interpreted
    assert graph.triton_code.count("kiln_index_check(") == checks


def test_an_unchecked_index_past_the_table_in_masked_lanes_reads_nothing(interpreted):
    """Rows gathered at their own positions (``embedding(arange(n), w)``): the blocks' last
    lanes are past the flat size (masked), where the row variable, and so the unchecked index,
    runs past the table; those lanes load nothing. Static and dynamic sizes (one graph each)."""
    def fn(w):
        return F.embedding(torch.arange(w.shape[0], device=w.device), w) * 2

    compiled = kiln.compile(fn, options=OPTIONS)
    for n in (21, 37, 1000):
        w = torch.randn(n, 3, device=DEVICE)
        torch.testing.assert_close(compiled(w), fn(w))
    assert [g.triton_code.count("kiln_index_check(") for g in interpreted] == [0, 0]


def test_index_bounds_over_loop_variables():
    import sympy

    from kiln.inductor._ir import loop_vars
    from kiln.inductor.triton._ops import index_bounds
    from kiln.symshapes import FloorDiv, Mod

    x0, x1 = loop_vars("x", 2)
    size = sympy.Symbol("s0", integer=True, nonnegative=True)
    extents = {"x0": sympy.Integer(8), "x1": size}
    assert index_bounds(x0 * 3 + 2, extents) == (2, 23)
    assert index_bounds(5 - x0, extents) == (-2, 5)
    assert index_bounds(x1 + 1, extents) == (1, size)
    assert index_bounds(Mod(x0 + 5, 4), extents) == (0, 3)
    assert index_bounds(FloorDiv(x0 * 16, 5), extents) == (0, 22)
    assert index_bounds(x0 * x1, extents) is None  # (a product of variables)
    assert index_bounds(x0 + size, extents) is None  # (a size: no upper bound)
    assert index_bounds(Mod(x0 - 1, 4), extents) is None  # (a remainder of a value that may be negative)
    assert index_bounds(sympy.Symbol("r0", integer=True, nonnegative=True), extents) is None


def test_index_bounds_hold_for_every_value_of_the_loop_variables():
    """``index_bounds`` is what lets a kernel skip an index check: over random expressions of
    two loop variables (sums, constant multiples, floor divisions and remainders by
    constants, nested), every value the variables take lies within the bounds it gives."""
    import itertools
    import random

    import sympy

    from kiln.inductor._ir import loop_vars
    from kiln.inductor.triton._ops import index_bounds
    from kiln.symshapes import FloorDiv, Mod

    x0, x1 = loop_vars("x", 2)
    rng = random.Random(0)

    def expression(depth):
        pick = rng.randrange(6 if depth else 3)
        if pick == 0:
            return x0
        if pick == 1:
            return x1
        if pick == 2:
            return sympy.Integer(rng.randint(-5, 9))
        if pick == 3:
            return expression(depth - 1) + expression(depth - 1)
        if pick == 4:
            return rng.choice([-3, -1, 2, 7]) * expression(depth - 1)
        return (FloorDiv if rng.random() < 0.5 else Mod)(expression(depth - 1), rng.choice([1, 2, 3, 8]))

    bounded = 0
    for _ in range(400):
        expr = expression(3)
        extents = {"x0": sympy.Integer(rng.randint(1, 6)), "x1": sympy.Integer(rng.randint(1, 6))}
        bounds = index_bounds(expr, extents)
        if bounds is None:
            continue
        bounded += 1
        low, high = int(bounds[0]), int(bounds[1])
        for a, b in itertools.product(range(int(extents["x0"])), range(int(extents["x1"]))):
            value = int(expr.subs({x0: a, x1: b}))
            assert low <= value <= high, (expr, extents, (a, b), value, bounds)
    assert bounded > 200


def test_without_the_interpreter_a_cpu_triton_graph_runs_as_aten(graphs, caplog, monkeypatch):
    """``cpu_backend='triton'`` needs TRITON_INTERPRET=1 for CPU tensors: without it the graph is
    refused (a warning naming the variable) and runs as its ATen graph, with eager's answer."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x = torch.randn(3, 5)
    with caplog.at_level(logging.WARNING, logger="kiln"):
        torch.testing.assert_close(kiln.compile(lambda x: torch.softmax(x, -1),
                                                options={"inductor.cpu_backend": "triton"})(x),
                                   torch.softmax(x, -1))
    assert "TRITON_INTERPRET=1" in caplog.text
    assert graphs == []


def test_graph_cache_keeps_the_triton_module(tmp_path, monkeypatch):
    import kiln.inductor._api as inductor_api
    from kiln.aotgrad import aot_compile
    from kiln.inductor import InductorConfig, aten_compiler, decompositions

    compiled = []
    original = inductor_api.compile_graph

    def record(gm, config=None, builders=None, group=None):
        compiled.append(original(gm, config, builders, group))
        return compiled[-1]

    monkeypatch.setattr(inductor_api, "compile_graph", record)

    def backend(gm, example_inputs):
        compiler = aten_compiler(InductorConfig(cache_dir=str(tmp_path), cpu_backend="cpp" if CUDA else "triton"))
        return aot_compile(gm, example_inputs, kiln.compile_context(), fw_compiler=compiler,
                           bw_compiler=compiler, decompositions=decompositions())

    x = torch.randn(4, 9, device=DEVICE)
    for _ in range(2):
        kiln.reset()
        with torch.no_grad():
            torch.testing.assert_close(kiln.compile(lambda t: torch.softmax(t, -1) * 2, backend=backend)(x),
                                       torch.softmax(x, -1) * 2)
    assert [c.from_cache for c in compiled] == [False, True]
    assert compiled[1].triton_code == compiled[0].triton_code != ""
    assert list((tmp_path / "triton").glob("*.py"))


# ------------------------------------------------------------------ OpInfo samples
# pointwise ops, comparisons, reductions, normalizations and views of torch's OpInfo database,
# the first two float32 samples of each (on the GPU moved to CUDA; references are eager's on CPU)
OPINFO_OPS = (
    "add", "mul", "sub", "div.no_rounding_mode", "div.floor_rounding", "div.trunc_rounding", "neg", "abs", "exp", "log", "sqrt",
    "rsqrt", "sigmoid", "tanh", "erf", "pow", "clamp", "where", "maximum", "minimum", "remainder", "fmod",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "eq", "lt", "ge", "logical_and", "sum", "mean",
    "amax", "amin", "argmax", "argmin", "var", "std", "prod", "softmax", "log_softmax", "logsumexp",
    "nn.functional.layer_norm", "permute", "transpose", "reshape", "expand", "select", "slice", "flip", "repeat",
    "cat", "gather", "take_along_dim", "nn.functional.embedding", "index_select", "constant_pad_nd",
)


@pytest.fixture(scope="module")
def opinfo():
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from benchmarks import inductor_opinfo

    return inductor_opinfo, {inductor_opinfo.full_name(op): op for op in inductor_opinfo.load_op_db()}


def _to_device(value):
    if isinstance(value, torch.Tensor):
        return value.to(DEVICE)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_device(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("name", OPINFO_OPS)
def test_opinfo_sample_matches_eager(interpreted, opinfo, name):
    helpers, by_name = opinfo
    op = by_name[name]
    samples = helpers.fresh_samples(op, 2)
    expected, why = helpers.eager_references(op, 2)
    assert samples and expected, why
    compiled = kiln.compile(helpers.make_caller(op.op), options=OPTIONS)
    for index, reference in expected.items():
        sample = samples[index]
        actual = compiled(_to_device(sample.input), *_to_device(sample.args), **_to_device(sample.kwargs))
        problem = helpers.compare(actual, _to_device(reference))
        assert problem is None, f"sample {index}: {problem}"
    assert interpreted, "no graph compiled"
    assert all(not g.cpp_code for g in interpreted)
    assert any(g.triton_code for g in interpreted) or all(g.kernels == 0 for g in interpreted)


def test_a_module_defines_only_the_helpers_its_kernels_call(interpreted):
    """A graph's module decorates the helper functions its kernels call, directly or through
    another helper (random normals call the Philox generator), and no others: each
    ``@triton.jit`` definition costs a warm start its source read."""
    x = torch.randn(8, 33)
    _run(lambda x: torch.sigmoid(x) * 2, x)
    _run(lambda x: torch.maximum(x, x.flip(0)).argmax(-1), x)
    options = {**(OPTIONS or {}), "inductor.random_in_kernels": True}
    out = kiln.compile(lambda x: x + torch.randn_like(x), options=options)(_on(x))
    assert out.shape == x.shape and torch.isfinite(out).all()
    defined = [set(re.findall(r"^def (kiln_\w+)\(", g.triton_code, re.MULTILINE)) for g in interpreted]
    assert defined[0] == set()
    assert defined[1] == {"kiln_maximum", "kiln_argmax"}
    assert defined[2] == {"kiln_philox", "kiln_randn_f32"}
