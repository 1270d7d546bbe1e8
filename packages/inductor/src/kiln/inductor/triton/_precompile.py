"""A graph's Triton kernels compiled before its first call, several at once.

Triton compiles a kernel when it is first launched, so a new graph's first call would compile
its kernels one after another, each waiting for the last (a fraction of a second each on a
GPU machine: most of a cold compile). ``precompile`` compiles them all first, in a pool of
threads, through triton's ``warmup`` (which compiles for given arguments without launching):

- the arguments have the first call's specialization: a tensor parameter is given as its
  dtype (triton's stand-in tensor, whose address is aligned to 16 bytes, as the caching
  allocator's are), or as a one-element tensor at the input's offset where an input starts
  off that alignment (an input or ATen result at an offset); a size parameter is its value on the example inputs (triton
  specializes integers equal to 1 and multiples of 16); the seed is left unspecialized
  (``do_not_specialize``), so any int64 will do (a seed read from memory is an int64 tensor);
- where ``processes``, worker processes (``_compile_pool``: triton's front end and its LLVM
  linking hold the GIL, so threads overlap about half of a compile: 8 kernels for an H100 on
  a 2-core CPU took 0.54 s one after another, 0.40 s in 2 threads) take the kernels from the
  front of the list as each worker is ready, into triton's disk cache, while this process's
  threads take them from the back and compile them themselves; a thread that comes to a
  kernel a worker has taken waits for it and then loads its binary from the cache. Without
  the workers the threads run the warmups at once where triton lets them: with
  ``AsyncCompileMode`` (triton's compile of a warmed-up kernel goes to the pool; the next
  warmup starts at once), else a thread per ``warmup`` call. (The workers were first tried
  without warming them up, commit 5b3fa0b, and measured slower on an H100: each fresh worker
  paid triton's first compile, about 0.45 s, on its first kernel. They now pay it when they
  start.)
- each compiled kernel is loaded in the same threads as soon as its compile is done, not at
  its first launch (``_Loader``): for torch's static CUDA launcher where it takes the kernel
  (``_static_launch``), else with triton's launcher, which triton 3.6 builds per argument
  signature with the C compiler;
- a kernel whose compile fails here is compiled again at its launch, which raises triton's
  error where the user sees it; a wrong specialization costs a second compile, never a wrong
  answer (triton keys its compiled kernels by the arguments' specialization).

Only for CUDA tensors: under triton's interpreter nothing is compiled.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from .._ir import SEED, SEED_PTR
from ._compile_pool import Claims, compile_in_workers, finish, pool
from ._static_launch import as_static, declared_of

__all__ = ["compile_in_parallel", "precompile", "start_workers", "warmup_args"]

_log = logging.getLogger("kiln")

_STAND_IN_SEED = 2**62 + 12345  # an int64, as at run time


def compile_in_parallel(calls: Sequence[Callable[[], Any]], workers: int, device: int | None,
                        claims: Claims | None = None) -> list[Any]:
    """Run ``calls`` (triton ``warmup`` calls for CUDA device ``device``; None: the current
    one) so that their compiles overlap: through triton's ``AsyncCompileMode`` where it has
    one and none is active, else each call in a thread; and load what they compiled
    (``_Loader``), each kernel as soon as its compile is done. With ``claims`` (the launches
    the compile workers take, ``_compile_pool``) each call in a thread, from the last: one
    that a worker has taken waits for it, then loads its binary from triton's cache. Errors
    are dropped: the launch compiles again and reports them. Returns what each call compiled
    and loaded, in order (None where it failed, or its kernel did not load)."""
    import triton

    def call(fn: Callable[[], Any]) -> Any:
        device_context = torch.cuda.device(device) if device is not None else contextlib.nullcontext()
        with contextlib.suppress(Exception), device_context:  # (a pool thread's device is its own)
            return fn()
        return None

    workers = max(1, min(workers, len(calls)))
    mode = getattr(triton, "AsyncCompileMode", None)
    active = getattr(getattr(getattr(triton, "runtime", None), "_async_compile", None), "active_mode", None)
    if claims is not None or (active is not None and active.get() is not None):
        mode = None
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kiln-triton-compile") as pool:
        loader = _Loader(pool, call, device)
        if mode is None:
            def compile_and_load(index: int, fn: Callable[[], Any]) -> Any:
                job = claims.take(index) if claims is not None else None
                if job is not None:  # a worker's (its binary then read from the cache) or a twin's
                    job.done.wait()
                try:
                    result = call(fn)
                finally:
                    if claims is not None:
                        claims.finished(index)
                loader.submit(_compiled(result))
                return result

            futures = {i: pool.submit(compile_and_load, i, fn) for i, fn in reversed(list(enumerate(calls)))}
            results = [futures[i].result() for i in range(len(calls))]
        else:
            try:
                context = mode(pool, ignore_errors=True)
            except TypeError:  # a triton without ignore_errors
                context = mode(pool)
            results = []
            with contextlib.suppress(Exception), context:  # a failed compile: reported at its launch
                for fn in calls:
                    results.append(call(fn))
                    future = _compile_future(results[-1])
                    if future is not None:
                        future.add_done_callback(loader.compiled)
        kernels = [_compiled(r) for r in results]
        loader.finish(kernels)
    kernels += [None] * (len(calls) - len(kernels))  # (calls left after a failure under the mode)
    kernels = [loader.static.get(id(k), k) for k in kernels]
    return [k if getattr(k, "function", None) is not None else None for k in kernels]


def _compile_future(result: Any) -> Future | None:
    """The compile's own future of what a ``warmup`` call returned under ``AsyncCompileMode``
    (a ``FutureKernel``), else None."""
    if type(result).__name__ != "FutureKernel":
        return None
    future = result.__dict__.get("future")
    return future if isinstance(future, Future) else None


def _compiled(result: Any) -> Any:
    """The compiled kernel a ``warmup`` call gave: itself, or, for the future it returned
    under ``AsyncCompileMode`` (once the mode has exited), its kernel (None if its compile
    failed). The mode's exit finishes each future (triton 3.6 and 3.9: the kernel is then its
    ``kernel`` attribute), unless a failed compile raised there first (a triton without
    ``ignore_errors``): the futures left are finished here (their kernel entered in the JIT's
    cache)."""
    if type(result).__name__ == "FutureKernel":
        kernel = result.__dict__.get("kernel")  # (not __getattr__, which would raise a failure again)
        if kernel is None and result.__dict__.get("future") is not None:
            with contextlib.suppress(Exception):  # a failed compile: reported at its launch
                kernel = type(result).result(result)
        return kernel
    return result


class _Loader:
    """Loads compiled kernels onto the device in the compile threads, as their first launches
    would one after another. Where torch's static CUDA launcher takes a kernel
    (``_static_launch``) it is loaded for it (a ``StaticKernel``, in ``static`` by the
    compiled kernel's id); else through triton, which (3.6) builds each launch signature's
    launcher module with the C compiler there (about 0.2 s each, 10 for a transformer block's
    training step, 2.0 of its 4.1 s cold start on an H100, measured with ``restart_bench.py
    --profile``). Each kernel is loaded once; kernels of one signature one at a time (the
    first builds the launcher, the others find it built). ``finish`` loads the rest and waits
    for all; a compile that ends after it (its callback late) leaves its kernel to load at its
    launch."""

    def __init__(self, pool: ThreadPoolExecutor, call: Callable[[Callable[[], Any]], Any], device: int | None) -> None:
        self.pool, self.call, self.device = pool, call, device
        self.lock = threading.Lock()
        self.signatures: dict[str, threading.Lock] = {}
        self.taken: dict[int, Any] = {}  # by id: the kernels submitted (kept alive)
        self.static: dict[int, Any] = {}  # by the compiled kernel's id: its StaticKernel
        self.futures: list[Future] = []
        self.closed = False

    def compiled(self, future: Future) -> None:
        """A compile's done callback: its kernel loaded next."""
        if not future.cancelled() and future.exception() is None:
            self.submit(future.result())

    def submit(self, kernel: Any) -> None:
        if kernel is None or not callable(getattr(kernel, "_init_handles", None)) \
                or getattr(kernel, "function", None) is not None:
            return
        src = getattr(kernel, "src", None)
        key = repr((getattr(src, "signature", None), getattr(src, "constants", None)))
        with self.lock:
            if self.closed or id(kernel) in self.taken:
                return
            self.taken[id(kernel)] = kernel
            signature = self.signatures.setdefault(key, threading.Lock())
            self.futures.append(self.pool.submit(self.call, lambda: self._load(kernel, signature)))

    def _load(self, kernel: Any, signature: threading.Lock) -> None:
        static = as_static(kernel, self.device, declared_of(getattr(kernel.src, "fn", None)))
        if static is not None:
            with self.lock:
                self.static[id(kernel)] = static
            return
        with signature:
            kernel._init_handles()

    def finish(self, kernels: list[Any]) -> None:
        for kernel in kernels:
            self.submit(kernel)
        with self.lock:
            self.closed = True
            futures = list(self.futures)
        for future in futures:
            future.result()


def warmup_args(launch: Any, buffers: dict[str, Any], hint: Callable[[Any], int], device: str) -> list[Any]:
    """The arguments of ``launch`` (a ``TritonKernel``) for its ``warmup``: see the module
    docstring."""
    args: list[Any] = []
    for p in launch.params:
        if p.name == SEED.name:
            args.append(_STAND_IN_SEED)
        elif p.name == SEED_PTR:  # the seed in memory: an int64 tensor the allocator aligned
            args.append(torch.int64)
        elif p.kind == "size":
            args.append(hint(p.name))
        else:
            buffer = buffers[p.name]
            offset = hint(getattr(buffer, "storage_offset", 0))  # an input's, or an ATen result's
            if offset * buffer.dtype.itemsize % 16:
                args.append(torch.empty(offset + 1, dtype=buffer.dtype, device=device)[offset:])
            else:
                args.append(buffer.dtype)
    return args


def precompile(launches: dict[str, Any], functions: dict[str, Any], devices: dict[str, str],
               buffers: dict[str, Any], hint: Callable[[Any], int], workers: int | None = None,
               processes: bool = False) -> tuple[float, dict[str, tuple[tuple, Any]]]:
    """Compile the Triton kernels ``launches`` (by name; ``functions``: their loaded triton
    functions; ``devices``: each one's device) for their first call, in parallel: in worker
    processes (``_compile_pool``) where ``processes``, then in this process's threads (which
    load what the workers compiled and compile what they did not); the seconds it took, and by
    name the ``Launch`` key of the first call's arguments and the kernel compiled and loaded
    for them (``_static.key_of_warmup``). A kernel whose arguments cannot be made here (a size
    with no example value) is left to compile at its launch."""
    from ._static import key_of_warmup

    start = time.perf_counter()
    by_device: dict[int, list[tuple[Any, Callable[[], Any]]]] = {}  # (triton function, its warmup)
    keys: dict[int, list[tuple[str, tuple | None]]] = {}
    for name, launch in launches.items():
        device = torch.device(devices[name])
        if device.type != "cuda":
            continue
        index = device.index if device.index is not None else torch.cuda.current_device()
        try:
            xnumel = hint(launch.xnumel)
            if xnumel <= 0:  # never launched
                continue
            args = warmup_args(launch, buffers, hint, str(device))
        except Exception:  # compiled at its launch instead
            _log.debug("kiln.inductor: %s is compiled at its first launch", name, exc_info=True)
            continue
        grid = (max(1, hint(launch.programs)),)
        fn, meta = functions[name], launch.launch_meta()
        by_device.setdefault(index, []).append((fn, lambda fn=fn, args=args, grid=grid, meta=meta:
                                                fn.warmup(*args, grid=grid, **meta)))
        keys.setdefault(index, []).append((name, key_of_warmup(index, launch_kinds(launch), args)))
    compiled: dict[str, tuple[tuple, Any]] = {}
    size = _size(workers)
    for index, calls in by_device.items():
        claims = None
        if processes:
            try:
                with torch.cuda.device(index):
                    claims = compile_in_workers(calls, size)
            except Exception:  # compiled by the threads instead
                _log.warning("kiln.inductor: compiling Triton kernels in worker processes failed", exc_info=True)
        kernels = compile_in_parallel([call for _, call in calls], size, index, claims)
        if claims is not None:
            finish(claims)
        for (name, key), kernel in zip(keys[index], kernels, strict=True):
            if key is not None and kernel is not None:
                compiled[name] = (key, kernel)
    return time.perf_counter() - start, compiled


def start_workers(workers: int | None, device: int) -> None:
    """Start the compile workers ahead of a compile that will need them, for CUDA device
    ``device``'s target: they import triton and compile a first kernel while this process
    lowers the graph."""
    from triton.runtime import driver

    with torch.cuda.device(device):
        t = driver.active.get_current_target()
    pool(_size(workers)).start([t.backend, t.arch, t.warp_size])


def _size(workers: int | None) -> int:
    """Threads or processes compiling at once: ``workers``, else one per CPU up to 8 (a
    process running several kiln programs, such as a test run, starts no more than that)."""
    return max(1, workers or min(8, os.cpu_count() or 1))


def launch_kinds(launch: Any) -> list[str]:
    """The argument kinds of ``launch`` (a ``TritonKernel``) as its ``Launch`` takes them:
    "seed" (the random seed, an integer triton does not specialize), "int" (a size) or
    "tensor"."""
    return ["seed" if p.name == SEED.name else "int" if p.kind == "size" else "tensor" for p in launch.params]
