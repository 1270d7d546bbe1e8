"""max-autotune for Triton kernels (``InductorConfig.max_autotune``): each kernel's launch
configuration measured among candidates at compile time, the fastest kept, the choice kept
on disk.

**Candidates** (``candidates``): the sizes' heuristic (``_kernel._flat_launch``,
``_rows_launch``, ``_columns_launch``) first, then, by the kernel's shape: *flat*,
``XBLOCK`` 256 to 4096 with two warp counts each; *rows read across* (``TritonKernel.columns``),
16 to 128 rows per program with 4 and 8 warps, a persistent one's ``RBLOCK`` fixed, a looped
one's steps of 16 to 128; *persistent rows*, ``RBLOCK`` fixed (a whole row) and ``XBLOCK`` (rows
per program) around the heuristic's with half, the same and twice its warps; *looped rows*,
blocks of 512 to 4096 elements of up to 4 rows, each with 1 and 2 pipeline stages (the
only shape with a loop for ``num_stages`` to pipeline); *tiled* (a transpose), tiles of 16
to 256 rows by 16 to 256 columns with 4 or 8 warps. At most
``AutotunePolicy.max_candidates``; blocks never exceed the (hinted) sizes' next power of two.
A matrix product's template kernel (``_template``) has its own: tiles of rows, columns and
``K`` steps with warps and pipeline stages (``_template.template_candidates``), its programs
one per tile (``TritonKernel.programs_for``). The kernel's source is the same for all: only
the launch (``TritonKernel.meta``) changes.

**Measuring** (``tune``): on the real sizes (a symbolic size at its hint, the example's),
on scratch tensors (``torch.empty_strided``'s layouts on the kernel's device; an input's
scratch copy as large as its storage, at its offset: a kernel may read anywhere in it;
floats filled from a generator of their own, never torch's default one, integers zero), so
no kernel ever runs on the user's tensors: one that writes in place writes scratch memory.
On a GPU the candidates compile in parallel (a thread pool around triton's ``warmup``, which
compiles without launching), then each is timed with ``triton.testing.do_bench`` (median,
``AutotunePolicy.warmup_ms`` and ``rep_ms``); one that fails to compile or launch (too many
registers, too much shared memory) is dropped. Under ``TRITON_INTERPRET=1`` (CPU tensors,
where timing means nothing) each candidate runs once on the same scratch inputs and must
give the heuristic's results (a candidate that does not is dropped with a warning: a bug);
its "time" is a deterministic stand-in, its number of programs. The least time wins, ties
to the earlier candidate. A kernel that checks indices (a device-side assert: scratch
indices could fire it and end the CUDA context) keeps the heuristic.

**Disk cache**: ``<cache>/autotune/<key>.json`` (an ``EntryStore`` record: checked on every
read), the key a sha256 of the kernel's source (its name left out) and the module header's,
its shape, the hinted sizes and the layouts of its tensors, the candidates, the device (GPU
name and compute capability; "interpreter"), triton's version and this module's version. A
second process, or a second graph with the same kernel, runs nothing. A graph from the
whole-graph cache runs nothing either: its wrapper holds the chosen launches (and its key
holds ``max_autotune`` and the GPU, ``_graph_cache.cache_identity``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from .._entries import EntryStore
from .._ir import SEED, SEED_PTR, Buffer, InputBuffer
from ._kernel import TritonKernel, _next_pow2
from ._precompile import compile_in_parallel
from ._runtime import HEADER, interpreting
from ._template import template_candidates

__all__ = ["AutotunePolicy", "TuneResult", "candidates", "device_identity", "size_hint", "tune"]

_log = logging.getLogger("kiln.perf_hints")
_VERSION = 1  # bump when what a record means changes
_SCRATCH_SEED = 2**62 + 12345  # the seed argument of a random kernel while it is measured (an int64, as at run time)


@dataclass(frozen=True, slots=True)
class AutotunePolicy:
    max_candidates: int = field(default=12, metadata={
        "help": "the most launch configurations measured per kernel (the heuristic's among them)"})
    warmup_ms: float = field(default=5.0, metadata={
        "help": "triton.testing.do_bench's warmup per candidate, milliseconds (GPU)"})
    rep_ms: float = field(default=20.0, metadata={
        "help": "triton.testing.do_bench's measuring time per candidate, milliseconds (GPU)"})
    compile_workers: int = field(default=8, metadata={
        "help": "threads compiling one kernel's candidates at once (GPU)"})


@dataclass(slots=True)
class TuneResult:
    """What ``tune`` did for one kernel: the candidates, the time of each (milliseconds on a
    GPU, the stand-in under the interpreter; None: dropped), the choice, whether it came
    from the disk cache (nothing run), how many candidates ran, and the seconds it took."""

    kernel: str
    key: str
    candidates: list[dict[str, int]]
    timings: list[float | None]
    chosen: dict[str, int]
    cached: bool
    ran: int
    seconds: float


# ------------------------------------------------------------------------------ candidates
def _add(out: list[dict[str, int]], meta: dict[str, int]) -> None:
    if meta not in out:
        out.append(meta)


def _clip(warps: int, high: int = 32) -> int:
    return max(1, min(high, warps))


def candidates(launch: TritonKernel, xnumel: int, policy: AutotunePolicy | None = None) -> list[dict[str, int]]:
    """The launch configurations of ``launch`` worth measuring when its programs share
    ``xnumel`` (hinted) elements or rows: the heuristic's first (see the module docstring;
    a template's tiles are ``_template.template_candidates``)."""
    policy = policy or AutotunePolicy()
    out: list[dict[str, int]] = [dict(launch.meta)]
    cap = _next_pow2(max(xnumel, 1))
    if launch.shape == "flat":
        for block in (1024, 2048, 512, 4096, 256):
            block = min(block, cap)
            for warps in (block // 256, block // 128):
                _add(out, {"XBLOCK": block, "num_warps": _clip(warps, 16)})
    elif launch.shape == "tiled":
        # a transpose's tiles (``_kernel._tile_axis``): square, and long along either side
        cols = _next_pow2(int(launch.tiles[2]))  # a known size (``_tile_axis``)
        for x, r, warps in ((64, 64, 4), (32, 32, 4), (64, 64, 8), (128, 32, 4), (32, 128, 4), (128, 128, 8),
                            (16, 256, 4), (256, 16, 4)):
            if x <= max(cap, 16) and r <= max(cols, 16):
                _add(out, {"XBLOCK": x, "RBLOCK": r, "num_warps": warps})
    elif launch.columns:
        # reading along its rows (``_kernel._columns``): many rows per program, short steps
        rblock = launch.meta["RBLOCK"]
        blocks = [(x, rblock) for x in (64, 128, 32, 16)] if launch.shape == "persistent" else \
            [(64, 32), (64, 16), (128, 16), (32, 64), (64, 64), (16, 128)]
        for x, r in blocks:
            if x <= cap and x * r <= 16384:
                for warps in (4, 8):
                    _add(out, {"XBLOCK": x, "RBLOCK": r, "num_warps": warps})
    elif launch.shape == "persistent":
        rblock = launch.meta["RBLOCK"]
        base = launch.meta["XBLOCK"]
        rows = [base, base * 2, base // 2, base * 4, base // 4]
        for x in rows:
            if x < 1 or x > cap or (x > 1 and x * rblock > max(rblock, 16384)):
                continue
            warps = min(16, max(2, x * rblock // 1024))
            for w in (warps, warps * 2, warps // 2):
                _add(out, {"XBLOCK": x, "RBLOCK": rblock, "num_warps": _clip(w)})
    else:
        for x, rblock, warps in ((1, 2048, 8), (1, 1024, 4), (1, 4096, 8), (1, 4096, 16), (2, 1024, 8),
                                 (4, 512, 8)):
            if x > cap:
                continue
            for stages in (1, 2):
                _add(out, {"XBLOCK": x, "RBLOCK": rblock, "num_warps": warps, "num_stages": stages})
    return out[:policy.max_candidates]


# ------------------------------------------------------------------------------ sizes
def size_hint(env: Any) -> Callable[[Any], int]:
    """``hint(expr)``: a size expression's (or a size symbol's, by name) value on the example
    inputs (``env``: their ShapeEnv, None when every size is static)."""
    names = {s.name: s for s in env.symbols} if env is not None else {}

    def hint(expr: Any) -> int:
        if isinstance(expr, str):
            if expr not in names:
                raise ValueError(f"no example value for the size {expr}")
            expr = names[expr]
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return int(expr)
        if env is None:
            raise ValueError(f"no example value for the size {expr}")
        value = env.size_hint(expr, fallback=64)
        if value is None:
            raise ValueError(f"no example value for the size {expr}")
        return int(value)

    return hint


def device_identity(device: str) -> list[Any]:
    """What a kernel's timings depend on besides itself: the GPU's name and compute
    capability, or the interpreter (CPU tensors), and triton's version."""
    import triton

    if device.startswith("cuda"):
        index = torch.device(device).index
        index = torch.cuda.current_device() if index is None else index
        return [torch.cuda.get_device_name(index), list(torch.cuda.get_device_capability(index)), triton.__version__]
    return ["interpreter", triton.__version__]


# ------------------------------------------------------------------------------ scratch
def _extent(sizes: Sequence[int], strides: Sequence[int]) -> int:
    if any(s == 0 for s in sizes):
        return 0
    return 1 + sum((s - 1) * abs(st) for s, st in zip(sizes, strides, strict=True))


def _scratch(buffer: Buffer, hint: Callable[[Any], int], device: str) -> torch.Tensor:
    """A tensor of ``buffer``'s layout on ``device``, filled deterministically (floats from a
    generator of its own; integers and bools zero: a zero index is always in range)."""
    sizes = [hint(s) for s in buffer.sizes]
    strides = [hint(s) for s in buffer.strides()]
    offset, total = 0, _extent(sizes, strides)
    if isinstance(buffer, InputBuffer):
        offset = hint(buffer.storage_offset)
        total = max(total + offset, hint(buffer.storage_size) if buffer.storage_size is not None else 0)
    if buffer.dtype.is_floating_point:
        generator = torch.Generator(device=device).manual_seed(0)
        base = torch.randn(max(total, 1), generator=generator, device=device).to(buffer.dtype)
    else:
        base = torch.zeros(max(total, 1), dtype=buffer.dtype, device=device)
    return base.as_strided(sizes, strides, offset)


# ------------------------------------------------------------------------------ measuring
def _key(launch: TritonKernel, device: str, buffers: dict[str, Buffer], hint: Callable[[Any], int],
         cands: list[dict[str, int]]) -> str:
    """The disk cache key of ``launch``'s measurement (see the module docstring)."""
    code = re.sub(rf"\bdef {re.escape(launch.name)}\(", "def kernel(", launch.code, count=1)
    layouts: list[Any] = []
    for p in launch.params:
        if p.name in (SEED.name, SEED_PTR):
            layouts.append("seed" if p.name == SEED.name else "seed in memory")
        elif p.kind == "size":
            layouts.append(hint(p.name))
        else:
            b = buffers[p.name]
            layouts.append([str(b.dtype), [hint(x) for x in b.sizes], [hint(x) for x in b.strides()]])
    parts = [_VERSION, hashlib.sha256(HEADER.encode()).hexdigest(), code, launch.shape, layouts, cands,
             device_identity(device)]
    return hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()[:40]


Grid = Callable[[dict[str, int]], tuple[int]]


def grid_of(launch: TritonKernel, hint: Callable[[Any], int]) -> Grid:
    """``grid(meta)``: the programs of ``launch`` with ``meta`` on the hinted sizes."""
    return lambda meta: (max(1, hint(launch.programs_for(meta))),)


def _launch(fn: Any, grid: Grid, args: list[Any], meta: dict[str, int]) -> None:
    fn[grid(meta)](*args, **meta)


def _interpreted_times(fn: Any, launch: TritonKernel, grid: Grid, make_args: Callable[[], list[Any]],
                       cands: list[dict[str, int]]) -> list[float | None]:
    """Under the interpreter: each candidate run once on the same scratch inputs; its
    results must be the first's (the heuristic's); its stand-in time, its programs."""
    outs = [k for k, p in enumerate(launch.params) if p.kind == "out"]
    reference: list[torch.Tensor] | None = None
    times: list[float | None] = []
    for meta in cands:
        args = make_args()
        try:
            _launch(fn, grid, args, meta)
        except Exception as error:  # a candidate that does not run is dropped, loudly
            _log.warning("kiln.inductor: %s with %s failed under the interpreter: %s", launch.name, meta, error)
            times.append(None)
            continue
        results = [args[k] for k in outs]
        if reference is None:
            reference = results
        elif not all(_same(a, b) for a, b in zip(results, reference, strict=True)):
            _log.warning("kiln.inductor: %s with %s computes other results than with %s; dropped", launch.name, meta,
                         cands[0])
            times.append(None)
            continue
        times.append(float(grid(meta)[0]))
    return times


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two candidates' results agree: the same integers; floats to the rounding of
    another order of summation (and of that rounding to a half type)."""
    if not a.dtype.is_floating_point:
        return torch.equal(a, b)
    if a.dtype in (torch.bfloat16, torch.float16):  # one rounding to the half type apart
        rtol, atol = (1.6e-2, 1e-3) if a.dtype == torch.bfloat16 else (2e-3, 1e-4)
    else:  # float32/64: sums in another order of blocks
        rtol, atol = 1e-4, 1e-5
    return torch.allclose(a.double(), b.double(), rtol=rtol, atol=atol, equal_nan=True)


def _compile_all(fn: Any, grid: Grid, args: list[Any], cands: list[dict[str, int]],
                 policy: AutotunePolicy) -> None:
    """Compile every candidate before any is timed, in parallel (``_precompile``). A candidate
    that fails here fails again when it is timed, and is dropped then."""
    calls = [lambda meta=meta: fn.warmup(*args, grid=grid(meta), **meta) for meta in cands]
    compile_in_parallel(calls, policy.compile_workers, torch.cuda.current_device())


def _gpu_times(fn: Any, launch: TritonKernel, grid: Grid, args: list[Any], cands: list[dict[str, int]],
               policy: AutotunePolicy) -> list[float | None]:
    """On a GPU: the candidates compiled in parallel, then each timed (median milliseconds)."""
    import triton.testing

    cands = [launch.launch_meta(meta) for meta in cands]  # as its launches compile it
    _compile_all(fn, grid, args, cands, policy)
    times: list[float | None] = []
    for meta in cands:
        try:
            times.append(float(triton.testing.do_bench(lambda meta=meta: _launch(fn, grid, args, meta),
                                                       warmup=policy.warmup_ms, rep=policy.rep_ms,
                                                       return_mode="median")))
        except Exception as error:  # out of resources, a compile error: not a candidate
            _log.info("kiln.inductor: %s with %s does not run: %s", launch.name, meta, error)
            times.append(None)
    return times


def _time_candidates(fn: Any, launch: TritonKernel, device: str, grid: Grid,
                     make_args: Callable[[], list[Any]], cands: list[dict[str, int]],
                     policy: AutotunePolicy) -> list[float | None]:
    """Each candidate's time (None: dropped): measured on a GPU, the stand-in under the
    interpreter."""
    if device.startswith("cuda"):
        with torch.cuda.device(torch.device(device)):
            return _gpu_times(fn, launch, grid, make_args(), cands, policy)
    if not interpreting():
        raise ValueError(f"Triton kernels on {device} tensors run only under TRITON_INTERPRET=1")
    return _interpreted_times(fn, launch, grid, make_args, cands)


def choose(cands: list[dict[str, int]], times: list[float | None]) -> dict[str, int] | None:
    """The fastest candidate (ties: the earlier one), or None when every one was dropped."""
    timed = [(t, k) for k, t in enumerate(times) if t is not None]
    return cands[min(timed)[1]] if timed else None


def tune(launch: TritonKernel, fn: Any, device: str, buffers: dict[str, Buffer], hint: Callable[[Any], int],
         store: EntryStore, policy: AutotunePolicy | None = None) -> TuneResult | None:
    """Measure ``launch``'s candidates (``fn``: its loaded triton function; ``buffers``: the
    graph's by name; ``hint``: sizes' example values) and set ``launch.meta`` to the fastest,
    through the disk cache ``store``; None where the kernel keeps its heuristic unmeasured
    (it checks indices, or has nothing to compute)."""
    start = time.perf_counter()
    policy = policy or AutotunePolicy()
    if launch.checks:
        _log.info("kiln.inductor: %s checks indices; its launch is the heuristic's (not measured)", launch.name)
        return None
    xnumel = hint(launch.xnumel)
    if xnumel <= 0:
        return None
    if launch.shape == "template":
        _, m, n = (hint(size) for size in launch.tiles)
        cands = template_candidates(launch.meta, m, n, launch.dot_dtype)[:policy.max_candidates]
    else:
        cands = candidates(launch, xnumel, policy)

    def make_args() -> list[Any]:
        return [_SCRATCH_SEED if p.name == SEED.name else hint(p.name) if p.kind == "size"
                else torch.full((), _SCRATCH_SEED, dtype=torch.int64, device=device) if p.name == SEED_PTR
                else _scratch(buffers[p.name], hint, device) for p in launch.params]

    key = _key(launch, device, buffers, hint, cands)
    record = store.read(key)
    if record is not None and record.get("chosen") in cands:
        launch.meta = dict(cands[cands.index(record["chosen"])])
        return TuneResult(launch.name, key, cands, record.get("timings", []), launch.meta, True, 0,
                          time.perf_counter() - start)
    times = _time_candidates(fn, launch, device, grid_of(launch, hint), make_args, cands, policy)
    chosen = choose(cands, times)
    if chosen is None:
        _log.warning("kiln.inductor: no launch of %s ran while autotuning; it keeps the heuristic's", launch.name)
        return TuneResult(launch.name, key, cands, times, launch.meta, False, len(cands), time.perf_counter() - start)
    launch.meta = dict(chosen)
    store.write(key, {"kernel": launch.name, "candidates": cands, "timings": times, "chosen": chosen})
    seconds = time.perf_counter() - start
    _log.info("kiln.inductor: autotuned %s (%s, %d candidates, %.2f s): %s (%s) over the heuristic's %s (%s)",
              launch.name, launch.shape, len(cands), seconds, chosen, times[cands.index(chosen)], cands[0], times[0])
    return TuneResult(launch.name, key, cands, times, launch.meta, False, len(cands), seconds)
