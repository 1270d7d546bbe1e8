"""A graph's Triton kernels loaded from triton's cache without its JIT (triton/_static.py).

On a GPU, in fresh processes sharing kiln's and triton's caches: the first process launches
the kernels the precompile made without triton's ``JITFunction.run``; a second one, loading the
graph from kiln's cache, does too and never imports the kernels' module; where the record
cannot be used (triton's cache elsewhere, another identity, a launch hook that must see every
launch) the launches go through triton's JIT, with the same results. On CPU: the keys of
warmup arguments and the records' plain data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from kiln.inductor._entries import EntryStore
from kiln.inductor.triton._launch import _key_function
from kiln.inductor.triton._static import _Source, key_of_warmup, static_entry
from kiln.inductor.triton._static_launch import launcher

PROGRAM = textwrap.dedent("""
    import json, sys
    import torch
    import triton
    import kiln
    from triton.runtime.jit import JITFunction

    runs = []
    original = JITFunction.run

    def counted(self, *args, **kwargs):  # a launch through the JIT (a warmup only compiles)
        if not kwargs.get("warmup"):
            runs.append(self.__name__)
        return original(self, *args, **kwargs)

    JITFunction.run = counted
    from kiln.inductor.triton._static_launch import StaticKernel

    static_runs = []
    original_static = StaticKernel.__call__

    def counted_static(self, *args):  # a launch through torch's static launcher
        static_runs.append(self.name)
        return original_static(self, *args)

    StaticKernel.__call__ = counted_static
    if sys.argv[1] == "hooked":  # a launch hook sees every launch: they go through triton
        triton.knobs.runtime.launch_enter_hook = lambda *args: None

    def fn(x, y, n):
        a = torch.softmax(x * 2, -1) + y.sum(0)
        return a, (x - y).abs().amax(-1) * n, torch.nn.functional.dropout(x, 0.5) * 2

    torch.manual_seed(0)
    x, y = torch.randn(64, 96, device="cuda"), torch.randn(64, 96, device="cuda")
    compiled = kiln.compile(fn)
    for n in (3, 3):
        got = compiled(x, y, n)
        expected = fn(x, y, n)
        torch.testing.assert_close(got[:2], expected[:2])
        kept = got[2] != 0
        torch.testing.assert_close(got[2][kept], (x * 4)[kept])
        assert 0.4 < kept.float().mean().item() < 0.6
    imported = sorted(m for m in sys.modules if m.startswith("kiln_triton_"))
    print(json.dumps({"hits": kiln.session().graph_cache.hits, "jit_runs": len(runs), "imported": len(imported),
                      "static_runs": len(static_runs)}))
