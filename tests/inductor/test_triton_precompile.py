"""A graph's Triton kernels compiled before its first call, in parallel (triton/_precompile.py).

On a GPU: every kernel is compiled when ``compile_graph`` returns, for the specialization of the
first call (its launch compiles nothing more), inputs at unaligned offsets, dynamic sizes and
random kernels' seeds included. On CPU: the arguments given to ``warmup``, and that a failing
compile neither stops the others nor reaches the user."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
import sympy
import torch
import torch.nn.functional as F
from triton_support import CUDA

import kiln
from kiln.inductor import _api
from kiln.inductor._ir import SEED, ComputedBuffer, InputBuffer
from kiln.inductor.triton import _runtime
from kiln.inductor.triton._kernel import Param, TritonKernel
from kiln.inductor.triton._launch import Launch
from kiln.inductor.triton._precompile import _compiled, compile_in_parallel, warmup_args
from kiln.inductor.triton._static_launch import StaticKernel, launcher


def _static_loaded(graph):
    """The ids of the compiled kernels of ``graph``'s launches loaded for torch's static
    launcher (``_static_launch``)."""
    launches = [v for v in graph.call.__globals__.values() if isinstance(v, Launch)]
    return {id(k.compiled) for launch in launches for k in launch.kernels.values() if isinstance(k, StaticKernel)}


def _compiled_per_kernel(graph, loaded=False):
    """How many compiled variants triton holds for each kernel of ``graph`` (its module is
    loaded once per process: ``_runtime._loaded``); ``loaded``: how many of them are loaded
    onto the device (module and triton's launcher, or for torch's static launcher)."""
    module = next(m for m in _runtime._loaded.values() if Path(m.__file__).read_text() == graph.triton_code)
    device = torch.cuda.current_device()
    static = _static_loaded(graph) if loaded else set()
    return {name: sum(1 for k in fn.device_caches[device][0].values()
                      if not loaded or getattr(k, "function", None) is not None or id(k) in static)
            for name, fn in vars(module).items() if name.startswith("kernel") and hasattr(fn, "device_caches")}


@pytest.fixture
def at_compile(monkeypatch, fresh_kiln):
    """Per compiled graph: (the graph, its kernels' compiled variants when compile_graph
    returned, how many of them were loaded then)."""
    seen = []
    original = _api.compile_graph

    def record(gm, config=None, builders=None, group=None):
        result = original(gm, config, builders, group)
        seen.append((result, _compiled_per_kernel(result) if result.triton_code else {},
                     _compiled_per_kernel(result, loaded=True) if result.triton_code else {}))
        return result

    monkeypatch.setattr(_api, "compile_graph", record)
    return seen


def _fn(x, y):
    return torch.softmax(x * 2, -1), (y + 1).sum(0), torch.relu(x).cumsum(-1), F.dropout(x, 0.5) * 3


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize(("dynamic", "processes"), [(False, "ready"), (True, "ready"), (False, "starting"),
                                                    (False, None)])
def test_every_kernel_is_compiled_before_the_first_call_for_its_arguments(at_compile, tmp_path, monkeypatch,
                                                                           dynamic, processes):
    """... once each: one binary per kernel in triton's cache; each loaded onto the device
    (module and launcher, or for torch's static launcher) when compile_graph returned, not at
    its first launch. With the worker processes ready (and given their first launches before
    this process's threads start), every kernel compiled by them, which this process's
    threads then only read from the cache (one binary per kernel there: the keys agree).
    With a new pool, started by this compile (its workers ready after the kernels or during
    their compile), each kernel compiled once, by the threads or by a worker."""
    from kiln.inductor.triton import _compile_pool, _precompile

    results = []

    def spy(calls, size):
        claims = _compile_pool.compile_in_workers(calls, size)
        deadline = time.monotonic() + 60
        while processes == "ready" and claims is not None and claims.open():
            assert time.monotonic() < deadline, "the ready workers took no launch"
            time.sleep(0.001)
        results.append(claims)
        return claims

    monkeypatch.setattr(_precompile, "compile_in_workers", spy)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    if processes == "ready":  # started and warmed up before the compile
        _precompile.start_workers(None, torch.cuda.current_device())
        _wait_until_ready(_compile_pool.pool(_precompile._size(None)))
    elif processes == "starting":  # a pool of its own, started by the compile
        monkeypatch.setattr(_compile_pool, "_pool", None)
    # the kernels' modules loaded afresh: another case of this test in this process loaded the
    # same source, whose triton functions hold their compiled kernels (none compiled again)
    monkeypatch.setattr(_runtime, "_loaded", {})
    options = {"inductor.random_in_kernels": True, "inductor.cache_dir": str(tmp_path),
               "inductor.compile_processes": processes is not None}
    x = torch.randn(48, 80, device="cuda")
    y = torch.randn(48 * 80 + 1, device="cuda")[1:].view(48, 80)  # 4 bytes past an aligned address
    torch.manual_seed(0)
    out = kiln.compile(_fn, options=options, dynamic=dynamic)(x, y)
    torch.manual_seed(0)
    expected = _fn(x, y)
    for k in range(3):
        torch.testing.assert_close(out[k], expected[k])
    assert len(at_compile) == 1
    graph, before, loaded = at_compile[0]
    assert graph.kernels >= 3 and len(before) == graph.kernels
    assert set(before.values()) == {1}  # compiled when compile_graph returned
    assert loaded == before  # and loaded
    # for torch's static launcher, where there is one (no launcher of triton's built)
    assert len(_static_loaded(graph)) == (graph.kernels if launcher() is not None else 0)
    assert _compiled_per_kernel(graph) == before  # the first call's launches compiled nothing more
    assert len(list((tmp_path / "triton").rglob("*.cubin"))) == graph.kernels
    if processes is None:
        assert results == []
        return
    if processes == "starting":
        _compile_pool._pool.close()
    [claims] = results
    assert len(claims.jobs) == graph.kernels
    owners = [job.owner for job in claims.jobs]
    assert set(owners) <= {"worker", "thread"} and None not in owners
    assert all(job.error is None and job.done.is_set() for job in claims.jobs if job.owner == "worker")
    if processes == "ready":
        assert owners == ["worker"] * graph.kernels


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_one_compile_thread_leaves_each_kernel_to_its_launch(at_compile, tmp_path):
    options = {"inductor.compile_threads": 1, "inductor.cache_dir": str(tmp_path)}
    x = torch.randn(8, 20, device="cuda")
    torch.testing.assert_close(kiln.compile(lambda x: torch.softmax(x, -1) + 1, options=options)(x),
                               torch.softmax(x, -1) + 1)
    graph, before, _ = at_compile[0]
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


class _Compiled:
    """What the loading step reads of a compiled kernel: ``src`` (its signature and
    constants), ``function`` (None until loaded) and ``_init_handles`` (logged; ``meet``: a
    barrier its load must pass with another load running at the same time)."""

    def __init__(self, signature, log, fails=False, meet=None):
        self.src = type("Src", (), {"signature": signature, "constants": {}})()
        self.function, self.log, self.fails, self.meet = None, log, fails, meet

    def _init_handles(self):
        self.log.append(("start", self.src.signature["a"], id(self)))
        if self.meet is not None:
            self.meet.wait(timeout=20)  # broken (raises) unless the other load runs at once
        time.sleep(0.02)
        self.log.append(("end", self.src.signature["a"], id(self)))
        if self.fails:
            raise RuntimeError("out of resources")
        self.function = object()


def test_compiled_kernels_are_loaded_once_one_per_signature_at_a_time():
    """Each kernel a call returns is loaded once (the same kernel twice, once); kernels of one
    launch signature one after another (the first builds its launcher), of different ones at
    once (an fp32 and the bf16 kernel meet at a barrier); a failing load stops no other."""
    log = []
    meet = threading.Barrier(2)
    fp32 = [_Compiled({"a": "*fp32"}, log, meet=meet), _Compiled({"a": "*fp32"}, log), _Compiled({"a": "*fp32"}, log)]
    kernels = [*fp32, _Compiled({"a": "*bf16"}, log, meet=meet), _Compiled({"a": "*fp16"}, log, fails=True)]
    compile_in_parallel([lambda k=k: k for k in kernels] + [lambda: fp32[0], lambda: None], 4, None)
    assert [k.function is not None for k in kernels] == [True, True, True, True, False]
    assert sorted(e[2] for e in log if e[0] == "start") == sorted(id(k) for k in kernels)
    fp32_events = [e for e in log if e[1] == "*fp32"]
    assert all(fp32_events[i][0] == "start" and fp32_events[i + 1][:1] == ("end",)
               and fp32_events[i][2] == fp32_events[i + 1][2] for i in range(0, 6, 2))  # never two at once


def test_a_failing_compile_stops_neither_the_others_nor_the_caller():
    done = []

    def fails():
        raise RuntimeError("out of resources")

    calls = [lambda k=k: done.append(k) for k in range(5)]
    compile_in_parallel([fails, *calls, fails], 3, None)
    assert sorted(done) == list(range(5))


def test_the_kernel_of_a_compile_future_is_its_result():
    """Under ``AsyncCompileMode`` a ``warmup`` returns triton's ``FutureKernel``; one the
    mode's exit left unfinished (a failed compile raised there first; its ``kernel``
    attribute None) gives what its ``result`` gives, which also enters it in the JIT's cache
    (the finalize); a failed compile gives None."""
    from triton.runtime._async_compile import FutureKernel

    finalized: list[object] = []

    def future_kernel(future: Future) -> FutureKernel:  # triton 3.9: (finalize, cleanup, future)
        if len(inspect.signature(FutureKernel).parameters) == 3:
            return FutureKernel(finalized.append, lambda _: None, future)
        return FutureKernel(finalized.append, future)

    kernel, done, failed = object(), Future(), Future()
    done.set_result(kernel)
    failed.set_exception(RuntimeError("out of resources"))
    assert _compiled(future_kernel(done)) is kernel
    assert finalized == [kernel]
    assert _compiled(future_kernel(failed)) is None
    assert _compiled(kernel) is kernel


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
    extra = [target] if "target" in inspect.signature(serialize_specialization_data).parameters else []  # (3.9)
    spec = serialize_specialization_data("kernel0", signature, constexprs, attrs, options, "key", *extra)
    return spec, target, signature, constexprs, attrs, options


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


def _wait_until_ready(pool, seconds=120):
    deadline = time.monotonic() + seconds
    while not pool.ready():
        assert time.monotonic() < deadline, "no compile worker warmed up"
        time.sleep(0.01)


def _jobs(tmp_path, module, count, kernel="kernel0"):
    """``count`` launches of ``kernel`` (kernel0 above, for an H100) in a module of its own."""
    from kiln.inductor.triton._compile_pool import Job
    from kiln.inductor.triton._runtime import HEADER

    path = tmp_path / f"{module}.py"
    path.write_text(HEADER + _KERNEL)
    spec, target = _spec_for_hopper()[:2]
    return [Job(str(path), module, kernel, spec, [target.backend, target.arch, 32], i) for i in range(count)]


def test_launches_are_the_threads_while_the_workers_start():
    """While the pool's workers start (importing triton, compiling their first kernel), a
    graph's launches are this process's threads' at once: nothing waits for a worker that is
    not ready, and the pool is not marked broken."""
    from kiln.inductor.triton._compile_pool import Claims, CompilePool, Job, _Worker, finish

    starting = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)  # (never says it is ready)
    pool = CompilePool(1)
    pool.workers = [_Worker(starting)]
    try:
        claims = Claims([Job("path", "module", "kernel", "{}", ["cuda", 90, 32], i) for i in range(3)])
        drains = pool.serve(claims)
        start = time.perf_counter()
        assert [claims.take(i) for i in (2, 1, 0)] == [None, None, None]
        assert time.perf_counter() - start < 0.5
        assert [j.owner for j in claims.jobs] == ["thread"] * 3
        for t in drains:  # a worker's thread ends once nothing is left to take
            t.join(timeout=60)
            assert not t.is_alive()
        assert finish(claims) == (0, 0) and pool.broken is None
        assert len(pool.workers) == 1 and not starting.stdin.closed  # not started again, not closed
    finally:
        pool.close()


def test_twin_launches_are_one_job_compiled_once():
    """Two launches of one kernel with one specialization (twins) are one job: the thread that
    takes it under either index compiles it, the other waits until that thread is
    ``finished``; a worker that takes it serves both."""
    from kiln.inductor.triton._compile_pool import Claims, Job

    def claims():
        return Claims([Job("path", "module", "kernel0", "{}", ["cuda", 90, 32], 0),
                       Job("path", "module", "kernel1", "{}", ["cuda", 90, 32], 2)], aliases={1: 0})

    by_threads = claims()
    assert by_threads.take(1) is None  # the twin's thread compiles it
    waits = by_threads.take(0)  # the other waits for it
    assert waits is by_threads.jobs[0] and not waits.done.is_set()
    by_threads.finished(1)  # (the thread that compiled it)
    assert waits.done.is_set()
    assert by_threads.take(2) is None and [j.owner for j in by_threads.jobs] == ["thread", "thread"]

    by_workers = claims()
    assert [by_workers.for_worker().index, by_workers.for_worker().index, by_workers.for_worker()] == [0, 2, None]
    assert by_workers.take(1) is by_workers.take(0) is by_workers.jobs[0]


def test_a_worker_takes_each_launch_as_soon_as_it_is_captured():
    """Claims still being filled (the launches captured one by one): a worker waiting for
    work gets each job as it is added, and nothing more once they are closed."""
    from kiln.inductor.triton._compile_pool import Claims, Job

    claims = Claims(closed=False)
    got = []
    worker = threading.Thread(target=lambda: got.extend(iter(claims.for_worker, None)))
    worker.start()
    first = Job("path", "module", "kernel0", "{}", ["cuda", 90, 32], 0)
    claims.add(first)
    deadline = time.monotonic() + 60
    while first.owner is None:  # taken before the next is added
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert claims.open() and worker.is_alive()
    second = Job("path", "module", "kernel1", "{}", ["cuda", 90, 32], 1)
    claims.add(second)
    claims.add(second, 2)  # its twin
    claims.close()
    worker.join(timeout=60)
    assert not worker.is_alive() and got == [first, second] and not claims.open()
    assert claims.take(2) is second


def test_a_worker_ready_during_a_graph_takes_the_launches_the_threads_have_not(tmp_path, monkeypatch):
    """A worker that becomes ready while a graph's launches are being compiled takes those the
    threads have not taken (from the front; the threads take them from the back), compiles
    them into triton's cache, and a thread coming to one of them gets the worker's job to wait
    for. A pool whose workers fail every launch of a graph they took is marked broken."""
    pytest.importorskip("triton.backends.nvidia")
    from kiln.inductor.triton._compile_pool import Claims, CompilePool, finish

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    pool = CompilePool(1)
    try:
        pool.start(["cuda", 90, 32])
        claims = Claims(_jobs(tmp_path, "kiln_claims_ready", 3))
        assert claims.take(2) is None  # a thread's, before the worker is ready
        for t in pool.serve(claims):
            t.join(timeout=120)
        assert pool.ready()
        assert [j.owner for j in claims.jobs] == ["worker", "worker", "thread"]
        assert all(j.done.is_set() and j.error is None and j.seconds > 0 for j in claims.jobs[:2])
        assert claims.take(0) is claims.jobs[0] and claims.take(2) is claims.jobs[2]  # (to wait for)
        assert len(list((tmp_path / "cache").rglob("*.cubin"))) == 1  # (one kernel, one specialization)
        assert finish(claims) == (2, 0) and pool.broken is None

        bad = Claims(_jobs(tmp_path, "kiln_claims_bad", 2, kernel="no_such_kernel"))
        for t in pool.serve(bad):
            t.join(timeout=120)
        assert [j.owner for j in bad.jobs] == ["worker", "worker"]
        assert all("no_such_kernel" in j.error for j in bad.jobs)
        assert finish(bad) == (0, 2) and "no_such_kernel" in pool.broken
    finally:
        pool.close()


def test_a_worker_whose_first_line_is_not_ready_is_never_used():
    from kiln.inductor.triton._compile_pool import CompilePool, Job, _Worker

    process = subprocess.Popen([sys.executable, "-c", "print('hello'); import sys; sys.stdin.read()"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    worker = _Worker(process)
    assert process.wait(timeout=60) != 0  # killed
    assert not worker.ready.is_set()
    pool = CompilePool(1)
    pool.workers, pool.size = [worker], 0  # (compile starts no other)
    job = Job("path", "module", "kernel", "{}", ["cuda", 90, 32])
    pool.compile([job])
    assert job.error == "no compile worker left"


def test_a_worker_started_for_a_target_has_done_its_first_compile_before_its_first_job(tmp_path, monkeypatch):
    """A pool started with a GPU target warms each worker up (a first compile into a throwaway
    cache, removed): its first job then costs a kernel's compile, not triton's first-compile
    setup as a worker started without one pays."""
    pytest.importorskip("triton.backends.nvidia")
    from kiln.inductor.triton._compile_pool import CompilePool, Job
    from kiln.inductor.triton._runtime import HEADER

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # where the worker's throwaway cache goes
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    path = tmp_path / "kiln_triton_warm_test.py"
    path.write_text(HEADER + _KERNEL)
    spec, target = _spec_for_hopper()[:2]
    seconds = {}
    for warm in (False, True):
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / f"cache-{warm}"))
        pool = CompilePool(1)
        try:
            pool.start([target.backend, target.arch, 32] if warm else None)
            job = Job(str(path), "kiln_triton_warm_test", "kernel0", spec, [target.backend, target.arch, 32])
            pool.compile([job])
        finally:
            pool.close()
        assert job.error is None
        assert len(list((tmp_path / f"cache-{warm}").rglob("*.cubin"))) == 1  # the job's binary only
        seconds[warm] = job.seconds
    assert seconds[True] < seconds[False] / 2, seconds
    assert list(scratch.iterdir()) == []  # the throwaway cache removed
