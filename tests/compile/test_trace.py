"""The structured trace (kiln._trace): what each compile writes, where, and when."""

import base64
import glob
import json
import marshal
import os
import subprocess
import sys
import types

import pytest
import torch
from trace_support import Net, lines, settings, train

import kiln
from kiln import _trace

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _events(directory) -> list[dict]:
    (path,) = glob.glob(os.path.join(str(directory), "*.jsonl"))
    with open(path) as f:
        return [json.loads(line) for line in f]


def _by_compile(events) -> list[list[dict]]:
    """The events of each compile, in order (compile numbers are the process's: they go on
    from one test to the next)."""
    out: dict[int, list[dict]] = {}
    for e in events:
        if e["event"] != "process":
            out.setdefault(e["compile"], []).append(e)
    return list(out.values())


def _break(x):
    y = x.sin()
    if y.sum() > 0:  # a graph break
        y = y + 1
    return y.cos()


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("trace"))
    train(directory)
    return _events(directory)


def test_each_compile_is_written_whole_in_order(traced):
    assert traced[0]["event"] == "process" and traced[0]["pid"] == os.getpid()
    numbers = [e["compile"] for e in traced[1:]]
    assert numbers == sorted(numbers)  # one compile's events together, never interleaved
    compiles = _by_compile(traced)
    first = compiles[0][0]["compile"]
    assert [c[0]["compile"] for c in compiles] == [first, first + 1, first + 2, first + 3]
    for events in compiles:
        assert events[0]["event"] == "frame" and events[-1]["event"] == "compile_end"
        assert events[-1]["status"] == "compiled" and events[-1]["error"] is None
        assert set(events[-1]["timings"]) == {"capture", "backend", "guards"}
        assert events[-1]["seconds"] >= sum(events[-1]["timings"].values())


def test_frames_and_why_each_compiled(traced):
    frames = [e for e in traced if e["event"] == "frame"]
    forward = Net.forward.__code__
    assert [(f["code"]["qualname"], f["why"]) for f in frames] == [
        ("Net.forward", "first call"),
        (frames[1]["code"]["qualname"], "resume function"),
        ("Net.forward", "guard failure"),
        (frames[1]["code"]["qualname"], "guard failure"),
    ]
    assert frames[1]["code"]["name"].startswith("__kiln_resume_in_forward")
    assert frames[0]["code"]["file"] == forward.co_filename and frames[0]["code"]["line"] == lines()["def"]
    assert frames[2]["entries"] == 1 and frames[2]["failed_guards"] == ["tensor L['x'] size(0): expected 4, got 6"]
    # the source as traced, and the code object marshaled: what a decompiler needs
    first, source = frames[0]["source"]
    assert first == lines()["def"] and source[0].strip() == "def forward(self, x):"
    assert "# the graph break" in source[lines()["break"] - first]
    code = marshal.loads(base64.b64decode(frames[0]["code_b64"]))
    assert isinstance(code, types.CodeType) and code.co_code == forward.co_code


def test_graph_break_with_its_line_and_resume_function(traced):
    (first, second) = [e for e in traced if e["event"] == "graph_break"]
    compiles = _by_compile(traced)
    assert first["compile"] == compiles[0][0]["compile"] and second["compile"] == compiles[2][0]["compile"]
    assert "depends on its data" in first["reason"]
    loc = first["location"]
    assert loc["line"] == lines()["break"] and loc["function"] == "Net.forward"
    assert loc["text"].strip().startswith("if y.sum() > 0:")
    context_first, context = loc["context"]
    assert context[loc["line"] - context_first] == loc["text"]
    resume = [e for e in traced if e["event"] == "frame"][1]["code"]["name"]
    assert first["resumes"] == [resume]


