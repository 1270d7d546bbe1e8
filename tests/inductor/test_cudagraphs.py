"""CUDA graphs (``inductor.cudagraphs``, ``mode="reduce-overhead"``): ``_cudagraph_plan``'s
pure parts and ``_cudagraphs``' runner.

Without a GPU the runner is tested with ``EagerRecorder``, a recorder that "records" by
running the call on CPU tensors and "replays" by running it again into the recorded outputs'
memory (as a CUDA graph's replay writes the same memory each time); the whole pipeline
(``kiln.compile(mode="reduce-overhead")``) runs with it in place of CUDA's through
``recorded_on_cpu``. The tests marked ``gpu`` run the same cases with ``torch.cuda.CUDAGraph``
on a CUDA device (skipped without one)."""

from __future__ import annotations

import copy
import logging
import subprocess
import sys
import textwrap

import pytest
import torch

import kiln
from kiln.fxgraph import Graph, GraphModule
from kiln.inductor import _compile
from kiln.inductor._cudagraph_plan import (
    CudagraphFacts,
    StaticInput,
    cudagraph_facts,
    flatten,
    make_outputs,
    non_overlapping,
    plan_outputs,
    shape_key,
    span,
    unflatten,
)
from kiln.inductor._cudagraphs import CudagraphGroup, CudaGraphRunner

CUDA = torch.cuda.is_available()
gpu = [pytest.mark.gpu, pytest.mark.skipif(not CUDA, reason="needs a CUDA device")]
aten = torch.ops.aten


