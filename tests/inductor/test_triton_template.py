"""Matrix products as Triton template kernels (max-autotune's ``matmul_templates``,
``kiln.inductor.triton._template``): mm, addmm and bmm become one kernel each with the
pointwise ops reading their result fused in as the epilogue, checked against eager with the
kernels and ATen calls counted. Without a GPU the kernels run on CPU tensors in triton's
interpreter (``TRITON_INTERPRET=1``, this folder's conftest), where ``"auto"`` takes the
template; on a GPU ``"auto"`` measures it against cuBLAS (``@pytest.mark.gpu``).

Most inputs are whole numbers, whose products and sums are exact in float32 in any order (a
tile's ``tl.dot`` adds in another order than eager's matmul); where they are not, the
tolerance is float32's for a sum of that many terms."""

from __future__ import annotations

import logging
import re

import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln.inductor import InductorConfig, cache_identity

pytest.importorskip("triton")

from kiln.inductor.triton import _autotune
from kiln.inductor.triton._template import template_candidates, template_launch

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


@pytest.fixture
def options(tmp_path):
    """max-autotune with templates always taken, Triton kernels, a cache of the test's own."""
    base = {"inductor.max_autotune": True, "inductor.matmul_templates": "always", "inductor.cache_dir": str(tmp_path)}
    return base if CUDA else {**base, "inductor.cpu_backend": "triton"}


def _whole(*sizes, low=-3, high=4, dtype=torch.float32):
    return torch.randint(low, high, sizes).to(dtype).to(DEVICE)


def _templates(graph):
    return len(re.findall(r"acc = (tl.dot|kiln_half_dot)\(a_block, b_block, acc", graph.triton_code))


def test_mm_with_its_epilogue_is_one_kernel(graphs, options):
    a, b = _whole(33, 40), _whole(40, 50)
    fn = lambda a, b: torch.relu(a @ b) * 2 - 1  # noqa: E731
    torch.testing.assert_close(kiln.compile(fn, options=options)(a, b), fn(a, b), rtol=0, atol=0)
    (graph,) = graphs
    assert (graph.kernels, graph.externs, _templates(graph)) == (1, 0, 1)
    assert "tl.store(buf" in graph.triton_code and graph.triton_code.count("tl.store(") == 1  # the product stays a register
    assert graph.fused["kernel0"][0] == "mm"


def test_linear_bias_gelu_over_three_dims_is_one_kernel(graphs, options):
    """A linear layer over (batch, tokens, features): aotgrad's graph is a view to 2-D rows,
    addmm, a view back to 3-D and the GELU; the bias add and GELU fuse into the product's
    kernel, whose rows become (batch, tokens)."""
    x, w, bias = _whole(2, 24, 48), _whole(40, 48), _whole(40)
    fn = lambda x, w, b: F.gelu(F.linear(x, w, b))  # noqa: E731
    torch.testing.assert_close(kiln.compile(fn, options=options)(x, w, bias), fn(x, w, bias))
    (graph,) = graphs
    assert (graph.kernels, graph.externs, _templates(graph)) == (1, 0, 1)
    assert "x1 = xindex % 24" in graph.triton_code


def test_addmm_scales(graphs, options):
    x, w, bias = _whole(20, 32), _whole(32, 24), _whole(24)
    fn = lambda x, w, b: torch.addmm(b, x, w, beta=0.5, alpha=2.0)  # noqa: E731
    torch.testing.assert_close(kiln.compile(fn, options=options)(x, w, bias), fn(x, w, bias), rtol=0, atol=0)
    nan_bias = torch.full((24,), float("nan"), device=DEVICE)
    fn0 = lambda x, w, b: torch.addmm(b, x, w, beta=0)  # noqa: E731  (eager ignores the bias, NaN and all)
    torch.testing.assert_close(kiln.compile(fn0, options=options)(x, w, nan_bias), fn0(x, w, nan_bias))
    assert [g.externs for g in graphs] == [0, 0] and sum(_templates(g) for g in graphs) == 2


