"""Layout optimization (``kiln.inductor._layout``): convolutions run channels-last, the values
between them are stored channels-last, and every output keeps eager's strides. Results
against eager (evaluation and a training step: loss, gradients of weights and input, running
statistics), output strides, the exact kernels and layout copies of each graph, the switch
(``inductor.layout_optimization``), the convolutions the rule refuses, the graphs lowered
again in eager's layout, and the forward's layout handed to the backward through the
whole-graph cache."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from torch import nn

import kiln
from kiln.inductor import _layout
from kiln.inductor._layout import CHANNELS_LAST, LAYOUT_OPS, ordered_strides
from kiln.inductor._policy import FusionPolicy

OFF = {"inductor.layout_optimization": False}


def _net(cin=3, mid=16):
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(cin, mid, 3, padding=1), nn.BatchNorm2d(mid), nn.ReLU(),
                         nn.Conv2d(mid, mid, 3, stride=2, padding=1), nn.BatchNorm2d(mid), nn.ReLU())


def _cl(sizes):
    return tuple(int(s) for s in ordered_strides(sizes, CHANNELS_LAST))


def _conv_calls(graph):
    """The wrapper's convolution calls (forward and backward), one line each."""
    return [line for line in graph.wrapper_code.splitlines() if "_aten_convolution" in line and " = " in line]


def _eval(model, x, options=None):
    with torch.no_grad():
        expected = model(x)
        got = kiln.compile(model, options=options or {})(x)
    torch.testing.assert_close(got, expected)
    assert got.stride() == expected.stride()
    return got


# ---------------------------------------------------------------- evaluation
def test_evaluation_runs_the_convolutions_channels_last(graphs):
    _eval(_net().eval(), torch.randn(2, 3, 8, 8))
    (graph,) = graphs
    # kernels: the input and the two weights copied channels-last (the layout copies), batch
    # norm + ReLU after the first convolution stored channels-last (the second's input, no
    # copy between them), and after the second into the output in eager's layout
    assert (graph.kernels, graph.externs) == (5, 2)
    first, second = _conv_calls(graph)
    assert f"(2, 3, 8, 8), {_cl((2, 3, 8, 8))}" in first and f"(16, 3, 3, 3), {_cl((16, 3, 3, 3))}" in first
    assert f"(2, 16, 8, 8), {_cl((2, 16, 8, 8))}" in second and f"(16, 16, 3, 3), {_cl((16, 16, 3, 3))}" in second
    # batch norm + ReLU written over the first convolution's result (as torch's Inductor does)
    result = re.search(r"(buf\d+) = _aten_convolution", graph.wrapper_code).group(1)
    assert f" = _reinterpret({result}, (2, 8, 8, 16), (1024, 128, 16, 1), 0)\n" in graph.wrapper_code
    # each result comes back channels-last (the wrapper copies only where ATen disagreed)
    assert f"!= {_cl((2, 16, 8, 8))}:" in graph.wrapper_code and f"!= {_cl((2, 16, 4, 4))}:" in graph.wrapper_code
    # the kernel between the convolutions loops over channels innermost, unit stride
    between = graph.cpp_code.split("void kernel2(")[1].split("void kernel3(")[0]
    assert re.search(r"for \(int64_t r0 = 0; r0 < 16; \+\+r0\)", between)
    assert "= tmp" in between and re.search(r"buf\d+\[\(r0 \+ ", between)


def test_the_switch_off_keeps_eager_layout(graphs):
    model, x = _net().eval(), torch.randn(2, 3, 8, 8)
    on = _eval(model, x)
    kiln.reset()
    off = _eval(model, x, OFF)
    torch.testing.assert_close(on, off)
    assert [(g.kernels, g.externs) for g in graphs] == [(5, 2), (2, 2)]
    assert "_reinterpret" not in graphs[1].wrapper_code
    assert all("(arg0, arg1, arg2," in c or "(buf" in c for c in _conv_calls(graphs[1]))


