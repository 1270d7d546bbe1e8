"""Worker processes that compile a graph's Triton kernels in parallel (``_compile_worker``).

Threads compile little in parallel: triton's front end (the kernel's Python AST to its IR)
and parts of its passes hold the GIL. So ``precompile`` first asks triton, in this process,
what each kernel's first launch would compile, without compiling it: a ``warmup`` call with
triton's ``jit_cache_hook`` installed, which triton calls before a compile with the launch's
specialization data (JSON) and which skips the compile by returning True. Then worker
processes compile those launches into triton's disk cache, several at once; the in-process
warmup that follows finds each binary there and only loads it.

- The hook is installed for the capture only (and the previous one put back), answers only
  for the kernels being captured, on the capturing thread, and hands every other call to the
  hook it replaced: another thread's launch is never skipped.
- The workers are ``python -m kiln.inductor.triton._compile_worker`` subprocesses in their own
  session (a Ctrl-C at the terminal is the parent's), started when a graph on a CUDA device
  is first compiled (after a whole-graph cache miss, before aotgrad traces it), with this process's ``sys.path`` as their
  ``PYTHONPATH``; they import triton and kiln's small Triton runtime, never torch, and each
  compiles a first kernel for the device's target into a throwaway cache, so that triton's
  setup of a process's first compile is done before their first job, then says it is ready.
  A graph's kernels go to the workers that are ready; where none is yet (a process's first
  graph, compiled before its workers have started: about a second on a GPU machine), they
  compile in this process's threads without waiting, so the workers never make a compile
  slower than the threads would. One that fails or dies only costs its kernels a compile in this
  process; a pool whose first job fails is not used again (logged once).
- This process's triton environment (``TRITON_*``: its cache directory above all) goes with
  every request, so a worker compiles with the settings the launch will use.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CompilePool", "Job", "capture_specs", "pool"]

_log = logging.getLogger("kiln")


@dataclass(slots=True)
class Job:
    """One launch to compile: the generated module's file and name, the kernel, triton's
    specialization data of the launch, the GPU target ``[backend, arch, warp_size]``."""

    path: str
    module: str
    kernel: str
    spec: str
    target: list[Any]
    error: str | None = None
    seconds: float = 0.0


def _triton_env() -> dict[str, str]:
    """This process's triton settings, its cache directory resolved."""
    env = {k: v for k, v in os.environ.items() if k.startswith("TRITON")}
    try:
        import triton

        env["TRITON_CACHE_DIR"] = str(triton.knobs.cache.dir)
    except Exception:  # a triton without knobs: the variable, or triton's default
        pass
    return env


@dataclass
class _Worker:
    process: subprocess.Popen
    lock: threading.Lock = field(default_factory=threading.Lock)
    ready: threading.Event = field(default_factory=threading.Event)  # its first line read: warmed up

    def __post_init__(self) -> None:
        threading.Thread(target=self._read_ready, daemon=True, name="kiln-compile-worker-ready").start()

    def _read_ready(self) -> None:
        """Wait for the worker's first line (it has imported triton and warmed up); a worker
        that ends or says anything else first is killed, never used."""
        line = self.process.stdout.readline()
        try:
            ready = json.loads(line).get("ready") is True
        except (ValueError, AttributeError):
            ready = False
        if ready:
            self.ready.set()
        else:
            self.process.kill()

    def run(self, job: Job, env: dict[str, str]) -> None:
        request = {"path": job.path, "module": job.module, "kernel": job.kernel, "spec": job.spec,
                   "target": job.target, "env": env}
        with self.lock:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the compile worker ended (exit status {self.process.poll()})")
        try:
            answer = json.loads(line)
        except ValueError:
            self.process.kill()  # out of step with its answers: not used again
            raise RuntimeError(f"the compile worker answered {line[:200]!r}") from None
        if not answer["ok"]:
            job.error = answer["error"]
            _log.debug("kiln.inductor: a compile worker failed on %s: %s", job.kernel, answer.get("traceback"))
        job.seconds = answer.get("seconds", 0.0)