""")


def _run(tmp_path, mode="plain", triton_cache="triton"):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache"), "TRITON_CACHE_DIR": str(tmp_path / triton_cache)}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _change_identities(tmp_path):
    store = EntryStore(tmp_path / "cache", "graphs")
    changed = 0
    for path in store.directory.glob("*.json"):
        record = store.read(path.stem)
        for entries in (record.get("triton_static") or {}).values():
            for entry in entries:
                entry["identity"]["capability"] = [1, 0]
                changed += 1
        store.write(path.stem, record)
    return changed


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("later", ["plain", "hooked", "other-triton-cache", "other-identity"])
def test_a_new_process_launches_the_cached_kernels_without_tritons_jit(tmp_path, later):
    static = launcher() is not None  # torch's static CUDA launcher (torch 2.8 on, CUDA builds)
    cold = _run(tmp_path)
    # the first process: each kernel compiled before the first call and launched as compiled,
    # through torch's static launcher where there is one (at least 3 kernels, 2 calls)
    static_runs = cold.pop("static_runs")
    assert cold == {"hits": 0, "jit_runs": 0, "imported": 1}
    assert (static_runs >= 6 and static_runs % 2 == 0) if static else static_runs == 0
    if later == "other-identity":
        assert _change_identities(tmp_path) >= 3
    warm = _run(tmp_path, "hooked" if later == "hooked" else "plain",
                "triton-empty" if later == "other-triton-cache" else "triton")
    assert warm["hits"] == 1
    if later == "plain":
        assert warm["jit_runs"] == 0 and warm["imported"] == 0
        assert warm["static_runs"] == static_runs  # the same launches, loaded from the record
    else:  # the record is not used: triton's JIT launches (and compiles where its cache is empty)
        assert warm["jit_runs"] >= 3 and warm["imported"] == 1 and warm["static_runs"] == 0


def test_the_key_of_warmup_arguments_is_the_launch_key_of_such_arguments():
    """A dtype stands for an aligned tensor, a tensor at an offset keeps its address's residue;
    sizes and seeds as ``Launch`` classes them."""
    kinds = ["tensor", "tensor", "int", "int", "seed"]
    base = torch.empty(64)
    aligned, shifted = base[:8], base[1:9]  # 4 bytes past the allocator's alignment
    args = [aligned, shifted, 1, 4096 + 3, 2**62 + 12345]
    launch_key = _key_function(tuple(kinds))(0, *args)
    assert key_of_warmup(0, kinds, [torch.float32, shifted, 1, 4096 + 3, 2**62 + 12345]) == launch_key
    assert launch_key[1:3] == (0, 4)
    assert key_of_warmup(0, kinds, [torch.float32, shifted, 1, 2**40, 7]) != launch_key  # other classes
    assert key_of_warmup(0, kinds, [torch.float32, shifted, 1.0, 4096 + 3, 7]) is None  # not a size


class _Fn:
    arg_names = ["out", "x", "n", "XBLOCK"]


class _Src:
    fn = _Fn()
    signature = {"out": "*fp32", "x": "*fp32", "n": "i32", "XBLOCK": "constexpr"}
    constants = {(3,): 64}


class _Kernel:  # what triton's CompiledKernel holds of its source, and its cache entry's hash
    src, hash, name = _Src(), "abc123", "kernel0"


def test_a_record_keeps_the_signatures_order_through_the_cache(tmp_path):
    """The launcher takes the arguments in the signature's order; the cache writes its records
    with sorted keys: "out" before "n" before "XBLOCK" must survive it."""
    store = EntryStore(tmp_path, "graphs")
    store.write("k", {"triton_static": {"kernel0": [static_entry(_Kernel(), (0, 0, 0, 17))]}})
    entry = store.read("k")["triton_static"]["kernel0"][0]
    assert list(_Source(entry).signature) == ["out", "x", "n", "XBLOCK"]
    assert _Source(entry).constants == {(3,): 64} and _Source(entry).fn.arg_names == _Fn.arg_names


def test_a_record_entry_is_plain_data_or_none():
    entry = static_entry(_Kernel(), (0, 0, 0, 17))
    assert entry == {"key": [0, 0, 0, 17], "hash": "abc123", "name": "kernel0",
                     "signature": [list(p) for p in _Src.signature.items()], "constants": [[[3], 64]],
                     "arg_names": _Fn.arg_names}
    assert json.loads(json.dumps(entry)) == entry

    class Odd(_Src):
        constants = {(3,): torch.float32}  # no plain value: not recorded

    kernel = _Kernel()
    kernel.src = Odd()
    assert static_entry(kernel, (0, 0)) is None


def test_twins_entries_of_one_binary_are_loaded_once(monkeypatch):
    """On the cache-hit path: a record whose launches hold the same binary under the same key
    (twins, ``_twins``) loads it once and seeds each launch with that kernel; another key or
    another hash is loaded on its own. (triton's loading itself stands in: it needs a GPU.)"""
    from kiln.inductor import _graph_cache
    from kiln.inductor.triton import _runtime, _static

    loads = []

    def load_entry(entry, declared):
        loads.append((entry["hash"], tuple(entry["key"])))
        assert declared == 3  # what the record's Launch passes: the static launcher's argument count
        return tuple(entry["key"]), object()

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(_runtime, "interpreting", lambda: False)
    monkeypatch.setattr(_static, "identity", lambda index: {"capability": [9, 0]})
    monkeypatch.setattr(_static, "load_entry", load_entry)

    def entry(digest, key):
        return [{"hash": digest, "key": key, "identity": {"capability": [9, 0]}}]

    record = {"_launch_kernel0": entry("h1", [0, 0, 17]), "_launch_kernel3": entry("h1", [0, 0, 17]),
              "_launch_kernel4": entry("h1", [0, 8, 17]), "_launch_kernel5": entry("h2", [0, 0, 17])}
    out = _graph_cache._load_static(record, dict.fromkeys(record, 3))
    assert sorted(loads) == [("h1", (0, 0, 17)), ("h1", (0, 8, 17)), ("h2", (0, 0, 17))]
    assert out["_launch_kernel0"][0][1] is out["_launch_kernel3"][0][1]
    assert out["_launch_kernel4"][0][1] is not out["_launch_kernel0"][0][1]
    assert sorted(out) == sorted(record)