class EagerRecorder:
    """A recorder for CPU tensors: ``record`` warms up, then runs the call once (putting the
    static inputs back as they were: a capture executes nothing); the replay runs it again
    and copies its outputs into the recorded ones' memory."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.warmups = 0

    @staticmethod
    def check(t):
        return None

    @staticmethod
    def capturing():
        return False

    def record(self, warm, run, device, inputs):
        if self.fail is not None:
            raise self.fail
        warm()
        self.warmups += 1
        before = [t.clone() for t in inputs]
        result = run()
        for t, b in zip(inputs, before, strict=True):
            t.copy_(b)

        def replay():
            fresh = run()
            for old, new in zip(flatten(list(result))[0], flatten(list(fresh))[0], strict=True):
                if isinstance(old, torch.Tensor) and old.data_ptr() != new.data_ptr():
                    old.copy_(new)

        return replay, result, None


def _boxed(fn):
    """``fn(*inputs)`` as a compiled call: one list, which it empties."""

    def call(args):
        inputs = list(args)
        args.clear()
        return tuple(fn(*inputs))

    return call


def _messages(caplog, text):
    return [r for r in caplog.records if r.name == "kiln.perf_hints" and text in r.getMessage()]


# ------------------------------------------------------------------------- leaves and keys
def test_flatten_round_trip():
    t, u, v = torch.ones(2), torch.zeros(3), torch.ones(1)
    items = [t, 3, None, (u, None), [v, 2.5]]
    leaves, structure = flatten(items)
    assert leaves == [t, 3, None, u, None, v, 2.5] and structure is not None
    back = unflatten(leaves, structure)
    assert back[0] is t and back[3] == (u, None) and type(back[3]) is tuple and back[4] == [v, 2.5]
    assert flatten([t, 1]) == ([t, 1], None) and unflatten([t, 1], None) == [t, 1]


def test_shape_key_tells_apart_what_a_recording_bakes_in():
    x = torch.randn(4, 6)
    assert shape_key([x, 2]) == shape_key([torch.randn(4, 6), 2])
    assert shape_key([x]) != shape_key([x.t().contiguous().t()])  # strides
    assert shape_key([x]) != shape_key([x.double()])
    assert shape_key([x]) != shape_key([torch.randn(5, 6)])
    assert shape_key([2]) != shape_key([3]) and shape_key([1]) != shape_key([True])
    assert shape_key([float("nan")]) == shape_key([float("nan")]) and shape_key([0.0]) != shape_key([-0.0])


def test_span_and_overlap():
    assert span((3, 4), (4, 1)) == 12 and span((3, 4), (1, 3)) == 12 and span((2, 0), (1, 1)) == 0
    assert span((3, 4), (0, 1)) == 4 and span((2, 2), (10, 1)) == 12
    assert non_overlapping((3, 4), (4, 1)) and non_overlapping((3, 4), (1, 3)) and non_overlapping((2, 2), (10, 1))
    assert non_overlapping((1, 5), (0, 1)) and non_overlapping((0, 3), (0, 0))
    assert not non_overlapping((3, 4), (0, 1)) and not non_overlapping((3, 3), (1, 1))


def test_static_input_of_a_tensor_whose_elements_overlap():
    x = torch.randn(3, 1).expand(3, 4)
    s = StaticInput.of(0, x, borrow=False)
    assert s.whole is not None and s.static.stride() == x.stride() and not s.borrowed
    torch.testing.assert_close(s.static, x)
    other = torch.randn(10)[5:8].unsqueeze(1).expand(3, 4)  # another storage offset
    s.fill(other)
    torch.testing.assert_close(s.static, other)
    strided = torch.randn(4, 8)[:, ::2]
    s2 = StaticInput.of(1, strided, borrow=False)
    assert s2.whole is None and s2.static.stride() == strided.stride()
    torch.testing.assert_close(s2.static, strided)
    p = torch.nn.Parameter(torch.randn(3))
    s3 = StaticInput.of(2, p, borrow=True)
    assert s3.borrowed and s3.address == p.data_ptr() and not s3.static.requires_grad


# ------------------------------------------------------------------------------ output plans
def test_outputs_that_are_inputs_are_the_callers_and_the_rest_are_copied_once_per_storage():
    static = torch.arange(12.0).reshape(3, 4)
    pool = torch.arange(20.0)
    outputs = [static, static[1:, ::2], pool[2:10].view(2, 4), pool[4:8], 7, torch.empty(0, 3), None]
    rules, sources = plan_outputs(outputs, [static, 5])
    assert [r.kind for r in rules] == ["input", "input", "copy", "copy", "value", "empty", "value"]
    assert not rules[0].view and rules[1].view and len(sources) == 1  # the two pool views: one copy
    caller = torch.randn(5, 4)[1:4]  # another tensor, at another storage offset
    out = make_outputs(rules, sources, [caller, 5])
    assert out[0] is caller
    assert out[1].data_ptr() == caller[1:, ::2].data_ptr() and out[1].stride() == (4, 2)
    torch.testing.assert_close(out[1], caller[1:, ::2])
    torch.testing.assert_close(out[2], torch.arange(2.0, 10.0).view(2, 4))
    torch.testing.assert_close(out[3], torch.arange(4.0, 8.0))
    assert out[2].untyped_storage().data_ptr() == out[3].untyped_storage().data_ptr()  # still one memory
    assert out[2].untyped_storage().data_ptr() != pool.untyped_storage().data_ptr()
    pool.fill_(-1)  # the next replay: the outputs handed out keep their values
    torch.testing.assert_close(out[3], torch.arange(4.0, 8.0))
    out[3].zero_()  # as in the graph, the two outputs share their elements
    torch.testing.assert_close(out[2][0, 2:], torch.zeros(2))
    assert out[4] == 7 and out[5].shape == (0, 3) and out[6] is None


def test_an_output_alone_in_its_memory_is_cloned_with_its_strides():
    dense = torch.randn(2, 3, 4).permute(2, 0, 1)
    sliced = torch.randn(4, 6)[:, 1:5]
    expanded = torch.randn(3, 1).expand(3, 5)
    rules, sources = plan_outputs([dense, sliced, expanded], [])
    assert [r.kind for r in rules] == ["clone", "copy", "copy"]
    out = make_outputs(rules, sources, [])
    for o, ref in zip(out, (dense, sliced, expanded), strict=True):
        assert o.stride() == ref.stride() and o.data_ptr() != ref.data_ptr()
        torch.testing.assert_close(o, ref)


def test_an_output_viewing_an_input_in_another_dtype_is_refused():
    static = torch.randn(4)
    assert plan_outputs([static.view(torch.int32)], [static]) == "output 0 is a view of input 0 with another dtype"


def test_copies_keep_every_dtype_aligned():
    pool = torch.zeros(64, dtype=torch.uint8)
    a = pool[3:5]  # bytes 3-4
    b = pool[8:16].view(torch.float64)  # 8-byte aligned within the storage
    rules, sources = plan_outputs([a, b], [])
    out = make_outputs(rules, sources, [])
    assert out[1].dtype == torch.float64 and out[1].shape == (1,)
    torch.testing.assert_close(out[1], b)


# ------------------------------------------------------------------------------ graph facts
def _aten_graph(fn, *fakes):
    """The forward ATen graph kiln.aotgrad makes of ``fn`` on ``fakes``."""
    from kiln.aotgrad import partition, trace
    from kiln.fxgraph.torch_fx import from_torch_fx
    from kiln.inductor import decompositions

    gm = from_torch_fx(torch.fx.symbolic_trace(fn))
    result, constants = trace(gm, list(fakes), backward=False, decompositions=decompositions())
    return GraphModule(dict(constants), partition(result).forward)


def _fake(shape, device="cuda"):
    from kiln.symshapes.bridge import FakeTensor, FakeTensorMode

    mode = _fake.mode = getattr(_fake, "mode", None) or FakeTensorMode(None)
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return FakeTensor.of_metadata(mode, list(shape), strides, 0, torch.float32, torch.device(device))


def _inplace(x, y):
    x.add_(y)
    return x * 2


def test_facts_of_traced_graphs():
    assert cudagraph_facts(_aten_graph(lambda x, y: (torch.relu(x @ y),), _fake([3, 4]), _fake([4, 5]))) \
        == CudagraphFacts((), ())
    assert cudagraph_facts(_aten_graph(lambda x, y: (_inplace(x, y),), _fake([3]), _fake([3]))).mutated == (0,)
    facts = cudagraph_facts(_aten_graph(lambda x, y: (x + y,), _fake([3], "cuda"), _fake([3], "cpu")))
    assert facts.skip == "input 1 is a CPU tensor"


def _graph_of(*targets, device="cuda:0", extra_inputs=()):
    """A hand-made ATen graph: one input, then ``targets`` applied in a chain."""
    graph = Graph()
    x = graph.placeholder("x")
    x.meta["val"] = _fake([4], device)
    node = x
    for target, args in targets:
        node = graph.call_function(target, (node, *args))
        node.meta["val"] = _fake([4], device)
    for k, d in enumerate(extra_inputs):
        p = graph.placeholder(f"y{k}")
        p.meta["val"] = _fake([4], d)
    graph.output((node,))
    return GraphModule({}, graph)


def test_facts_name_what_capture_cannot_replay():
    # random ops are recorded: the default CUDA generator is graph-safe (each replay draws anew)
    assert cudagraph_facts(_graph_of((aten.bernoulli.p, (0.5,)))).skip is None
    assert cudagraph_facts(_graph_of((aten.native_dropout.default, (0.5, True)))).skip is None
    assert cudagraph_facts(_graph_of((aten.nonzero.default, ()))).skip \
        == "aten.nonzero.default depends on the data (it waits for the host)"
    assert "aten._local_scalar_dense.default depends on the data" in \
        cudagraph_facts(_graph_of((aten.sum.default, ()), (aten._local_scalar_dense.default, ()))).reasons[0]
    assert cudagraph_facts(_graph_of((aten.relu.default, ()), extra_inputs=("cuda:1",))).skip \
        == "tensors on several devices (cuda:0, cuda:1)"
    assert cudagraph_facts(_graph_of((aten.relu.default, ()))) == CudagraphFacts((), ())
    assert cudagraph_facts(_graph_of((aten.relu.default, ()), extra_inputs=("cuda",))).skip is None
    assert cudagraph_facts(_graph_of((aten.relu.default, ()), device="cpu")).skip == "input 0 is a CPU tensor"


def _attention_graph(target, dropout_p, *, index_dtype=None):
    """One ATen call on CUDA inputs: an attention op (its ``dropout_p`` given, or left to the
    default when None) or, with ``index_dtype``, ``aten.index`` with an index of that dtype."""
    graph = Graph()
    q = graph.placeholder("q")
    q.meta["val"] = _fake([1, 2, 4, 8])
    if index_dtype is not None:
        i = graph.placeholder("i")
        i.meta["val"] = _fake([3]).to(index_dtype) if index_dtype != torch.float32 else _fake([3])
        node = graph.call_function(aten.index.Tensor, (q, [None, i]))
    elif dropout_p is None:
        node = graph.call_function(target, (q, q, q))
    else:
        node = graph.call_function(target, (q, q, q), {"dropout_p": dropout_p})
    node.meta["val"] = _fake([1, 2, 4, 8])
    graph.output((node,))
    return GraphModule({}, graph)


def test_facts_tell_data_dependent_calls_by_their_arguments():
    """Attention ops (tagged as random for their dropout) are recorded with any ``dropout_p``.
    ``aten.index`` is tagged as data-dependent for boolean masks: with integer indices it is
    recorded."""
    flash = aten._scaled_dot_product_flash_attention.default
    for target in (flash, aten._scaled_dot_product_efficient_attention.default):
        assert cudagraph_facts(_attention_graph(target, 0.0)).skip is None
        assert cudagraph_facts(_attention_graph(target, 0.1)).skip is None
    assert cudagraph_facts(_attention_graph(flash, None)).skip is None  # the default, 0.0
    for dtype in (torch.int64, torch.int32):
        assert cudagraph_facts(_attention_graph(None, None, index_dtype=dtype)).skip is None
    for dtype in (torch.bool, torch.uint8):
        assert cudagraph_facts(_attention_graph(None, None, index_dtype=dtype)).skip \
            == "aten.index.Tensor depends on the data (it waits for the host)"


def test_facts_round_trip_through_json():
    facts = CudagraphFacts((0, 2), ("input 1 is a CPU tensor",))
    assert CudagraphFacts.from_json(facts.to_json()) == facts and facts.skip == "input 1 is a CPU tensor"


# ---------------------------------------------------------------- the runner, on CPU tensors
def test_one_recording_per_shape_set_replayed():
    recorder = EagerRecorder()
    runner = CudaGraphRunner(_boxed(lambda x, w: (torch.relu(x @ w) + 1,)), (), 8, recorder)
    w = torch.randn(6, 3)
    for _ in range(5):
        x = torch.randn(4, 6)
        args = [x, w]
        out = runner(args)
        assert args == []  # emptied, as the compiled call does
        torch.testing.assert_close(out[0], torch.relu(x @ w) + 1)
    assert (runner.stats.recordings, runner.stats.replays, recorder.warmups) == (1, 5, 1)
    x = torch.randn(2, 6)
    torch.testing.assert_close(runner([x, w])[0], torch.relu(x @ w) + 1)
    runner([torch.randn(4, 6), w])
    assert (runner.stats.recordings, runner.stats.replays, runner.stats.plain_calls) == (2, 7, 0)


def test_an_output_keeps_its_values_after_the_next_call():
    runner = CudaGraphRunner(_boxed(lambda x: (x.sin() * 2, x.cos())), (), 8, EagerRecorder())
    x1, x2 = torch.randn(5), torch.randn(5)
    y1 = runner([x1])
    y2 = runner([x2])
    torch.testing.assert_close(y1[0], x1.sin() * 2)
    torch.testing.assert_close(y1[1], x1.cos())
    torch.testing.assert_close(y2[0], x2.sin() * 2)


def test_a_written_input_is_written_once_per_call():
    def step(x, y):
        x.mul_(2)
        return (x + y,)

    recorder = EagerRecorder()
    runner = CudaGraphRunner(_boxed(step), (0,), 8, recorder)
    x, y = torch.ones(3), torch.zeros(3)
    for k in range(1, 4):
        out = runner([x, y])
        torch.testing.assert_close(x, torch.full((3,), 2.0 ** k))
        torch.testing.assert_close(out[0], torch.full((3,), 2.0 ** k))
    assert recorder.warmups == 1 and runner.stats.recordings == 1


def test_a_parameter_is_read_in_place_written_once_and_recorded_again_when_it_moves():
    def step(w, g):
        w.sub_(g)
        return (w * 3,)

    runner = CudaGraphRunner(_boxed(step), (0,), 8, EagerRecorder())
    w = torch.nn.Parameter(torch.zeros(4))
    g = torch.ones(4)
    for k in range(1, 4):
        out = runner([w, g])
        torch.testing.assert_close(w.detach(), torch.full((4,), -float(k)))
        torch.testing.assert_close(out[0], torch.full((4,), -3.0 * k))
    recording = next(iter(runner.recordings.values()))
    assert recording.inputs[0].borrowed and recording.inputs[0].static.data_ptr() == w.data_ptr()
    assert not recording.inputs[1].borrowed
    w2 = torch.nn.Parameter(torch.full((4,), 10.0))  # the model's parameter replaced
    torch.testing.assert_close(runner([w2, g])[0], torch.full((4,), 27.0))
    torch.testing.assert_close(w2.detach(), torch.full((4,), 9.0))
    torch.testing.assert_close(w.detach(), torch.full((4,), -3.0))  # the old one untouched
    assert runner.stats.recordings == 2 and not next(iter(runner.recordings.values())).inputs[0].borrowed
    torch.testing.assert_close(runner([w, g])[0], torch.full((4,), -12.0))
    assert runner.stats.recordings == 2  # now a buffer: the old parameter is copied in


def test_outputs_that_are_inputs_or_views_of_them_are_the_callers():
    runner = CudaGraphRunner(_boxed(lambda x, w: (w, x[1:], x * 2)), (), 8, EagerRecorder())
    w = torch.nn.Parameter(torch.randn(3))
    for _ in range(2):
        x = torch.randn(4)
        out = runner([x, w])
        assert out[0] is w
        assert out[1].data_ptr() == x[1:].data_ptr()
        torch.testing.assert_close(out[2], x * 2)


def test_nested_and_number_inputs():
    runner = CudaGraphRunner(_boxed(lambda x, pair, n: ((x + pair[0]) * n, pair[1] is None)), (), 8, EagerRecorder())
    x, y = torch.randn(3), torch.randn(3)
    assert runner([x, (y, None), 2])[1] is True
    torch.testing.assert_close(runner([x, (y, None), 2])[0], (x + y) * 2)
    torch.testing.assert_close(runner([x, (y, None), 3])[0], (x + y) * 3)
    assert runner.stats.recordings == 2


def test_past_the_limit_new_shapes_run_plain_logged_once(caplog):
    runner = CudaGraphRunner(_boxed(lambda x: (x + 1,)), (), 2, EagerRecorder())
    with caplog.at_level(logging.WARNING, logger="kiln.perf_hints"):
        for n in (1, 2, 3, 3, 4, 1):
            x = torch.randn(n)
            torch.testing.assert_close(runner([x])[0], x + 1)
    assert (runner.stats.recordings, runner.stats.replays, runner.stats.plain_calls) == (2, 3, 3)
    assert len(_messages(caplog, "more than 2 input shape sets")) == 1


def test_a_written_input_sharing_memory_with_another_runs_plain(caplog):
    def step(x, y):
        x.add_(1)
        return (y * 1,)

    runner = CudaGraphRunner(_boxed(step), (0,), 8, EagerRecorder())
    x = torch.zeros(4)
    with caplog.at_level(logging.WARNING, logger="kiln.perf_hints"):
        out = runner([x, x.view(2, 2)])
        runner([x, x.view(2, 2)])
    torch.testing.assert_close(out[0], torch.ones(2, 2))  # the write seen through the other input
    torch.testing.assert_close(x, torch.full((4,), 2.0))
    assert runner.stats.plain_calls == 2 and runner.stats.recordings == 0
    assert len(_messages(caplog, "input 0, which the graph writes, shares memory with another input")) == 1
    runner([torch.zeros(4), torch.zeros(2, 2)])
    assert runner.stats.recordings == 1


def test_a_failed_recording_runs_plain_for_good(caplog):
    runner = CudaGraphRunner(_boxed(lambda x: (x + 1,)), (), 8, EagerRecorder(RuntimeError("not permitted\nmore")))
    with caplog.at_level(logging.WARNING, logger="kiln.perf_hints"):
        for n in (2, 3, 2):
            x = torch.randn(n)
            torch.testing.assert_close(runner([x])[0], x + 1)
    assert runner.off == "recording failed (RuntimeError: not permitted)"
    assert runner.stats.plain_calls == 3
    assert len(_messages(caplog, "skipped: recording failed (RuntimeError: not permitted)")) == 1


def test_grad_and_inference_modes_are_kept():
    runner = CudaGraphRunner(_boxed(lambda x: (x * 2,)), (), 8, EagerRecorder())
    x = torch.randn(3, requires_grad=True)
    with torch.inference_mode():  # recorded in inference mode: its buffers still take copies outside it
        runner([torch.randn(3)])
        assert torch.is_inference_mode_enabled()
    assert torch.is_grad_enabled()
    out = runner([x])
    assert torch.is_grad_enabled() and not out[0].requires_grad
    assert not next(iter(runner.recordings.values())).inputs[0].static.requires_grad
    torch.testing.assert_close(out[0], x.detach() * 2)
    with torch.no_grad():
        runner([x])
        assert not torch.is_grad_enabled()


# ---------------------------------------------------- the pipeline, recorded on CPU tensors
@pytest.fixture
def recorded_on_cpu(monkeypatch, fresh_kiln):
    """kiln.compile(mode="reduce-overhead") with ``EagerRecorder`` (the graphs' CPU facts
    ignored, their writes kept); the runners made, in order."""
    runners = []

    def wrap(compiled, config, group=None):
        if config.cudagraphs:
            compiled.call = CudaGraphRunner(compiled.call, compiled.cudagraph_facts.mutated,
                                            config.cudagraph_max_shapes, EagerRecorder(),
                                            group=group or CudagraphGroup())
            runners.append(compiled.call)
        return compiled

    monkeypatch.setattr(_compile, "with_cudagraphs", wrap)
    return lambda: list(runners)


def _mlp(device="cpu"):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4)).to(device)


# each case takes ``runners()``: the runners of the graphs compiled so far, in order
def _inference_case(runners, device):
    model = _mlp(device)
    compiled = kiln.compile(model, mode="reduce-overhead", dynamic=True)
    with torch.no_grad():
        for _ in range(5):
            x = torch.randn(6, 8, device=device)
            torch.testing.assert_close(compiled(x), model(x))
        assert len(runners()) == 1 and (runners()[0].stats.recordings, runners()[0].stats.replays) == (1, 5)
        x = torch.randn(3, 8, device=device)
        torch.testing.assert_close(compiled(x), model(x))
    assert runners()[0].stats.recordings == 2 and runners()[0].stats.plain_calls == 0


def _training_case(runners, device):
    model = _mlp(device)
    reference = copy.deepcopy(model)
    compiled = kiln.compile(model, mode="reduce-overhead")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(5, 8, device=device)
        for m, opt in ((compiled, optimizer), (reference, reference_optimizer)):
            opt.zero_grad()
            torch.log_softmax(m(x), -1).sum().backward()
            opt.step()
    for p, r in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, r)
    assert [(r.stats.recordings, r.stats.replays) for r in runners()] == [(1, 3), (1, 3)]


def _inplace_case(runners, device):
    compiled = kiln.compile(_inplace, mode="reduce-overhead")
    x, y = torch.zeros(4, device=device), torch.ones(4, device=device)
    for k in range(1, 4):
        out = compiled(x, y)
        torch.testing.assert_close(x, torch.full((4,), float(k), device=device))
        torch.testing.assert_close(out, torch.full((4,), 2.0 * k, device=device))
    assert runners()[0].mutated == (0,) and runners()[0].stats.replays == 3


def _overwrite_case(runners, device):
    compiled = kiln.compile(lambda x: (x.exp() + 1, x.sum(0)), mode="reduce-overhead")
    x1, x2 = torch.randn(3, 4, device=device), torch.randn(3, 4, device=device)
    y1 = compiled(x1)
    y2 = compiled(x2)
    torch.testing.assert_close(y1, (x1.exp() + 1, x1.sum(0)))
    torch.testing.assert_close(y2, (x2.exp() + 1, x2.sum(0)))
    assert runners()[0].stats.replays == 2


def _alias_case(runners, device):
    compiled = kiln.compile(lambda x: (x.view(-1)[1:], x + 1), mode="reduce-overhead")
    for _ in range(2):
        x = torch.randn(2, 3, device=device)
        view, plus = compiled(x)
        assert view.data_ptr() == x.view(-1)[1:].data_ptr()
        torch.testing.assert_close(plus, x + 1)
    assert runners()[0].stats.replays == 2


CASES = {"inference": _inference_case, "training": _training_case, "inplace": _inplace_case,
         "overwrite": _overwrite_case, "alias": _alias_case}


@pytest.mark.parametrize("case", sorted(CASES))
def test_pipeline_recorded_on_cpu(recorded_on_cpu, case):
    CASES[case](recorded_on_cpu, "cpu")


def test_cpu_tensors_run_plain_logged_once(fresh_kiln, graphs, caplog):
    compiled = kiln.compile(lambda x: torch.softmax(x, -1) * 2, mode="reduce-overhead")
    with caplog.at_level(logging.WARNING, logger="kiln.perf_hints"):
        for _ in range(3):
            x = torch.randn(3, 5)
            torch.testing.assert_close(compiled(x), torch.softmax(x, -1) * 2)
    assert len(_messages(caplog, "cudagraphs: skipped: input 0 is a CPU tensor")) == 1
    assert len(graphs) == 1 and not isinstance(graphs[0].call, CudaGraphRunner)


def test_the_facts_are_kept_in_the_whole_graph_cache(tmp_path, graphs, caplog):
    from kiln.aotgrad import aot_compile
    from kiln.inductor import InductorConfig, aten_compiler, decompositions

    compiled = graphs  # every CompiledGraph, as compile_graph returned it
    def backend(gm, example_inputs):
        compiler = aten_compiler(InductorConfig(cache_dir=str(tmp_path), cudagraphs=True))
        return aot_compile(gm, example_inputs, kiln.compile_context(), fw_compiler=compiler,
                           bw_compiler=compiler, decompositions=decompositions())

    with caplog.at_level(logging.WARNING, logger="kiln.perf_hints"):
        for _ in range(2):
            kiln.reset()
            x = torch.zeros(3)
            torch.testing.assert_close(kiln.compile(_inplace, backend=backend)(x, torch.ones(3)), torch.full((3,), 2.0))
            torch.testing.assert_close(x, torch.ones(3))
    assert [c.from_cache for c in compiled] == [False, True]
    assert compiled[0].cudagraph_facts == compiled[1].cudagraph_facts
    assert compiled[1].cudagraph_facts.mutated == (0,) and compiled[1].cudagraph_facts.skip == "input 0 is a CPU tensor"
    assert len(_messages(caplog, "cudagraphs: skipped: input 0 is a CPU tensor")) == 2  # once per compiled graph


def test_the_cuda_graph_fields_do_not_change_the_cache_key():
    from kiln.inductor import InductorConfig, cache_identity

    assert cache_identity(InductorConfig()) == cache_identity(InductorConfig(cudagraphs=True, cudagraph_max_shapes=2))


# ------------------------------------------------------------------------------- on a GPU
@pytest.fixture
def cuda_runners(graphs):
    """The runners of the graphs compiled in the test, in order (each graph must have one)."""

    def runners():
        assert all(isinstance(g.call, CudaGraphRunner) for g in graphs), "a graph is not recorded"
        return [g.call for g in graphs]

    return runners


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("case", sorted(CASES))
def test_pipeline_on_cuda(cuda_runners, case):
    CASES[case](cuda_runners, "cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cpu_inputs_on_a_gpu_machine_run_plain(graphs, caplog):
    with caplog.at_level(logging.WARNING, logger="kiln.perf_hints"):
        x = torch.randn(3)
        torch.testing.assert_close(kiln.compile(lambda t: t * 2, mode="reduce-overhead")(x), x * 2)
    assert len(_messages(caplog, "input 0 is a CPU tensor")) == 1


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_torch_state_is_kept_on_cuda(cuda_runners):
    model = _mlp("cuda")
    compiled = kiln.compile(model, mode="reduce-overhead")
    stream = torch.cuda.current_stream()
    device = torch.cuda.current_device()
    x = torch.randn(4, 8, device="cuda")
    with torch.no_grad():
        compiled(x)
        assert not torch.is_grad_enabled()
    out = compiled(x)  # grad mode on: another graph (with a backward)
    out.sum().backward()
    with torch.inference_mode():
        torch.testing.assert_close(compiled(x), model(x))
        assert torch.is_inference_mode_enabled()
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    assert torch.cuda.current_stream() == stream and torch.cuda.current_device() == device
    assert not torch.cuda.is_current_stream_capturing()
    assert sum(r.stats.replays for r in cuda_runners()) >= 3


_INTERLEAVED = """
import torch, kiln

