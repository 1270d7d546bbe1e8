"""A graph's Triton kernels compiled before its first call, in parallel (triton/_precompile.py).

On a GPU: every kernel is compiled when ``compile_graph`` returns, for the specialization of the
first call (its launch compiles nothing more), inputs at unaligned offsets, dynamic sizes and
random kernels' seeds included. On CPU: the arguments given to ``warmup``, and that a failing
compile neither stops the others nor reaches the user."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sympy
import torch
import torch.nn.functional as F
from triton_support import CUDA

import kiln
from kiln.inductor import _api
from kiln.inductor._ir import SEED, ComputedBuffer, InputBuffer
from kiln.inductor.triton._kernel import Param, TritonKernel
from kiln.inductor.triton._precompile import compile_in_parallel, warmup_args
from kiln.inductor.triton._runtime import _loaded


def _compiled_per_kernel(graph):
    """How many compiled variants triton holds for each kernel of ``graph`` (its module is
    loaded once per process: ``_runtime._loaded``)."""
    module = next(m for m in _loaded.values() if Path(m.__file__).read_text() == graph.triton_code)
    device = torch.cuda.current_device()
    return {name: len(fn.device_caches[device][0]) for name, fn in vars(module).items()
            if name.startswith("kernel") and hasattr(fn, "device_caches")}


@pytest.fixture
def at_compile(monkeypatch, fresh_kiln):
    """Per compiled graph: (the graph, its kernels' compiled variants when compile_graph returned)."""
    seen = []
    original = _api.compile_graph

    def record(gm, config=None, builders=None):
        result = original(gm, config, builders)
        seen.append((result, _compiled_per_kernel(result) if result.triton_code else {}))
        return result

    monkeypatch.setattr(_api, "compile_graph", record)
    return seen


def _fn(x, y):
    return torch.softmax(x * 2, -1), (y + 1).sum(0), torch.relu(x).cumsum(-1), F.dropout(x, 0.5) * 3


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("processes", [False, True])
@pytest.mark.parametrize("dynamic", [False, True])
def test_every_kernel_is_compiled_before_the_first_call_for_its_arguments(at_compile, tmp_path, monkeypatch,
                                                                           dynamic, processes):
    """... by threads of this process (the default), or by the worker processes into triton's
    cache, which this process then only reads (one binary per kernel there: the keys agree)."""
    from kiln.inductor.triton import _compile_pool, _precompile

    results = []

    def spy(calls, size):
        results.append(_compile_pool.compile_in_workers(calls, size))
        return results[-1]

    monkeypatch.setattr(_precompile, "compile_in_workers", spy)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    options = {"inductor.random_in_kernels": True, "inductor.cache_dir": str(tmp_path),
               "inductor.compile_processes": processes}
    x = torch.randn(48, 80, device="cuda")
    y = torch.randn(48 * 80 + 1, device="cuda")[1:].view(48, 80)  # 4 bytes past an aligned address
    torch.manual_seed(0)
    out = kiln.compile(_fn, options=options, dynamic=dynamic)(x, y)
    torch.manual_seed(0)
    expected = _fn(x, y)
    for k in range(3):
        torch.testing.assert_close(out[k], expected[k])
    assert len(at_compile) == 1
    graph, before = at_compile[0]
    assert graph.kernels >= 3 and len(before) == graph.kernels
    assert set(before.values()) == {1}  # compiled when compile_graph returned
    assert _compiled_per_kernel(graph) == before  # the first call's launches compiled nothing more
    assert results == ([(graph.kernels, 0)] if processes else [])
    assert len(list((tmp_path / "triton").rglob("*.cubin"))) == graph.kernels


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_one_compile_thread_leaves_each_kernel_to_its_launch(at_compile, tmp_path):
    options = {"inductor.compile_threads": 1, "inductor.cache_dir": str(tmp_path)}
    x = torch.randn(8, 20, device="cuda")
    torch.testing.assert_close(kiln.compile(lambda x: torch.softmax(x, -1) + 1, options=options)(x),
                               torch.softmax(x, -1) + 1)
    graph, before = at_compile[0]
    assert set(before.values()) == {0} and set(_compiled_per_kernel(graph).values()) == {1}


def test_warmup_arguments_have_the_first_calls_specialization():
    """Tensors as their dtype (triton's aligned stand-in), or a tensor at the same offset from
    an aligned address where the buffer starts off it; sizes their example values; the seed
    an int64."""
    n = sympy.Symbol("s0", integer=True, positive=True)
    buffers = {
        "a": InputBuffer("a", [sympy.Integer(4)], torch.float32, stride=(sympy.Integer(1),)),
        "b": InputBuffer("b", [sympy.Integer(4)], torch.float32, stride=(sympy.Integer(1),),
                         storage_offset=sympy.Integer(3)),
        "c": InputBuffer("c", [sympy.Integer(4)], torch.float16, stride=(sympy.Integer(1),),
                         storage_offset=sympy.Integer(8)),
        "d": ComputedBuffer("d", [sympy.Integer(4)], torch.bfloat16),
    }
    launch = TritonKernel("kernel0", "", [Param("a", "in"), Param("b", "in"), Param("c", "in"), Param("d", "out"),
                                          Param(n.name, "size"), Param(SEED.name, "size")], {"XBLOCK": 4})
    args = warmup_args(launch, buffers, lambda e: 33 if str(e) == "s0" else int(sympy.sympify(e)), "cpu")
    assert args[0] is torch.float32 and args[2] is torch.float16 and args[3] is torch.bfloat16
    assert isinstance(args[1], torch.Tensor) and args[1].dtype == torch.float32
    assert args[1].data_ptr() % 16 == 12  # three floats past the allocation's (aligned) start
    assert args[4] == 33 and isinstance(args[5], int) and 2**62 <= args[5] < 2**63


def test_a_failing_compile_stops_neither_the_others_nor_the_caller():
    done = []

    def fails():
        raise RuntimeError("out of resources")

    calls = [lambda k=k: done.append(k) for k in range(5)]
    compile_in_parallel([fails, *calls, fails], 3, None)
    assert sorted(done) == list(range(5))


_KERNEL = '''

@triton.jit
def kernel0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tl.store(out_ptr0 + xindex, libdevice.tanh(tl.load(in_ptr0 + xindex, mask=xmask)) * 2, mask=xmask)
'''


def _spec_for_hopper():
    """triton's specialization data of kernel0 above for an H100, as its ``jit_cache_hook``
    gets it, made without a GPU; the target, options and ASTSource parts."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import serialize_specialization_data

    target = GPUTarget("cuda", 90, 32)
    signature = {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"}
    constexprs = {(3,): 128}
    attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]]}
    options = make_backend(target).parse_options({"num_warps": 4})
    spec = serialize_specialization_data("kernel0", signature, constexprs, attrs, options, "key", target)
    return spec, target, signature, constexprs, attrs, options


@pytest.mark.skipif(CUDA, reason="the GPU tests above cover it there")
def test_a_worker_compiles_into_the_cache_the_launch_reads(tmp_path, monkeypatch):
    """A worker process compiles kernel0 for an H100 into triton's cache (no GPU needed); the
    same compile in this process then finds it there: one binary in the cache, not two."""
    pytest.importorskip("triton.backends.nvidia")
    from kiln.inductor.triton._compile_pool import CompilePool, Job
    from kiln.inductor.triton._runtime import HEADER

    cache = tmp_path / "triton-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    path = tmp_path / "kiln_triton_worker_test.py"
    path.write_text(HEADER + _KERNEL)
    spec, target = _spec_for_hopper()[:2]
    pool = CompilePool(2)
    try:
        bad = Job(str(path), "kiln_triton_worker_test", "no_such_kernel", spec, [target.backend, target.arch, 32])
        good = Job(str(path), "kiln_triton_worker_test", "kernel0", spec, [target.backend, target.arch, 32])
        pool.compile([bad, good])
    finally:
        pool.close()
    assert good.error is None and good.seconds > 0
    assert bad.error is not None and "no_such_kernel" in bad.error
    binaries = sorted(cache.rglob("*.cubin"))
    assert len(binaries) == 1
    # a process of its own (this one runs triton's interpreter): the module imported under the
    # same name, the same compile, as the launch would
    script = f"""
import importlib.util, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import triton
from triton.compiler import ASTSource
from test_triton_precompile import _spec_for_hopper
spec, target, signature, constexprs, attrs, options = _spec_for_hopper()
module_spec = importlib.util.spec_from_file_location("kiln_triton_worker_test", {str(path)!r})
module = importlib.util.module_from_spec(module_spec)
sys.modules["kiln_triton_worker_test"] = module
module_spec.loader.exec_module(module)
kernel = triton.compile(ASTSource(module.kernel0, signature, constexprs, attrs), target=target, options=options.__dict__)
sys.stdout.buffer.write(kernel.asm["cubin"])
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert sorted(cache.rglob("*.cubin")) == binaries and done.stdout == binaries[0].read_bytes()


def test_the_capture_hook_answers_for_its_kernels_on_its_thread_only():
    """While the specs are captured, triton's jit_cache_hook skips (True) the compiles of the
    kernel being warmed on the capturing thread and records their data; any other call (another
    kernel, another thread) goes to the hook it replaced; that hook is back afterwards."""
    import threading

    import triton

    from kiln.inductor.triton._compile_pool import capture_specs

    class Info:
        def __init__(self, fn):
            self.jit_function = fn

    mine, other = object(), object()
    previous_calls = []

    def previous(**kwargs):
        previous_calls.append(kwargs["fn"].jit_function)
        return None

    def fire(fn, spec):
        return triton.knobs.runtime.jit_cache_hook(key="k", repr="r", fn=Info(fn), is_manual_warmup=True,
                                                   compile={"specialization_data": spec}, already_compiled=False)

    answers = []

    def warm():
        answers.append(fire(mine, "mine"))
        answers.append(fire(other, "another kernel"))
        thread = threading.Thread(target=lambda: answers.append(fire(mine, "another thread")))
        thread.start()
        thread.join()

    old = triton.knobs.runtime.jit_cache_hook
    triton.knobs.runtime.jit_cache_hook = previous
    try:
        found = capture_specs([(mine, warm)])
        assert triton.knobs.runtime.jit_cache_hook is previous
    finally:
        triton.knobs.runtime.jit_cache_hook = old
    assert found == [(mine, "mine")]
    assert answers == [True, None, None] and previous_calls == [other, mine]
