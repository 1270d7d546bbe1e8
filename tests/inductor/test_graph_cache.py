"""The whole-graph disk caches: kiln.inductor's compiled ATen graphs (``_graph_cache``) and the
umbrella's compiled captured graphs (``kiln._compiled_cache``). A second process with the
same cache directory traces, lowers and builds nothing; corrupt entries are rebuilt; a
change of any input of the key misses; concurrent writers leave a valid entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import kiln
from kiln.inductor import EntryStore

# A program compiled in a process of its own: an inference graph (one kernel) and a training
# step (forward and backward graphs), both checked against eager; then what the process did.
PROGRAM = textwrap.dedent("""
    import json, sys
    import torch
    import kiln
    import kiln.aotgrad._api as aot_api
    import kiln.inductor._compile as inductor_compile

    kiln.config.raise_internal_errors = True
    counts = {"traces": 0, "lowered": 0}

    def counted(module, name, what):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            counts[what] += 1
            return original(*args, **kwargs)

        setattr(module, name, wrapper)

    counted(aot_api, "trace", "traces")
    counted(inductor_compile, "lower_graph", "lowered")
    import kiln.inductor._graph_cache as graph_cache
    code_loads = []
    code_of = graph_cache._wrapper_code_of

    def counted_code_of(entry, code):  # a wrapper's code object loaded from its record
        got = code_of(entry, code)
        code_loads.append(got is not None)
        return got

    graph_cache._wrapper_code_of = counted_code_of

    def infer(x):
        return torch.softmax(x * 3, -1) + 1

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))

    def loss_of(model, x):
        return model(x).pow(2).mean()

    x = torch.randn(4, 8)
    with torch.no_grad():
        torch.testing.assert_close(kiln.compile(infer)(x), infer(x))
    eager = loss_of(mlp, x)
    eager.backward()
    expected = [p.grad.clone() for p in mlp.parameters()]
    mlp.zero_grad()
    got = kiln.compile(loss_of)(mlp, x)
    got.backward()
    torch.testing.assert_close(got, eager)
    torch.testing.assert_close([p.grad for p in mlp.parameters()], expected)

    builders = list(kiln.session().kernels.values())
    cache = kiln.session().graph_cache
    print(json.dumps({**counts, "built": sum(b.stats.compiled for b in builders),
                      "hits": cache.hits, "misses": cache.misses, "stored": cache.stored,
                      "wrapper_codes_loaded": sum(code_loads)}))
