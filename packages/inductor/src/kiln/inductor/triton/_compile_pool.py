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
- A graph's launches are ``Claims``: each is compiled by whoever takes it first, a worker
  (from the front of the graph's list, one at a time, each as soon as it is ready) or a
  compile thread of this process (from the back, ``precompile``), which compiles it itself;
  a thread that comes to a launch a worker has taken waits for that worker, then loads its
  binary. So nothing waits for a worker that is still starting (a process's first graph is
  compiled before its workers are ready: about a second on a GPU machine), a worker that
  becomes ready during a graph's compile takes the launches left, and the workers can only
  take work off the threads. (Before, a graph went to the workers ready at its start, all
  of its launches: on an H100 a GPT-2's 9 kernels waited for the few workers that were ready,
  1.13 s against 0.90 s in the threads alone, 2026-12-08.) A worker that fails or dies only
  costs its launch a compile in this process; a pool whose workers fail every launch of a
  graph is not used again (logged once).
- This process's triton environment (``TRITON_*``: its cache directory above all) goes with
  every request, so a worker compiles with the settings the launch will use.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Claims", "CompilePool", "Job", "capture_specs", "compile_in_workers", "finish", "pool"]

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
    index: int = 0  # its launch's place in the graph's list
    error: str | None = None
    seconds: float = 0.0
    owner: str | None = None  # who took it: "worker" or "thread" (None: nobody yet)
    done: threading.Event = field(default_factory=threading.Event)  # a worker has finished it


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


class Claims:
    """A graph's launches to compile (``Job``s, in the graph's order), each by whoever takes it
    first: a worker from the front (``for_worker``), or a thread of this process about to
    compile the launch itself (``take``, then ``finished``). Launches of one kernel with one
    specialization (a kernel's twins, ``_twins``) are one job, under each of their indices.
    Claims made ``open`` get their jobs one at a time (``add``, as the launches are captured:
    the workers start on the first while the rest are) until ``close``."""

    def __init__(self, jobs: Sequence[Job] = (), aliases: dict[int, int] | None = None, *,
                 closed: bool = True) -> None:
        self.jobs: list[Job] = []
        self._by_index: dict[int, Job] = {}
        self._changed = threading.Condition()
        self.closed = False
        self.start = time.perf_counter()
        self.pool: CompilePool | None = None  # the pool serving them
        for job in jobs:
            self.add(job)
        for index, same in (aliases or {}).items():  # index: the index of the job it shares
            self.add(self._by_index[same], index)
        if closed:
            self.close()

    def add(self, job: Job, index: int | None = None) -> None:
        """Add ``job`` (under its own index; given ``index``, a twin's launch: the same job,
        already added, under that index too)."""
        with self._changed:
            if index is None:
                self.jobs.append(job)
                index = job.index
            self._by_index[index] = job
            self._changed.notify_all()

    def close(self) -> None:
        """No job is added after this."""
        with self._changed:
            self.closed = True
            self._changed.notify_all()

    def for_worker(self) -> Job | None:
        """The first launch nobody has taken, now the caller worker's, waiting for one while
        jobs are still added (None: none left)."""
        with self._changed:
            while True:
                for job in self.jobs:
                    if job.owner is None:
                        job.owner = "worker"
                        return job
                if self.closed:
                    return None
                self._changed.wait()

    def take(self, index: int) -> Job | None:
        """For a thread about to compile launch ``index``: None where the thread is to compile
        it (nobody had taken it, or it is not among the claims; the thread then calls
        ``finished``), else the job whose ``done`` the thread waits for before it loads the
        binary (or compiles it, where that failed): a worker's, or another thread's (a twin)."""
        with self._changed:
            job = self._by_index.get(index)
            if job is None:
                return None
            if job.owner is None:
                job.owner = "thread"
                return None
            return job

    def finished(self, index: int) -> None:
        """A thread is done with launch ``index``: it compiled it (or failed to), or it waited
        for whoever did, so its job is done either way."""
        with self._changed:
            job = self._by_index.get(index)
        if job is not None:
            job.done.set()

    def open(self) -> bool:
        """Whether a launch is left to take, or may still be added."""
        with self._changed:
            return not self.closed or any(job.owner is None for job in self.jobs)

    def untaken(self) -> list[Job]:
        with self._changed:
            return [job for job in self.jobs if job.owner is None]


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

    def serve(self, claims: Claims) -> list[threading.Thread]:
        """Start a thread per live worker (starting workers up to the pool's size) that, once
        its worker is ready, compiles ``claims``' launches one at a time until none is left to
        take; the threads, which end by themselves."""
        with self._lock:
            self.workers = self._alive()
            self._start()
            workers = list(self.workers)
        claims.pool = self
        env = _triton_env()
        threads = [threading.Thread(target=self._drain, args=(w, claims, env), daemon=True,
                                    name="kiln-compile-worker-jobs") for w in workers]
        for t in threads:
            t.start()
        return threads

    @staticmethod
    def _drain(worker: _Worker, claims: Claims, env: dict[str, str]) -> None:
        while not worker.ready.wait(0.005):  # still starting: nothing taken, nothing waits for it
            if worker.process.poll() is not None or not claims.open():
                return
        while (job := claims.for_worker()) is not None:
            try:
                worker.run(job, env)
            except Exception as error:  # the worker is gone: this job is compiled in this process
                job.error = f"{type(error).__name__}: {error}"
                return
            finally:
                job.done.set()

    def compile(self, jobs: Sequence[Job]) -> None:
        """Compile ``jobs`` in the workers alone, each as soon as a worker is ready for it,
        and wait for them; each failed job keeps its ``error``."""
        claims = Claims(jobs)
        for t in self.serve(claims):
            t.join()
        for job in claims.untaken():  # every worker died
            job.error = "no compile worker left"

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


def capture_specs(calls: Sequence[tuple[Any, Callable[[], Any]]],
                  found_one: Callable[[int, Any, str, list[Any]], None]) -> None:
    """Run each ``(function, warmup call)`` with triton's ``jit_cache_hook`` answering for
    ``function``: what it would compile is given to ``found_one`` as soon as it is found (its
    index in calls, the function, triton's specialization data, the target), not compiled.
    Functions already compiled for those arguments give nothing."""
    import triton
    from triton.runtime import driver

    runtime = triton.knobs.runtime
    previous = runtime.jit_cache_hook
    t = driver.active.get_current_target()  # (the caller's device: every call's)
    target = [t.backend, t.arch, t.warp_size]
    thread = threading.get_ident()
    current: list[Any] = [None, -1]  # the function, its index

    def hook(*args: Any, **kwargs: Any) -> Any:
        info = kwargs.get("fn")
        mine = threading.get_ident() == thread and getattr(info, "jit_function", None) is current[0]
        if not mine:
            return previous(*args, **kwargs) if previous is not None else None
        spec = (kwargs.get("compile") or {}).get("specialization_data")
        if spec is None:
            return None  # a triton without it: compiled here
        found_one(current[1], current[0], spec, target)
        return True

    runtime.jit_cache_hook = hook
    try:
        for index, (fn, call) in enumerate(calls):
            current[:] = fn, index
            call()
    finally:
        runtime.jit_cache_hook = previous


def compile_in_workers(calls: Sequence[tuple[Any, Callable[[], Any]]], size: int) -> Claims | None:
    """The launches of ``calls`` (see ``capture_specs``) as ``Claims`` that the pool's workers
    start taking (into triton's disk cache) as soon as each is ready, in the background; the
    caller's threads take the rest (``Claims.take``) and then ``finish`` them. None where the
    pool is not used (broken, or no launch to compile). Nothing is raised: what fails here is
    compiled by the launch itself."""
    the_pool = pool(size)
    if the_pool.broken is not None:
        return None
    claims = Claims(closed=False)
    the_pool.serve(claims)  # (the workers take each launch as soon as it is captured)
    jobs: dict[tuple[int, str], Job] = {}

    def found_one(index: int, fn: Any, spec: str, target: list[Any]) -> None:
        module = sys.modules.get(fn.fn.__module__)
        path = getattr(module, "__file__", None)
        if path is None:
            return
        same = jobs.get((id(fn), spec))
        if same is not None:  # a twin's launch: the same compile
            claims.add(same, index)
        else:
            jobs[id(fn), spec] = Job(path, fn.fn.__module__, fn.fn.__name__, spec, target, index)
            claims.add(jobs[id(fn), spec])

    try:
        capture_specs(calls, found_one)
    finally:
        claims.close()
    return claims if jobs else None


def finish(claims: Claims) -> tuple[int, int]:
    """After the caller's threads have taken or waited for every launch of ``claims``: (the
    launches the workers compiled, those they failed), logged. A pool whose workers failed
    every launch they took is not used again."""
    by_workers = [job for job in claims.jobs if job.owner == "worker"]
    failed = [job for job in by_workers if job.error is not None]
    if failed and len(failed) == len(by_workers) and claims.pool is not None:
        claims.pool.broken = failed[0].error
        _log.warning("kiln.inductor: the Triton compile workers failed (%s); kernels compile in this process",
                     failed[0].error)
    _log.debug("kiln.inductor: %d of %d Triton kernels compiled in workers (%d failed), in %.2f s", len(by_workers),
               len(claims.jobs), len(failed), time.perf_counter() - claims.start)
    return len(by_workers) - len(failed), len(failed)