def test_bmm_and_its_epilogue(graphs, options):
    a, b = _whole(3, 20, 40), _whole(3, 40, 17)
    fn = lambda a, b: torch.bmm(a, b) + 1  # noqa: E731
    torch.testing.assert_close(kiln.compile(fn, options=options)(a, b), fn(a, b), rtol=0, atol=0)
    (graph,) = graphs
    assert (graph.kernels, graph.externs, _templates(graph)) == (1, 0, 1)
    assert "bindex = pid // (tiles_m * tiles_n)" in graph.triton_code


def test_transposed_and_offset_operands(graphs, options):
    """Operands read through their strides and offsets: a transposed matrix (a weight's
    gradient reads ``grad.t()``), a slice starting inside its storage."""
    a, b = _whole(40, 33), _whole(50, 60)
    fn = lambda a, b: a.t() @ b[10:, 5:55]  # noqa: E731
    torch.testing.assert_close(kiln.compile(fn, options=options)(a, b), fn(a, b), rtol=0, atol=0)
    (graph,) = graphs
    assert (graph.kernels, graph.externs, _templates(graph)) == (1, 0, 1)


def test_a_product_that_is_an_output_is_stored_and_its_readers_see_the_stored_value(graphs, options):
    """A bfloat16 product returned and read by the epilogue: stored rounded, and the epilogue
    reads the rounded value, as a later kernel would (not the float32 accumulator)."""
    a = torch.randn(32, 64, dtype=torch.bfloat16, device=DEVICE)
    b = torch.randn(64, 48, dtype=torch.bfloat16, device=DEVICE)
    fn = lambda a, b: (lambda p: (p, p.float() * 2))(a @ b)  # noqa: E731
    product, doubled = kiln.compile(fn, options=options)(a, b)
    torch.testing.assert_close(product, fn(a, b)[0])
    assert torch.equal(doubled, product.float() * 2)
    (graph,) = graphs
    assert (graph.kernels, graph.externs, _templates(graph)) == (1, 0, 1)
    assert "acc_rounded = acc.to(tl.bfloat16).to(tl.float32)" in graph.triton_code


def test_half_types(graphs, options):
    for dtype in (torch.bfloat16, torch.float16):
        a, b = _whole(24, 32, low=-2, high=3, dtype=dtype), _whole(32, 40, low=-2, high=3, dtype=dtype)
        fn = lambda a, b: torch.sigmoid(a @ b)  # noqa: E731
        torch.testing.assert_close(kiln.compile(fn, options=options)(a, b), fn(a, b))
    assert [(g.kernels, g.externs, _templates(g)) for g in graphs] == [(1, 0, 1), (1, 0, 1)]