def test_graphs_guards_and_transformed_code(traced):
    compiles = _by_compile(traced)
    graph = next(e for e in compiles[0] if e["event"] == "graph")
    assert graph["op_count"] == 4 and graph["ops"] == {"linear": 1, "relu": 1, "sum": 1, "gt": 1}
    assert graph["code"].startswith("def forward(")
    guards = next(e for e in compiles[0] if e["event"] == "guards")
    assert guards["count"] == len(guards["guards"]) > 3
    assert guards["checker"].startswith("def check(L, G=_G):")
    assert any("L['x']" in g for g in guards["guards"])
    transformed = next(e for e in compiles[0] if e["event"] == "transformed")
    replacement = marshal.loads(base64.b64decode(transformed["code_b64"]))
    # the objects it calls (the compiled graph) are named by strings in the marshaled copy
    assert replacement.co_name == "forward" and any(
        isinstance(c, str) and c.startswith("<object ") for c in replacement.co_consts)
    assert "__kiln_graph(" in transformed["body"]


def test_symbolic_shapes_after_the_recompile(traced):
    shapes = [e for e in traced if e["event"] == "shapes"]
    numbers = [c[0]["compile"] for c in _by_compile(traced)]
    assert [e["compile"] for e in shapes] == numbers[2:]  # the first two compiles are static
    batch = next(s for s in shapes[0]["symbols"] if s["source"] == "L['x'].size(0)")
    assert batch["example"] == 6 and batch["replaced_by"] is None
    assert batch["why"].startswith("automatic dynamic")


def test_aotgrad_graphs_and_saved_tensors(traced):
    aot = [e for e in traced if e["event"] == "aot_graphs"]
    assert [e["compile"] for e in aot] == [c[0]["compile"] for c in _by_compile(traced)]
    first = aot[0]
    assert "def forward(" in first["joint"] and "tangents_1" in first["joint"]
    assert first["backward"] is not None and "tangents_1" in first["backward"]
    assert first["saved"], "a training step saves values for its backward"
    for value in first["saved"]:
        assert value["name"] in first["forward"] and value["dtype"] == "float32" and value["op"]
    made = {v["op"] for v in first["saved"]}
    assert "input" in made and made - {"input"}, made  # inputs and computed values


def test_inductor_output_with_what_each_kernel_fused(traced):
    inductor = [e for e in traced if e["event"] == "inductor"]
    assert [(e["compile"], e["half"]) for e in inductor] == [
        (c[0]["compile"], half) for c in _by_compile(traced) for half in ("forward", "backward")]
    for e in inductor:
        assert e["compiled"] and e["kernels"] == len(e["fused"]) > 0
        assert e["wrapper"].startswith("def call(args):") and e["cpp"]
        assert all(nodes for nodes in e["fused"].values())
        for name in e["fused"]:
            assert name in e["wrapper"]
        assert e["seconds"] > 0


def test_no_trace_without_a_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("KILN_TRACE", raising=False)
    assert _trace.trace_dir() is None
    before = kiln.session().traces.compiles
    f = kiln.compile(lambda x: x + 1, backend="eager")
    f(torch.ones(2))
    assert kiln.session().traces.compiles == before


def test_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_TRACE", str(tmp_path))
    f = kiln.compile(lambda x: x + 1, backend="eager")
    torch.testing.assert_close(f(torch.ones(2)), torch.full((2,), 2.0))
    events = _events(tmp_path)
    assert [e["event"] for e in events][:2] == ["process", "frame"]
    # config wins over the variable
    other = tmp_path / "other"
    with settings(trace_dir=str(other)):
        kiln.reset()
        f(torch.ones(2))
    assert len(glob.glob(str(other / "*.jsonl"))) == 1


def test_a_cache_hit_runs_nothing_of_the_trace(tmp_path, monkeypatch):
    begun = []
    begin = _trace.TraceFiles.begin
    monkeypatch.setattr(_trace.TraceFiles, "begin", lambda self, *a: (begun.append(1), begin(self, *a))[1])
    with settings(trace_dir=str(tmp_path)):
        f = kiln.compile(lambda x: x * 2, backend="eager")
        f(torch.ones(2))
        assert len(begun) == 1
        (path,) = glob.glob(str(tmp_path / "*.jsonl"))
        size = os.path.getsize(path)
        for _ in range(5):
            torch.testing.assert_close(f(torch.ones(2)), torch.full((2,), 2.0))
        assert os.path.getsize(path) == size and len(begun) == 1