def kiln_fn(x, w1, w2):
    return torch.relu(x @ w1) @ w2 + 1

def torch_fn(x, w1, w2):
    return torch.relu(x @ w1) @ w2 - 1

torch.manual_seed(0)
w1 = torch.randn(64, 128, device="cuda")
w2 = torch.randn(128, 32, device="cuda")
k = kiln.compile(kiln_fn, mode="reduce-overhead", dynamic=False)
t = torch.compile(torch_fn, mode="reduce-overhead", dynamic=False)
for step in range(8):
    n = 16 if step < 4 else 24  # new shapes midway: both record again after the other ran
    x = torch.randn(n, 64, device="cuda")
    yk = k(x, w1, w2)
    torch._C._cuda_clearCublasWorkspaces()
    yt = t(x, w1, w2)
    torch.cuda.empty_cache()
    torch._C._cuda_clearCublasWorkspaces()
    yk2 = k(x * 2, w1, w2)
    torch.cuda.synchronize()
    torch.testing.assert_close(yk, kiln_fn(x, w1, w2))
    torch.testing.assert_close(yt, torch_fn(x, w1, w2))
    torch.testing.assert_close(yk2, kiln_fn(x * 2, w1, w2))
print("OK")
"""


@pytest.mark.gpu
@pytest.mark.slow  # torch.compile's first compiles, in a new process
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_kiln_and_torch_compile_reduce_overhead_interleaved(tmp_path):
    """Both compilers' CUDA graphs in one process, cuBLAS workspaces cleared between them (an
    earlier kiln replayed into a workspace torch.compile had freed: "unspecified launch
    failure"): in a process of its own, since a CUDA error ends the context."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_INTERLEAVED)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), done.stderr[-3000:]