def test_float32_sums_of_random_numbers(graphs, options):
    """Not whole numbers: float32 products summed in tiles, within float32's error for 300 terms."""
    a, b = torch.randn(70, 300, device=DEVICE), torch.randn(300, 90, device=DEVICE)
    torch.testing.assert_close(kiln.compile(lambda a, b: a @ b, options=options)(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert graphs[0].externs == 0 and _templates(graphs[0]) == 1


def test_dynamic_rows(graphs, options):
    """One graph for every row count: the rows a kernel argument, the ragged last tile masked."""
    w = _whole(40, 24)
    fn = lambda x, w: torch.tanh(x @ w)  # noqa: E731
    compiled = kiln.compile(fn, options=options, dynamic=True)
    for rows in (17, 40, 129):
        x = _whole(rows, 40)
        torch.testing.assert_close(compiled(x, w), fn(x, w))
    assert len(graphs) == 1 and _templates(graphs[0]) == 1 and graphs[0].externs == 0


def test_training_step_gradients(graphs, options):
    """A linear layer's forward and backward: the forward's addmm and the backward's two
    products (the input's gradient, and the weight's, over the tokens) are templates."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(32, 48).to(DEVICE)
    with torch.no_grad():
        layer.weight.copy_(torch.randint(-2, 3, layer.weight.shape))
        layer.bias.copy_(torch.randint(-2, 3, layer.bias.shape))
    twin = torch.nn.Linear(32, 48).to(DEVICE)
    twin.load_state_dict(layer.state_dict())
    x = _whole(4, 16, 32).requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    fn = lambda m, x: torch.relu(m(x)).sum()  # noqa: E731
    loss = kiln.compile(fn, options=options)(layer, x)
    loss.backward()
    expected = fn(twin, x2)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    for got, want in [(x.grad, x2.grad), (layer.weight.grad, twin.weight.grad), (layer.bias.grad, twin.bias.grad)]:
        torch.testing.assert_close(got, want)
    assert [g.externs for g in graphs] == [0, 0]
    assert [_templates(g) for g in graphs] == [1, 2]


def test_autotuned_tiles_each_compute_the_answer(graphs, options, monkeypatch):
    """Under the interpreter every candidate tile runs once and must give the heuristic's
    results (a candidate that does not is dropped: none is)."""
    monkeypatch.setitem(options, "inductor.matmul_templates", "auto")  # the interpreter: always the template
    a, b = _whole(33, 40), _whole(40, 70)
    fn = lambda a, b: (a @ b).abs()  # noqa: E731
    torch.testing.assert_close(kiln.compile(fn, options=options)(a, b), fn(a, b), rtol=0, atol=0)
    (graph,) = graphs
    (result,) = [r for r in graph.autotuned if r.kernel == "kernel0"]
    assert len(result.candidates) > 4 and all(t is not None for t in result.timings)
    assert result.chosen in result.candidates


def test_without_max_autotune_or_with_never_a_product_is_an_aten_call(graphs, options, tmp_path):
    a, b = _whole(33, 40), _whole(40, 50)
    plain = {k: v for k, v in options.items() if k not in ("inductor.max_autotune", "inductor.matmul_templates")}
    kiln.compile(lambda a, b: a @ b, options=plain)(a, b)
    kiln.compile(lambda a, b: a @ b, options={**options, "inductor.matmul_templates": "never"})(a, b)
    assert [(g.externs, _templates(g)) for g in graphs] == [(1, 0), (1, 0)]


def test_small_or_other_dtypes_stay_aten_calls(graphs, options):
    kiln.compile(lambda a, b: a @ b, options=options)(_whole(8, 40), _whole(40, 50))  # 8 rows: cuBLAS's
    kiln.compile(lambda a, b: a @ b, options=options)(_whole(20, 40, dtype=torch.float64), _whole(40, 50, dtype=torch.float64))
    assert [(g.externs, _templates(g)) for g in graphs] == [(1, 0), (1, 0)]


def test_cpp_kernels_keep_aten_products(graphs, tmp_path):
    """max-autotune with C++ kernels (CPU tensors, the default backend; on a GPU machine too):
    no template."""
    a, b = _whole(33, 40).cpu(), _whole(40, 50).cpu()
    fn = lambda a, b: torch.relu(a @ b)  # noqa: E731
    options = {"inductor.max_autotune": True, "inductor.cache_dir": str(tmp_path)}
    torch.testing.assert_close(kiln.compile(fn, options=options)(a, b), fn(a, b), rtol=0, atol=0)
    (graph,) = graphs
    assert graph.externs == 1 and graph.cpp_code and not graph.triton_code


def test_tf32_products_when_torch_allows_them(graphs, options):
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        a, b = _whole(33, 40), _whole(40, 50)  # whole numbers of 3 bits: exact in TF32 too
        fn = lambda a, b: (a @ b) * 3  # noqa: E731
        torch.testing.assert_close(kiln.compile(fn, options=options)(a, b), fn(a, b), rtol=0, atol=0)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    assert "input_precision='tf32'" in graphs[0].triton_code


def test_a_reader_of_other_elements_gets_a_kernel_of_its_own(graphs, options):
    """A transpose of the product reads other elements than a tile holds: not an epilogue."""
    a, b = _whole(33, 40), _whole(40, 50)
    fn = lambda a, b: (a @ b).t() + 1  # noqa: E731  (the output of t(): a kernel over (50, 33))
    torch.testing.assert_close(kiln.compile(fn, options=options)(a, b), fn(a, b), rtol=0, atol=0)
    (graph,) = graphs
    assert graph.externs == 0 and _templates(graph) == 1


def test_a_row_reduction_of_the_product_is_not_an_epilogue(graphs, options):
    """A softmax over the product's rows needs whole rows; a tile holds part of one."""
    a, b = _whole(33, 40) / 8, _whole(40, 50) / 8
    fn = lambda a, b: torch.softmax(a @ b, -1)  # noqa: E731
    torch.testing.assert_close(kiln.compile(fn, options=options)(a, b), fn(a, b))
    (graph,) = graphs
    assert graph.kernels == 2 and _templates(graph) == 1


def test_candidates_and_heuristic():
    assert template_launch(4096, 4096, torch.bfloat16) == {"XBLOCK": 128, "RBLOCK": 128, "KBLOCK": 64, "GROUP_M": 8,
                                                           "num_warps": 4, "num_stages": 3}
    assert template_launch(20, None, torch.float32)["XBLOCK"] == 32
    cands = template_candidates(template_launch(40, 40, torch.float32), 40, 40, torch.float32)
    assert all(c["XBLOCK"] <= 64 and c["RBLOCK"] <= 64 for c in cands)
    assert len(cands) == len({tuple(sorted(c.items())) for c in cands})


def test_k_a_multiple_of_every_step_loads_without_a_k_mask(graphs, options):
    """K = 256 (a multiple of 128, the widest step of every launch) loads without a mask along
    K, for each candidate's step; K = 200 keeps the mask and its ragged last step."""
    from kiln.inductor.triton._template import _MAX_KBLOCK, even_k

    for dtype in (torch.float32, torch.bfloat16):
        assert max(c["KBLOCK"] for c in template_candidates(template_launch(4096, 4096, dtype), 4096, 4096,
                                                             dtype)) <= _MAX_KBLOCK
    assert even_k(256) and not even_k(200) and not even_k(64)
    for k in (256, 200):
        a, b = _whole(48, k), _whole(k, 40)
        fn = lambda a, b: torch.relu(a @ b) + 1  # noqa: E731
        torch.testing.assert_close(kiln.compile(fn, options=options)(a, b), fn(a, b), rtol=0, atol=0)
    even, ragged = graphs
    assert _templates(even) == _templates(ragged) == 1
    assert "knumel - k" not in even.triton_code and "tl.load(a_ptr, mask=xmask, other=0.0)" in even.triton_code
    assert ragged.triton_code.count("knumel - k") == 2


def test_tf32_is_part_of_the_graph_key():
    """A float32 template's ``tl.dot`` precision follows ``allow_tf32``: a graph compiled under
    one setting is not the other's."""
    config = InductorConfig(max_autotune=True)
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        before = cache_identity(config)
        torch.backends.cuda.matmul.allow_tf32 = True
        assert cache_identity(config) != before
        assert cache_identity(InductorConfig()) == cache_identity(InductorConfig())
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_auto_choice_is_measured_and_right(graphs, options, dtype, caplog):
    """On a GPU ``"auto"`` times the product as a template against cuBLAS; either way the
    answer is eager's, and the choice is logged and kept on disk."""
    options = {**options, "inductor.matmul_templates": "auto"}
    x = torch.randn(8, 512, 1024, device=DEVICE, dtype=dtype)
    layer = torch.nn.Linear(1024, 4096, device=DEVICE, dtype=dtype)
    fn = lambda m, x: F.gelu(m(x))  # noqa: E731
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="kiln.perf_hints"):
        out = kiln.compile(fn, options=options)(layer, x)
        expected = fn(layer, x)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-4, "atol": 1e-4}
    torch.testing.assert_close(out, expected, **tol)
    assert any("matmul 4096 x 4096 x 1024" in r.getMessage() for r in caplog.records)
    (graph,) = graphs
    assert _templates(graph) + graph.externs == 1
    assert _autotune is not None