def test_one_write_per_compile(tmp_path, monkeypatch):
    writes = []
    append = _trace.TraceFile._append
    monkeypatch.setattr(_trace.TraceFile, "_append", lambda self, events: (writes.append(len(events)),
                                                                           append(self, events)))

    with settings(trace_dir=str(tmp_path)):
        kiln.compile(_break, backend="eager")(torch.ones(3))
    assert len(writes) == 3  # the header, then one write for each of the two compiles
    assert writes[0] == 1 and all(n > 3 for n in writes[1:])


def test_reset_keeps_the_file_and_the_numbers(tmp_path):
    with settings(trace_dir=str(tmp_path)):
        kiln.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
        traces = kiln.session().traces
        kiln.reset()
        assert kiln.session().traces is traces
        with kiln.Session() as s:
            assert s.traces is traces
            kiln.compile(lambda x: x - 1, backend="eager")(torch.ones(2))
    events = _events(tmp_path)
    first, second = [e["compile"] for e in events if e["event"] == "frame"]
    assert second == first + 1
    assert sum(e["event"] == "process" for e in events) == 1


def test_recompile_limit_hit(tmp_path, monkeypatch):
    monkeypatch.setattr(kiln.config, "recompile_limit", 1)

    def f(x, n):
        return x + n

    compiled = kiln.compile(f, backend="eager", dynamic=False)
    with settings(trace_dir=str(tmp_path)), pytest.warns(UserWarning, match="recompile_limit"):
        compiled(torch.ones(2), 1)
        torch.testing.assert_close(compiled(torch.ones(2), 2), torch.full((2,), 3.0))
    last = _by_compile(_events(tmp_path))[1]
    assert [e["event"] for e in last] == ["frame", "recompile_limit", "compile_end"]
    assert last[1]["limit"] == "recompile_limit" and last[1]["value"] == 1
    assert "expected 1, got 2" in last[1]["reason"]
    assert last[-1]["status"] == "eager"


def test_disk_cache_hits_and_misses(tmp_path):
    cache = str(tmp_path / "cache")

    def f(x):
        return (x * 3).relu()

    with settings(trace_dir=str(tmp_path / "trace"), graph_cache=True, frame_cache=True):
        for _ in range(2):
            kiln.reset()
            compiled = kiln.compile(f, options={"inductor.cache_dir": cache})
            x = torch.linspace(-1, 1, 4)
            torch.testing.assert_close(compiled(x), f(x))
    compiles = _by_compile(_events(tmp_path / "trace"))
    caches = [[(e["kind"], e["result"]) for e in events if e["event"] == "cache"] for events in compiles]
    assert caches == [[("frame", "miss"), ("graph", "miss"), ("graph", "stored"), ("frame", "stored")],
                      [("frame", "hit")]]
    assert compiles[0][-1]["status"] == "compiled" and compiles[1][-1]["status"] == "loaded"


def test_a_failing_compile_is_written_with_its_error(tmp_path):
    def bad_backend(gm, example_inputs):
        raise RuntimeError("no")

    with settings(trace_dir=str(tmp_path)), pytest.raises(kiln.BackendCompilerFailed):
        kiln.compile(lambda x: x + 1, backend=bad_backend)(torch.ones(2))
    end = _events(tmp_path)[-1]
    assert end["event"] == "compile_end" and end["status"] == "error" and "no" in end["error"]


_CHILD = """
import sys, torch, kiln
if sys.argv[1] == "dist":
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + sys.argv[3], rank=0, world_size=1)
kiln.config.trace_dir = sys.argv[2]
print(kiln.compile(lambda x: x * 2, backend="eager")(torch.ones(2)).tolist())
"""


def _child(*args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "KILN_TRACE")}
    done = subprocess.run([sys.executable, "-c", _CHILD, *args], env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[2.0, 2.0]"


def test_one_file_per_process_and_the_rank_under_torch_distributed(tmp_path):
    _child("plain", str(tmp_path))
    _child("dist", str(tmp_path), str(tmp_path / "store"))
    names = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "*.jsonl")))
    assert len(names) == 2
    ranked = [n for n in names if n.endswith("-rank0.jsonl")]
    assert len(ranked) == 1
    pids = set()
    for name in names:
        events = _events_of(tmp_path / name)
        assert events[0]["event"] == "process" and f"pid{events[0]['pid']}" in name
        assert events[0]["rank"] == (0 if name in ranked else None)
        pids.add(events[0]["pid"])
    assert len(pids) == 2