class CompilePool:
    """``size`` worker processes, started on first use."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.workers: list[_Worker] = []
        self.broken: str | None = None  # why the pool is not used (None: it is)
        self.target: list[Any] | None = None  # what a new worker compiles its first kernel for
        self._lock = threading.Lock()

    def _start(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        warm = [] if self.target is None else [json.dumps(self.target)]
        while len(self.workers) < self.size:
            process = subprocess.Popen(
                [sys.executable, "-m", "kiln.inductor.triton._compile_worker", *warm], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True)
            self.workers.append(_Worker(process))

    def start(self, target: list[Any] | None = None) -> None:
        """Start the workers: they import triton and, given the GPU ``target``
        (``[backend, arch, warp_size]``), compile a first kernel for it (triton's setup of its
        first compile in a process, about 0.45 s, paid before the first job), while the
        caller goes on."""
        with self._lock:
            if target is not None and self.target is None:
                self.target = list(target)
            if self.broken is None:
                self._start()

    def ready(self) -> bool:
        """Whether a worker has warmed up (started, not yet ready: False)."""
        return any(w.ready.is_set() for w in self._alive())

    def _alive(self) -> list[_Worker]:
        return [w for w in self.workers if w.process.poll() is None]

    def _ready_workers(self) -> list[_Worker]:
        """The workers that have warmed up, after waiting for a first one where none has (none
        where every worker has ended)."""
        while True:
            alive = self._alive()
            ready = [w for w in alive if w.ready.is_set()]
            if ready or not alive:
                return ready
            alive[0].ready.wait(0.01)

    def compile(self, jobs: Sequence[Job]) -> None:
        """Compile ``jobs`` across the workers that have warmed up (waiting for a first one
        where none has); each failed job keeps its ``error``."""
        if not jobs:
            return
        with self._lock:
            self.workers = self._alive()
            self._start()
        workers = self._ready_workers()
        env = _triton_env()
        todo: queue.SimpleQueue[Job] = queue.SimpleQueue()
        for job in jobs:
            todo.put(job)

        def drain(worker: _Worker) -> None:
            while True:
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    worker.run(job, env)
                except Exception as error:  # the worker is gone: this job is compiled in this process
                    job.error = f"{type(error).__name__}: {error}"
                    return

        threads = [threading.Thread(target=drain, args=(w,), daemon=True) for w in workers[:len(jobs)]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        while not todo.empty():  # every worker died: the rest compile in this process
            todo.get_nowait().error = "no compile worker left"

    def close(self) -> None:
        for w in self.workers:
            try:
                w.process.stdin.close()
                w.process.wait(timeout=5)
            except Exception:
                w.process.kill()
        self.workers = []


_pool: CompilePool | None = None
_pool_lock = threading.Lock()


def pool(size: int) -> CompilePool:
    """This process's pool (one; its size the first caller's)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = CompilePool(size)
            atexit.register(_pool.close)
        return _pool


def capture_specs(calls: Sequence[tuple[Any, Callable[[], Any]]]) -> list[tuple[Any, str, list[Any]]]:
    """Run each ``(function, warmup call)`` with triton's ``jit_cache_hook`` answering for
    ``function``: what it would compile (``(function, specialization data, target)``), not
    compiled. Functions already compiled for those arguments give nothing."""
    import triton
    from triton.runtime import driver

    runtime = triton.knobs.runtime
    previous = runtime.jit_cache_hook
    t = driver.active.get_current_target()  # (the caller's device: every call's)
    target = [t.backend, t.arch, t.warp_size]
    thread = threading.get_ident()
    current: list[Any] = [None]
    found: list[tuple[Any, str, list[Any]]] = []

    def hook(*args: Any, **kwargs: Any) -> Any:
        info = kwargs.get("fn")
        mine = threading.get_ident() == thread and getattr(info, "jit_function", None) is current[0]
        if not mine:
            return previous(*args, **kwargs) if previous is not None else None
        spec = (kwargs.get("compile") or {}).get("specialization_data")
        if spec is None:
            return None  # a triton without it: compiled here
        found.append((current[0], spec, target))
        return True

    runtime.jit_cache_hook = hook
    try:
        for fn, call in calls:
            current[0] = fn
            call()
    finally:
        runtime.jit_cache_hook = previous
    return found


def compile_in_workers(calls: Sequence[tuple[Any, Callable[[], Any]]], size: int) -> tuple[int, int]:
    """The launches of ``calls`` (see ``capture_specs``) compiled in the pool's workers into
    triton's disk cache; (launches compiled there, launches that failed). Nothing is raised:
    what fails here is compiled by the launch itself."""
    the_pool = pool(size)
    if the_pool.broken is not None:
        return 0, 0
    if not the_pool.ready():  # still starting (or not started): the threads compile these, no waiting
        the_pool.start()
        return 0, 0
    start = time.perf_counter()
    jobs = []
    for fn, spec, target in capture_specs(calls):
        module = sys.modules.get(fn.fn.__module__)
        path = getattr(module, "__file__", None)
        if path is None:
            continue
        jobs.append(Job(path, fn.fn.__module__, fn.fn.__name__, spec, target))
    the_pool.compile(jobs)
    failed = [j for j in jobs if j.error is not None]
    if jobs and len(failed) == len(jobs):
        the_pool.broken = failed[0].error
        _log.warning("kiln.inductor: the Triton compile workers failed (%s); kernels compile in this process",
                     failed[0].error)
    _log.debug("kiln.inductor: %d Triton kernels compiled in workers in %.2f s (%d failed)", len(jobs),
               time.perf_counter() - start, len(failed))
    return len(jobs) - len(failed), len(failed)