""")


def _run(tmp_path, program=PROGRAM, **env):
    script = tmp_path / "program.py"
    script.write_text(program)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache"), **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_second_process_traces_lowers_and_builds_nothing(tmp_path):
    first, _ = _run(tmp_path)
    assert first == {"traces": 2, "lowered": 3, "built": 3, "hits": 0, "misses": 2, "stored": 2,
                     "wrapper_codes_loaded": 0}
    second, _ = _run(tmp_path)
    # (each graph's wrapper as compiled code: its source is not compiled again)
    assert second == {"traces": 0, "lowered": 0, "built": 0, "hits": 2, "misses": 0, "stored": 0,
                      "wrapper_codes_loaded": 3}


def test_a_wrapper_code_the_record_keeps_is_used_only_for_its_source_and_bytecode():
    """``_graph_cache._wrapper_code_of``: the marshalled code of the same source under this
    interpreter's tag; None (the source compiled instead) for another tag, another source's
    code, a truncated or malformed blob, or no entry."""
    import base64

    from kiln.inductor import _graph_cache as gc

    source, other = "def call(args):\n    return args\n", "def call(args):\n    return ()\n"
    entry = gc._wrapper_code_record(source)
    code = gc._wrapper_code_of(entry, source)
    assert code is not None and code.co_filename == gc._wrapper_filename(source)
    namespace = {}
    exec(code, namespace)
    assert namespace["call"]([1]) == [1]
    assert gc._wrapper_code_of(["cpython-00:0000", entry[1]], source) is None  # another bytecode
    assert gc._wrapper_code_of(gc._wrapper_code_record(other), source) is None  # another source's code
    blob = base64.b64decode(entry[1])
    assert gc._wrapper_code_of([entry[0], base64.b64encode(blob[: len(blob) // 2]).decode()], source) is None
    assert gc._wrapper_code_of([entry[0], "not base64!"], source) is None
    assert gc._wrapper_code_of([entry[0], base64.b64encode(b"\x00" * 7).decode()], source) is None
    assert gc._wrapper_code_of(None, source) is None and gc._wrapper_code_of([entry[0]], source) is None


def test_the_graph_cache_switched_off_compiles_again(tmp_path):
    _run(tmp_path)
    program = PROGRAM.replace("kiln.config.raise_internal_errors = True",
                              "kiln.config.raise_internal_errors = True\nkiln.config.graph_cache = False")
    off, _ = _run(tmp_path, program)
    assert (off["traces"], off["lowered"], off["built"], off["hits"]) == (2, 3, 0, 0)


def _entries(tmp_path, kind):
    return sorted((tmp_path / "cache" / kind).glob("*.json"))


def test_truncated_and_altered_entries_are_detected_and_rebuilt(tmp_path):
    _run(tmp_path)
    captured, graphs = _entries(tmp_path, "captured"), _entries(tmp_path, "graphs")
    assert len(captured) == 2 and len(graphs) == 3
    data = captured[0].read_bytes()
    captured[0].write_bytes(data[: len(data) // 2])  # truncated
    for path in graphs:  # one bit flipped in the body of each
        data = bytearray(path.read_bytes())
        data[-3] ^= 0x01
        path.write_bytes(bytes(data))
    rebuilt, stderr = _run(tmp_path)
    assert "corrupt" in stderr
    assert rebuilt["hits"] == 0 and rebuilt["traces"] == 2 and rebuilt["lowered"] == 3
    assert rebuilt["built"] == 0  # the kernel libraries were intact
    again, _ = _run(tmp_path)
    assert (again["traces"], again["lowered"], again["hits"]) == (0, 0, 2)


def test_concurrent_processes_share_the_cache(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env) for _ in range(2)]
    for run in runs:
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        assert "corrupt" not in err
    after, stderr = _run(tmp_path)
    assert (after["traces"], after["lowered"], after["built"], after["hits"]) == (0, 0, 0, 2)
    assert "corrupt" not in stderr
    assert not list((tmp_path / "cache").rglob("*.tmp"))


WRITER = textwrap.dedent("""
    import sys
    from kiln.inductor import EntryStore

    store = EntryStore(sys.argv[1], "test")
    for i in range(200):
        store.write("key", {"writer": sys.argv[2], "i": i, "payload": "x" * 20000})
        record = store.read("key")
        assert record is not None and record["payload"] == "x" * 20000, record
    print(store.stats.corrupt)