def _events_of(path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_explain_keeps_the_events_of_its_call():
    info = kiln.explain(_break)(torch.ones(3))
    assert info.graph_break_count == 1
    kinds = [e["event"] for e in info.events]
    assert kinds[0] == "process" and info.events[0]["python"] == sys.version.split()[0]
    assert kinds.count("frame") == 2 and kinds.count("graph_break") == 1 and kinds.count("compile_end") == 2


def test_the_config_field_is_documented():
    assert "trace_dir = None" in kiln.config.describe() and "KILN_TRACE" in kiln.config.describe()


def test_a_folder_that_cannot_be_written_warns_and_the_program_goes_on(tmp_path, caplog):
    blocked = tmp_path / "a file"
    blocked.write_text("not a folder")
    with settings(trace_dir=str(blocked / "trace")):
        f = kiln.compile(lambda x: x * 3, backend="eager")
        torch.testing.assert_close(f(torch.ones(2)), torch.full((2,), 3.0))
    assert "cannot write the trace" in caplog.text


def _specializes(x):
    return torch.zeros(int(x.shape[0]) + 1) + x.sum()  # a size needed as a Python int


def test_a_size_specialized_with_the_users_line(tmp_path):
    with settings(trace_dir=str(tmp_path)):
        out = kiln.compile(_specializes, backend="eager", dynamic=True)(torch.ones(8))
    torch.testing.assert_close(out, _specializes(torch.ones(8)))
    (shapes,) = [e for e in _events(tmp_path) if e["event"] == "shapes"]
    (symbol,) = shapes["symbols"]
    assert symbol["source"] == "L['x'].size(0)" and symbol["why"] == "dynamic=True" and symbol["replaced_by"] == "8"
    (spec,) = shapes["specializations"]
    assert spec["symbols"] == ["s0"] and spec["values"] == {"s0": 8}
    assert spec["location"]["line"] == _specializes.__code__.co_firstlineno + 1
    assert "# a size needed as a Python int" in spec["location"]["text"]
    assert shapes["guards"] == ["Eq(s0, 8)"]


def test_replacement_source_is_a_file_beside_the_trace_a_debugger_steps_through(tmp_path):
    """With a trace folder, each replacement's source is written to ``code/`` there and the
    replacement kiln runs names that file: a tracing debugger sees line events in it whose text
    is the replacement's own (the graph call); kiln.decompile still knows it; the results are
    eager's. Without a folder the replacement keeps its ``<kiln replacement of ...>`` name."""
    import linecache

    import kiln.frameeval as fe

    x = torch.randn(5)
    with settings(trace_dir=str(tmp_path)):
        kiln.reset()
        f = kiln.compile(_break, backend="eager")
        seen = []

        def tracer(frame, event, arg):
            seen.append((frame.f_code.co_filename, frame.f_lineno, event))
            return tracer

        sys.settrace(tracer)
        try:
            out = f(x)
        finally:
            sys.settrace(None)
    torch.testing.assert_close(out, _break(x))
    files = sorted(glob.glob(str(tmp_path / "code" / "kiln-replacement-*.py")))
    assert len(files) == 2  # the frame's and its resume function's
    (entry,) = fe.get_cache_entries(_break.__code__)
    assert entry.code.co_filename in files
    stepped = [(name, line) for name, line, event in seen if name in files and event == "line"]
    assert stepped and all(linecache.getline(name, line).strip() for name, line in stepped)
    assert any("__kiln_graph" in linecache.getline(name, line) for name, line in stepped)
    transformed = [e for e in _events(tmp_path) if e["event"] == "transformed"]
    assert sorted(e["file"] for e in transformed) == files
    decompiled = kiln.decompile(f)
    kinds = [part.kind for _, part in decompiled.parts]
    assert decompiled.exact and kinds.count("replacement") == 2 and "resume" in kinds, kinds
    kiln.reset()
    g = kiln.compile(_break, backend="eager")
    g(x)
    (entry,) = fe.get_cache_entries(_break.__code__)
    assert entry.code.co_filename.startswith("<kiln replacement of ")