def test_a_returned_convolution_keeps_eager_strides(graphs):
    conv = nn.Conv2d(3, 16, 3, padding=1)

    def fn(x):
        y = conv(x)
        return y, torch.relu(y) * 2

    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        expected, got = fn(x), kiln.compile(fn)(x)
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e)
        assert g.stride() == e.stride()
    (graph,) = graphs
    # the input and the weight copied channels-last; one kernel copies the convolution's result
    # into eager's layout and computes relu * 2 into eager's layout
    assert (graph.kernels, graph.externs) == (3, 1)


# ---------------------------------------------------------------- training
def _train_step(model, x, options=None, **compile_kwargs):
    eager = copy.deepcopy(model)
    xe = x.detach().clone().requires_grad_(True)
    xk = x.detach().clone().requires_grad_(True)
    compiled = kiln.compile(model, options=options or {}, **compile_kwargs)
    for _ in range(2):
        for m, inp, fn in ((eager, xe, eager), (model, xk, compiled)):
            m.zero_grad(set_to_none=True)
            inp.grad = None
            fn(inp).square().mean().backward()
    torch.testing.assert_close(xk.grad, xe.grad)
    assert xk.grad.stride() == xe.grad.stride()
    for (name, mine), theirs in zip(model.named_parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, msg=name)
        assert mine.grad.stride() == theirs.grad.stride(), name
    for (name, mine), theirs in zip(model.named_buffers(), eager.buffers(), strict=True):
        torch.testing.assert_close(mine, theirs, msg=name)


def test_training_step_channels_last_forward_and_backward(graphs):
    _train_step(_net().train(), torch.randn(2, 3, 8, 8))
    forward, backward = graphs
    # forward: the 6 kernels of the layout switched off and 3 layout copies (the input and the two
    # weights); the saved values the backward reads (the convolutions' results, normalized
    # values) stay channels-last
    assert (forward.kernels, forward.externs) == (9, 2)
    saved = [s for s in forward.output_strides if s is not None]
    assert saved == [_cl((2, 16, 8, 8))] * 2 + [_cl((2, 16, 4, 4))] * 2
    # backward: the 8 kernels of the layout switched off, the two weights copied channels-last,
    # the input's and the first weight's gradients copied into eager's layout (the second
    # weight's in a kernel of eager's); one kernel fewer: a copy joins the kernel of the batch
    # norm's sums, two steps before it (``_scheduler._join_before``)
    assert (backward.kernels, backward.externs) == (11, 6)
    for call in _conv_calls(backward):
        assert call.count("_reinterpret(") == 3 and ", 1, " in call.split("_reinterpret(")[1]
    assert backward.output_strides == (None,) * 9


def test_training_step_with_the_switch_off(graphs):
    _train_step(_net().train(), torch.randn(2, 3, 8, 8), OFF)
    assert [(g.kernels, g.externs) for g in graphs] == [(6, 2), (8, 6)]
    assert all(s is None for g in graphs for s in g.output_strides)
    assert not any("_reinterpret" in c for g in graphs for c in _conv_calls(g))


def test_a_graph_returning_a_saved_convolution_result_to_the_user(graphs):
    # the same value saved for the backward (channels-last) and returned (eager's layout)
    conv = nn.Conv2d(3, 16, 3, padding=1)
    x = torch.randn(2, 3, 8, 8, requires_grad=True)

    def fn(t):
        y = conv(t)
        return y, (y * y).sum()

    expected = fn(x)
    got = kiln.compile(fn)(x)
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e)
        assert g.stride() == e.stride()
    (gx_e,) = torch.autograd.grad(expected[1], x)
    (gx_k,) = torch.autograd.grad(got[1], x)
    torch.testing.assert_close(gx_k, gx_e)
    assert gx_k.stride() == gx_e.stride()


def _pool_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(64, 4))


