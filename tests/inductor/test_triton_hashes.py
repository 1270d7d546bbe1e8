"""Triton's cache keys of a graph's kernels kept in its whole-graph record and set back when a
new process loads it (``triton._runtime.kernel_hashes`` / ``preset_hashes``), so that the
kernels' first launches skip triton's walk of their syntax trees.

The keys are those triton computes: a module loaded again from the same text computes the
same key for each kernel (what makes setting it back sound), and a record made with another
``runtime_identity`` (another triton, another kiln runtime file) sets nothing. These run
triton's own ``JITFunction`` (not the interpreter's), which computes keys without a GPU; a
second process loading a CUDA graph from the cache is ``@pytest.mark.gpu``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytest.importorskip("triton")

from kiln.inductor.triton import _runtime
from kiln.inductor.triton._runtime import kernel_hashes, load_module, module_source, preset_hashes

KERNEL = '''@triton.jit
def kernel0(in_ptr, out_ptr, n, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    x = tl.load(in_ptr + xindex, mask=xindex < n)
    tl.store(out_ptr + xindex, kiln_maximum(x, 0.0) * 2, mask=xindex < n)'''


def _fresh(tmp_path, monkeypatch):
    """The kernels of KERNEL's module as a new process loads them: triton's JITFunctions."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(_runtime, "_loaded", {})
    module = load_module(module_source([KERNEL]), tmp_path)
    return {name: fn for name, fn in vars(module).items() if name.startswith("kernel")}


def test_kept_keys_are_the_ones_triton_computes_and_are_set_back(tmp_path, monkeypatch):
    first = _fresh(tmp_path, monkeypatch)
    assert kernel_hashes(first) is None  # none computed yet
    key = first["kernel0"].cache_key
    entry = json.loads(json.dumps(kernel_hashes(first)))  # as the record keeps it
    assert entry == {"identity": _runtime.runtime_identity(), "hashes": {"kernel0": key}}

    again = _fresh(tmp_path, monkeypatch)
    assert again["kernel0"] is not first["kernel0"] and again["kernel0"].hash is None
    assert again["kernel0"].cache_key == key  # the same text computes the same key

    loaded = _fresh(tmp_path, monkeypatch)
    assert preset_hashes(loaded, entry) == 1 and loaded["kernel0"].hash == key
    assert preset_hashes(loaded, entry) == 0  # a key it has is kept

    other = _fresh(tmp_path, monkeypatch)
    for stale in ({**entry, "identity": "3.0.0:" + "0" * 32}, None, {"hashes": entry["hashes"]}):
        assert preset_hashes(other, stale) == 0
    assert other["kernel0"].hash is None


def test_interpreted_kernels_keep_no_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(_runtime, "_loaded", {})
    module = load_module(module_source([KERNEL]), tmp_path)
    assert kernel_hashes({"kernel0": module.kernel0}) is None


PROGRAM = textwrap.dedent("""
    import json
    import torch
    import kiln
    from kiln.inductor.triton import _runtime

    preset = []
    original = _runtime.preset_hashes

    def counted(functions, entry):
        preset.append(original(functions, entry))
        return preset[-1]

    _runtime.preset_hashes = counted
    # launches through triton's JIT (a hook sees each), which imports the kernels' module; without
    # one a loaded graph launches the kernels of its record and imports none (test_triton_static.py)
    import triton
    triton.knobs.runtime.launch_enter_hook = lambda *args: None

    def fn(x, y):
        return torch.softmax(x * 2, -1) + y.sum(0), (x - y).abs().amax(-1)

    torch.manual_seed(0)
    x, y = torch.randn(64, 96, device="cuda"), torch.randn(64, 96, device="cuda")
    got = kiln.compile(fn)(x, y)
    torch.testing.assert_close(got, fn(x, y))
    cache = kiln.session().graph_cache
    print(json.dumps({"preset": preset, "hits": cache.hits}))
""")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_new_process_loading_the_graph_sets_its_kernels_keys(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    env.pop("TRITON_INTERPRET", None)
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold == {"preset": [], "hits": 0}
    assert warm["hits"] == 1 and len(warm["preset"]) == 1 and warm["preset"][0] >= 2