def test_auto_credits_an_elementwise_reader(graphs, options, monkeypatch):
    """``"auto"`` asks whether the product has an elementwise reader (through reshapes), which
    its measurement credits to the template; a product declined is an ATen call."""
    from kiln.inductor.triton import _template_choice

    asked = []

    def decline(body, sizes, dtype, device, hint, store, config, epilogue=False, policy=None):
        asked.append(epilogue)
        return False

    monkeypatch.setattr(_template_choice, "template_wins", decline)
    options = {**options, "inductor.matmul_templates": "auto"}
    a, b = _whole(33, 40), _whole(40, 50)
    x, w, bias = _whole(2, 24, 48), _whole(40, 48), _whole(40)
    for fn, args in [(lambda a, b: torch.relu(a @ b), (a, b)), (lambda a, b: a @ b, (a, b)),
                     (lambda x, w, b: F.gelu(F.linear(x, w, b)), (x, w, bias))]:
        torch.testing.assert_close(kiln.compile(fn, options=options)(*args), fn(*args))
    assert asked == [True, False, True]
    assert [(g.externs, _templates(g)) for g in graphs] == [(1, 0), (1, 0), (1, 0)]


def test_a_template_graph_from_the_graph_cache(graphs, options, monkeypatch):
    """A new process state (kiln.reset) loads the graph, its template kernel and chosen tiles
    included, from the whole-graph cache: nothing lowered or measured again."""
    from kiln._config import config

    monkeypatch.setattr(config, "graph_cache", True)
    a, b = _whole(33, 40), _whole(40, 50)
    fn = lambda a, b: torch.relu(a @ b) + 1  # noqa: E731
    for _ in range(2):
        kiln.reset()
        torch.testing.assert_close(kiln.compile(fn, options=options)(a, b), fn(a, b), rtol=0, atol=0)
    assert kiln.session().graph_cache.hits == 1 and len(graphs) == 1
    assert graphs[0].autotuned and _templates(graphs[0]) == 1