def test_pooling_between_convolutions_stays_channels_last(graphs):
    _train_step(_pool_net().train(), torch.randn(2, 3, 8, 8))
    kiln.reset()
    _train_step(_pool_net().train(), torch.randn(2, 3, 8, 8), OFF)
    forward, backward, forward_off, backward_off = graphs
    # pooling runs on the channels-last values as they are (no copy around it), its results are
    # channels-last (the max pool's values and indices saved so for the backward). The layout
    # copies: forward the input and the two weights copied channels-last, and the pooled values
    # flattened for the linear layer in eager's order (in eager's layout a view); backward the
    # two weights, the input's and first weight's gradients back into eager's layout (the
    # input copied channels-last and the second weight's gradient are in kernels of eager's)
    # and the linear layer's gradient for the average pool's backward, channels-last (the pooled
    # values the backward views again are saved in eager's layout: aotgrad leaves a saved value
    # that the backward views in its traced layout, a view may refuse other strides); the
    # backward's 5 copies add 4 kernels: one joins a kernel two steps before it
    # (``_scheduler._join_before``)
    assert (forward.kernels - forward_off.kernels, forward.externs - forward_off.externs) == (4, 0)
    assert (backward.kernels - backward_off.kernels, backward.externs - backward_off.externs) == (4, 0)
    pools = [line for g in (forward, backward) for line in g.wrapper_code.splitlines() if "pool2d" in line
             and " = " in line]
    assert len(pools) == 4
    for line in pools:
        args = line.split("(", 1)[1]
        assert "_reinterpret(" in args or re.match(r"buf\d+, ", args)
    assert "(256, 1, 64, 16)" in forward.wrapper_code and forward.output_strides[12] == (_cl((2, 16, 4, 4)),) * 2


# ---------------------------------------------------------------- the rule
@pytest.mark.parametrize("case", ["few channels", "conv1d", "conv3d", "float64", "transposed"])
def test_convolutions_the_rule_refuses_stay_in_eager_layout(graphs, case):
    torch.manual_seed(0)
    model, x = {
        "few channels": (nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU()), torch.randn(2, 2, 8, 8)),
        "conv1d": (nn.Sequential(nn.Conv1d(16, 16, 3), nn.ReLU()), torch.randn(2, 16, 8)),
        "conv3d": (nn.Sequential(nn.Conv3d(16, 16, 3), nn.ReLU()), torch.randn(2, 16, 4, 4, 4)),
        "float64": (nn.Sequential(nn.Conv2d(16, 16, 3), nn.ReLU()).double(), torch.randn(2, 16, 8, 8).double()),
        "transposed": (nn.Sequential(nn.ConvTranspose2d(16, 16, 3), nn.ReLU()), torch.randn(2, 16, 8, 8)),
    }[case]
    on = _eval(model.eval(), x)
    kiln.reset()
    off = _eval(model, x, OFF)
    torch.testing.assert_close(on, off)
    assert graphs[0].wrapper_code == graphs[1].wrapper_code
    assert "_reinterpret" not in graphs[0].wrapper_code and graphs[0].kernels == 1


def test_the_rule_is_data():
    conv = torch.ops.aten.convolution.default

    class Arg:
        def __init__(self, t):
            self.meta = {"val": t}

    class Node:
        target = conv

        def __init__(self, cin, cout, dtype=torch.float32):
            self.args = (Arg(torch.empty(2, cin, 8, 8, dtype=dtype)), Arg(torch.empty(cout, cin, 3, 3, dtype=dtype)),
                         None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)

    policy = FusionPolicy()
    assert _layout.conv_refusal(Node(3, 8), policy) is None
    assert _layout.conv_refusal(Node(4, 4), policy) == "4 channels (fewer than 8)"
    assert _layout.conv_refusal(Node(4, 4), FusionPolicy(channels_last_min_channels=4)) is None
    assert _layout.conv_refusal(Node(16, 16, torch.float64), policy) == "dtype torch.float64"
    assert _layout.conv_refusal(Node(16, 16), FusionPolicy(layout_optimization=False)) == "layout optimization is off"