""")


def test_concurrent_writers_of_one_entry_leave_a_valid_one(tmp_path):
    runs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(k)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for k in range(3)]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert out.strip() == "0"
    record = EntryStore(tmp_path, "test").read("key")
    assert record["i"] == 199 and record["writer"] in ("0", "1", "2")


# ---------------------------------------------------------------- the key, in one process
@pytest.fixture
def cached(monkeypatch, tmp_path):
    """The graph cache on, in a directory of the test's own; a fresh Session per compile.
    The disk cache of captured frames stays off: these tests count what the graph cache does
    for frames captured anew (tests/compile/test_frame_cache.py tests the layer above)."""
    monkeypatch.setattr(kiln.config, "graph_cache", True)
    monkeypatch.setattr(kiln.config, "frame_cache", False)
    monkeypatch.setattr(kiln.config, "raise_internal_errors", True)
    kiln.reset()
    yield str(tmp_path)
    kiln.reset()


def _compile_run(fn, args, cache_dir, **options):
    kiln.reset()
    compiled = kiln.compile(fn, options={"inductor.cache_dir": cache_dir, **options})
    with torch.no_grad():
        torch.testing.assert_close(compiled(*args), fn(*args))
    stats = kiln.session().graph_cache
    return stats.hits, stats.misses


def _fn(x):
    return (x.sin() * 2).sum(-1)


def test_a_change_of_dtype_size_strides_or_config_misses(cached):
    x = torch.randn(6, 8)
    assert _compile_run(_fn, (x,), cached) == (0, 1)
    assert _compile_run(_fn, (x.clone(),), cached) == (1, 0)
    assert _compile_run(_fn, (x.double(),), cached) == (0, 1)
    assert _compile_run(_fn, (torch.randn(6, 9),), cached) == (0, 1)
    assert _compile_run(_fn, (torch.randn(8, 6).t(),), cached) == (0, 1)
    assert _compile_run(_fn, (x,), cached, **{"inductor.fuse": False}) == (0, 1)
    assert _compile_run(_fn, (x,), cached, **{"inductor.fuse": False}) == (1, 0)


def test_a_change_of_the_graph_or_grad_mode_misses(cached):
    x = torch.randn(6, 8)
    assert _compile_run(_fn, (x,), cached) == (0, 1)
    assert _compile_run(lambda t: (t.cos() * 2).sum(-1), (x,), cached) == (0, 1)
    assert _compile_run(lambda t: (t.sin() * 3).sum(-1), (x,), cached) == (0, 1)
    kiln.reset()
    w = torch.randn(6, 8, requires_grad=True)
    kiln.compile(_fn, options={"inductor.cache_dir": cached})(w).sum().backward()
    assert (kiln.session().graph_cache.hits, kiln.session().graph_cache.misses) == (0, 1)


def test_an_aten_graph_compiled_before_is_loaded_without_lowering(tmp_path, monkeypatch):
    import kiln.inductor._api as inductor_api
    import kiln.inductor._compile as inductor_compile
    from kiln.aotgrad import aot_compile
    from kiln.inductor import InductorConfig, aten_compiler, decompositions

    compiled, lowered = [], []
    original_compile, original_lower = inductor_api.compile_graph, inductor_compile.lower_graph

    def record(gm, config=None, builders=None, group=None):
        compiled.append(original_compile(gm, config, builders, group))
        return compiled[-1]

    def lower(*args, **kwargs):
        lowered.append(1)
        return original_lower(*args, **kwargs)

    monkeypatch.setattr(inductor_api, "compile_graph", record)
    monkeypatch.setattr(inductor_compile, "lower_graph", lower)

    def backend(gm, example_inputs):  # aotgrad and inductor, without the umbrella's cache
        compiler = aten_compiler(InductorConfig(cache_dir=str(tmp_path)))
        return aot_compile(gm, example_inputs, kiln.compile_context(), fw_compiler=compiler,
                           bw_compiler=compiler, decompositions=decompositions())

    x = torch.randn(5, 7)
    for fn in (_fn, lambda t: (t.sin() * 2).sum(-1)):  # two functions, one ATen graph
        kiln.reset()
        with torch.no_grad():
            torch.testing.assert_close(kiln.compile(fn, backend=backend)(x), fn(x))
    assert len(lowered) == 1
    assert [c.from_cache for c in compiled] == [False, True]
    assert compiled[0].cache_key == compiled[1].cache_key is not None
    assert compiled[1].wrapper_code == compiled[0].wrapper_code and compiled[1].kernels == 1


def _first_piece(x):
    return torch.split(x, 3)[0] + 1


def test_relations_the_trace_decided_are_checked_and_guarded_on_a_hit(cached):
    # tracing split(x, 3) with a symbolic size decides how many pieces there are: the record
    # keeps one compile per outcome, and a hit makes the relation a guard of the frame again
    def run(rows, reset=True):
        if reset:
            kiln.reset()
        x = torch.randn(rows, 4)
        torch.testing.assert_close(compiled(x), _first_piece(x))
        stats = kiln.session().graph_cache
        return stats.hits, stats.misses

    compiled = kiln.compile(_first_piece, dynamic=True, options={"inductor.cache_dir": cached})
    assert run(6) == (0, 1)  # 2 pieces
    assert run(5) == (1, 0)
    assert run(7) == (0, 1)  # 3 pieces: the recorded compile assumed 2
    assert run(8) == (1, 0)
    assert run(4) == (1, 0)
    assert run(9, reset=False) == (2, 0)  # the frame's guard failed: captured again, loaded
    assert kiln.session().stats.captures == 2