def test_one_operand_twice(graphs, options):
    """``x @ x.t()``: both operands one buffer, read through two windows."""
    x = _whole(40, 24)
    fn = lambda x: (x @ x.t()) - 2  # noqa: E731
    torch.testing.assert_close(kiln.compile(fn, options=options)(x), fn(x), rtol=0, atol=0)
    (graph,) = graphs
    assert (graph.kernels, graph.externs, _templates(graph)) == (1, 0, 1)


def test_dynamic_batched_product(graphs, options):
    fn = lambda a, b: torch.bmm(a, b).relu()  # noqa: E731
    compiled = kiln.compile(fn, options=options, dynamic=True)
    for batch, m in ((2, 20), (5, 33)):
        a, b = _whole(batch, m, 32), _whole(batch, 32, 24)
        torch.testing.assert_close(compiled(a, b), fn(a, b), rtol=0, atol=0)
    assert len(graphs) == 1 and _templates(graphs[0]) == 1 and graphs[0].externs == 0


def test_a_product_viewed_as_heads_is_stored_once(graphs, options):
    """A fused q/k/v projection viewed as (batch, tokens, 3, heads, dim) and permuted: the bias
    add stays the template's epilogue, stored once in the product's layout, and the heads are
    views of it (no second kernel copying it into the permuted order)."""
    x, w, bias = _whole(2, 24, 40), _whole(120, 40), _whole(120)
    fn = lambda x, w, b: F.linear(x, w, b).view(2, 24, 3, 4, 10).permute(2, 0, 3, 1, 4)  # noqa: E731
    torch.testing.assert_close(kiln.compile(fn, options=options)(x, w, bias), fn(x, w, bias), rtol=0, atol=0)
    (graph,) = graphs
    assert (graph.kernels, graph.externs, _templates(graph)) == (1, 0, 1)