def test_the_switch_is_part_of_the_cache_key():
    from kiln.inductor import InductorConfig, cache_identity

    assert cache_identity(InductorConfig()) != cache_identity(InductorConfig(layout_optimization=False))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_aten_returns_the_layouts_the_table_says(dtype):
    # the wrapper copies a result whose strides are not the expected ones: correct, but a copy
    # the table promises away
    aten = torch.ops.aten

    def cl(*sizes):
        return torch.randn(*sizes, dtype=dtype).to(memory_format=torch.channels_last)

    x, w, g6, g3 = cl(2, 8, 6, 6), cl(16, 8, 3, 3), cl(2, 16, 6, 6), cl(2, 8, 3, 3)
    _, indices = aten.max_pool2d_with_indices(x, [2, 2], [2, 2])
    args = {
        aten.convolution.default: (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
        aten.convolution_backward.default: (g6, x, w, [16], [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                            [True, True, True]),
        aten.max_pool2d_with_indices.default: (x, [2, 2], [2, 2]),
        aten.max_pool2d_with_indices_backward.default: (g3, x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices),
        aten.avg_pool2d.default: (x, [2, 2], [2, 2]),
        aten.avg_pool2d_backward.default: (g3, x, [2, 2], [2, 2], [0, 0], False, True, None),
        aten._adaptive_avg_pool2d.default: (x, [3, 3]),
        aten._adaptive_avg_pool2d_backward.default: (g3, x),
    }
    for op, spec in LAYOUT_OPS.items():
        result = op(*args[op])
        for item in spec.outputs:
            t = result if item is None else result[item]
            assert t.stride() == _cl(t.shape), (op, item)


# ---------------------------------------------------------------- lowered again in eager's layout
@pytest.mark.parametrize("relu", [False, True])
def test_as_strided_of_a_convolution_lowers_the_graph_in_eager_layout(graphs, relu):
    # as_strided reads the convolution's result by eager's strides: the graph is lowered again
    # with the convolution in eager's layout; of a value computed from it, into a buffer of
    # eager's layout, the convolution stays channels-last
    conv = nn.Conv2d(3, 16, 3, padding=1)

    def fn(x):
        y = torch.relu(conv(x)) if relu else conv(x)
        return torch.as_strided(y, (2, 16, 4), (1024, 64, 1), 8) * 2

    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        expected, got = fn(x), kiln.compile(fn)(x)
    torch.testing.assert_close(got, expected)
    (graph,) = graphs
    assert ("_reinterpret" in _conv_calls(graph)[0]) == relu


def test_an_output_viewing_part_of_a_convolution_keeps_eager_strides(graphs):
    conv = nn.Conv2d(3, 16, 3, padding=1)

    def fn(x):
        return conv(x)[:, 2:10]

    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        expected, got = fn(x), kiln.compile(fn)(x)
    torch.testing.assert_close(got, expected)
    assert got.stride() == expected.stride()
    (graph,) = graphs
    assert "_reinterpret" not in _conv_calls(graph)[0]


# ---------------------------------------------------------------- the whole-graph cache
def test_the_forward_layout_reaches_the_backward_from_the_cache(tmp_path, monkeypatch):
    # a forward loaded from the whole-graph cache reports the layout of what it saves, so
    # aotgrad gives the backward the same inputs, and its key, as when it was compiled
    import kiln.inductor._api as inductor_api
    from kiln.aotgrad import aot_compile
    from kiln.inductor import InductorConfig, aten_compiler, decompositions

    compiled = []
    original = inductor_api.compile_graph

    def record(gm, config=None, builders=None, group=None):
        compiled.append(original(gm, config, builders, group))
        return compiled[-1]

    monkeypatch.setattr(inductor_api, "compile_graph", record)

    def backend(gm, example_inputs):  # aotgrad and inductor, without the umbrella's cache
        compiler = aten_compiler(InductorConfig(cache_dir=str(tmp_path)))
        return aot_compile(gm, example_inputs, kiln.compile_context(), fw_compiler=compiler,
                           bw_compiler=compiler, decompositions=decompositions())

    for _ in range(2):
        kiln.reset()
        _train_step(_net().train(), torch.randn(2, 3, 8, 8), backend=backend)
    assert [c.from_cache for c in compiled] == [False, False, True, True]
    assert compiled[2].output_strides == compiled[0].output_strides != (None,) * len(compiled[0].output_strides)
    assert compiled[3].cache_key == compiled[1].cache_key


# ---------------------------------------------------------------- the user's channels-last tensors
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("which", ["input", "weight"])
def test_a_convolution_of_a_channels_last_tensor_returns_eagers_layout(which, dtype):
    # eager's CPU kernels give a channels-last result when the input or the weight is; kiln's
    # fake tensors traced it contiguous (the meta kernel cannot tell the backend), so kiln
    # returned other strides than eager (the values were right)
    torch.manual_seed(0)
    conv = nn.Conv2d(16, 16, 3).to(dtype)
    x = torch.randn(2, 16, 8, 8, dtype=dtype)
    if which == "input":
        x = x.to(memory_format=torch.channels_last)
    else:
        conv.weight.data = conv.weight.data.to(memory_format=torch.channels_last)
    for options in (None, OFF):
        kiln.reset()
        with torch.no_grad():
            got = kiln.compile(conv, options=options)(x)
            expected = conv(x)
        torch.testing.assert_close(got, expected)
        assert got.stride() == expected.stride() == _cl((2, 16, 6, 6))


@pytest.mark.parametrize("perm", [(1, 0, 2), (2, 0, 1), (0, 2, 1)])
def test_dynamic_sizes_keep_eagers_permuted_layout(graphs, perm):
    # a pointwise op of permuted inputs: eager lays its output out as the inputs are
    # (TensorIterator), strides the trace gives as symbols ((s1*s2, 1, s1), ...): the C++
    # kernels' output keeps them at every size the graph is called with (before: contiguous)
    def f(x, y):
        return torch.sin(x.permute(*perm)) * 2 + y.permute(*perm)

    compiled = kiln.compile(f, dynamic=True)
    for n in (5, 7, 12):
        x, y = torch.randn(n, n + 1, n + 2), torch.randn(n, n + 1, n + 2)
        expected = f(x, y)
        actual = compiled(x, y)
        torch.testing.assert_close(actual, expected)
        assert actual.stride() == expected.stride(), (n, actual.stride(), expected.stride())
    assert len(graphs) == 1


def _output_read_again(x, y, w):
    v = torch.tanh(x) - y  # x transposed, y not: eager lays v out as x is
    return v, v.t().contiguous().t() * 1.5, v @ w, v.sum(0)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_an_output_other_nodes_read_keeps_eagers_layout(graphs, backend):
    """A value returned to the caller and read by later nodes (a reduction, an ATen call, a
    copy) is in memory before the output is reached: it is computed in the output's traced
    strides (eager's), not contiguously (found by fuzzing: strides (8, 1) where eager's are
    (1, 17))."""
    from triton_support import DEVICE, OPTIONS

    if backend == "triton":
        pytest.importorskip("triton")
    device, options = (DEVICE, OPTIONS) if backend == "triton" else ("cpu", None)
    x = torch.randn(8, 17, device=device).t()
    y, w = torch.randn(17, 8, device=device), torch.randn(8, 5, device=device)
    expected = _output_read_again(x, y, w)
    with torch.no_grad():
        actual = kiln.compile(_output_read_again, options=options)(x, y, w)
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)
        assert a.stride() == e.stride()
    assert expected[0].stride() == (1, 17)
