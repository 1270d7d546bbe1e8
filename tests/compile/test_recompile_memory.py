"""The recompile memory on disk (``kiln._recompile_memory``): what automatic dynamic learned
in one process (sizes and numbers that changed) makes a new process compile the dynamic
graph on its first call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from kiln._recompile_memory import code_key, decode_source, encode_source
from kiln.guards import AttrSource, DefaultsSource, ItemSource, LocalSource, ModuleSource

# Calls f (a tensor argument) and g (a tensor and a number) with the sizes and numbers of
# argv; prints the graphs compiled for each (whether each is dynamic) and the captures.
PROGRAM = textwrap.dedent("""
    import json, sys
    import torch
    import kiln

    kiln.config.raise_internal_errors = True
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(kiln.compile_context().symbolic
                      or len([n for n in gm.graph.nodes if n.op == "placeholder"]) > 1)
        return gm.forward

    def f(x):
        return (x * 2).sin() + 1

    def g(x, n):
        return x * n + 1

    DYNAMIC = None
    cf, cg = kiln.compile(f, backend=backend, dynamic=DYNAMIC), kiln.compile(g, backend=backend, dynamic=DYNAMIC)
    for arg in sys.argv[1:]:
        which, value = arg[0], int(arg[1:])
        if which == "f":
            x = torch.randn(value, 3)
            torch.testing.assert_close(cf(x), f(x))
        else:
            x = torch.randn(4)
            torch.testing.assert_close(cg(x, value), g(x, value))
    print(json.dumps({"graphs": graphs, "captures": kiln.session().stats.captures}))
""")


def _run(tmp_path, *calls, program=PROGRAM):
    script = tmp_path / "program.py"
    script.write_text(program)
    done = subprocess.run([sys.executable, str(script), *calls], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_restarted_process_compiles_the_dynamic_graph_first(tmp_path):
    first, _ = _run(tmp_path, "f4", "f8")
    assert first == {"graphs": [False, True], "captures": 2}  # static, then dynamic
    second, _ = _run(tmp_path, "f4", "f8", "f5")
    assert second == {"graphs": [True], "captures": 1}  # dynamic at once, for every size


def test_a_number_learned_varying_is_a_graph_input_from_the_first_call(tmp_path):
    first, _ = _run(tmp_path, "g2", "g3")
    assert first == {"graphs": [False, True], "captures": 2}
    second, _ = _run(tmp_path, "g5", "g7")
    assert second == {"graphs": [True], "captures": 1}


def test_what_one_function_learned_is_not_anothers(tmp_path):
    _run(tmp_path, "f4", "f8")
    other, _ = _run(tmp_path, "g2", "f4")
    assert other == {"graphs": [False, True], "captures": 2}  # g static; f dynamic


def test_an_edited_function_starts_without_memory(tmp_path):
    _run(tmp_path, "f4", "f8")
    edited, _ = _run(tmp_path, "f4", "f8", program=PROGRAM.replace("(x * 2).sin()", "(x * 3).sin()"))
    assert edited == {"graphs": [False, True], "captures": 2}
    unedited, _ = _run(tmp_path, "f4")
    assert unedited == {"graphs": [True], "captures": 1}


def test_dynamic_false_ignores_the_memory(tmp_path):
    _run(tmp_path, "f4", "f8")
    static, _ = _run(tmp_path, "f4", "f8", program=PROGRAM.replace("DYNAMIC = None", "DYNAMIC = False"))
    assert static == {"graphs": [False, False], "captures": 2}
    automatic, _ = _run(tmp_path, "f4")
    assert automatic == {"graphs": [True], "captures": 1}


def test_the_memory_switched_off_is_neither_read_nor_written(tmp_path):
    off = PROGRAM.replace("kiln.config.raise_internal_errors = True",
                          "kiln.config.raise_internal_errors = True\nkiln.config.recompile_memory = False")
    _run(tmp_path, "f4", "f8", program=off)
    assert not (tmp_path / "cache" / "dynamic").exists()
    _run(tmp_path, "f4", "f8")
    again, _ = _run(tmp_path, "f4", program=off)
    assert again == {"graphs": [False], "captures": 1}


def test_a_corrupt_record_is_ignored_and_rewritten(tmp_path):
    _run(tmp_path, "f4", "f8")
    (record,) = (tmp_path / "cache" / "dynamic").glob("*.json")
    data = record.read_bytes()
    record.write_bytes(data[:-5])
    relearned, stderr = _run(tmp_path, "f4", "f8")
    assert "corrupt" in stderr
    assert relearned == {"graphs": [False, True], "captures": 2}
    remembered, _ = _run(tmp_path, "f4")
    assert remembered == {"graphs": [True], "captures": 1}


# ---------------------------------------------------------------- keys and sources, in process
def _one(x):
    return x + 1


def _two(x):
    return x + 2


def test_the_code_key_follows_the_code():
    assert code_key(_one.__code__) == code_key(_one.__code__)
    assert code_key(_one.__code__) != code_key(_two.__code__)


@pytest.mark.parametrize("source", [
    LocalSource("x"),
    ItemSource(AttrSource(LocalSource("self"), "layers"), 3),
    ItemSource(LocalSource("d"), ("a", 1, None, b"k")),
    DefaultsSource(ModuleSource("pkg.mod"), "kw"),
])
def test_sources_round_trip(source):
    encoded = encode_source(source)
    assert decode_source(json.loads(json.dumps(encoded))) == source


def test_a_source_keyed_by_a_class_is_left_out():
    assert encode_source(ItemSource(LocalSource("registry"), int)) is None
