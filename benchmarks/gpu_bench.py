"""GPU benchmark: kiln's generated kernels against eager PyTorch and torch.compile (Inductor)
on one CUDA device, every compiled result checked against eager's.

What it measures, in one process:

1. Copy bandwidth: the median time of ``dst.copy_(src)`` for a 1 GiB float16 tensor
   (``triton.testing.do_bench``, which empties the L2 cache before each call; CUDA events if
   triton is missing); GB/s counts the bytes read plus the bytes written. It is the 100% of
   the memory-bound table.
2. Memory-bound rows: softmax (``torch.softmax(x, -1)``), LayerNorm (``F.layer_norm`` with
   weight and bias), RMSNorm (written out: ``x * rsqrt(mean(x^2) + eps) * w``) and
   add + LayerNorm + GELU, on ``rows x cols`` inputs of ``--rows-mib`` MiB each (default 64)
   for cols 4096, 8192, 16384, 32768, in float32 and bfloat16. Per row: eager, torch.compile and
   kiln.compile in each of ``--kernel-modes`` (default "default" only: at these sizes a
   kernel runs for tens of microseconds and do_bench times the device, so launch overhead,
   what reduce-overhead removes, does not show), each timed by do_bench (median, rounds
   interleaved); achieved GB/s = (every input read once + the output written once) / median
   time, and that as % of the copy bandwidth. Each row starts with ``torch._dynamo.reset()``
   and ``kiln.reset()``, so each shape gets its own static compile.
3. Models: steady-state milliseconds per call (``torch.cuda.synchronize()`` around each round
   of calls; the median of ``--rounds`` rounds interleaved across the variants, after 5
   warm-up calls, which also record CUDA graphs), each variant with its own copy of the model:
   ``mlp-*``: a GELU MLP (1024-4096-1024, 8x512 tokens); ``block-*``: a pre-LN transformer block
   (d 1024, 16 heads, attention through ``F.scaled_dot_product_attention``, 8x512); each in
   float32 and bfloat16, inference (under ``torch.no_grad``) and ``-train``: a training step (the
   compiled module returns a loss; backward and an SGD step run outside it, as in
   inductor_bench.py); ``gpt-*``: a GPT-style model (4 layers, d 512, causal) inference;
   ``gpt2``, ``llama``, ``bert``: small transformers models built from config objects (no
   download; "skipped: no transformers" without it), float32 inference, 8x128; and the
   small-batch latency table, ``block_b1-*``: the block at batch 1, seq 32 (where
   reduce-overhead's CUDA graphs should help). The default set is ``DEFAULT_MODELS`` below
   (``--cases all``: every case). Per model: eager ms, torch.compile ms and kiln ms in each of
   ``--modes`` (default "default,reduce-overhead"; "max-autotune" is opt-in: torch's GEMM
   search alone would take minutes over these models), the speedup eager/compiled, and
   first-call seconds. Each compiler's first mode's first call is a cold compile: after
   ``torch._dynamo.reset()`` and ``kiln.reset()``, in empty cache directories (torch:
   ``torch._inductor.utils.fresh_cache()``, a new ``TORCHINDUCTOR_CACHE_DIR`` and
   ``TRITON_CACHE_DIR``; kiln: a new ``KILN_CACHE_DIR``, with ``TRITON_CACHE_DIR`` under it during
   kiln's calls), torch's FakeTensor cache cleared. Its later modes share its directories of
   the row, so their first calls may reuse its kernels (not cold). Both compilers' imports and
   first-use setup are paid before, by a one-op function with a backward. Geomeans of the
   steady-state speedups per compiler and mode, and of kiln/torch, close each table.
4. Numerics: the first call's outputs (training: the loss and every gradient) and, for
   inference, one steady-state call's outputs, against eager's with
   ``torch.testing.assert_close`` (bfloat16: atol = rtol = 2e-2; float32: its defaults). A miss
   marks the cell MISMATCH, an exception ERROR and its type, a kiln warning (a graph kiln
   could not compile ran as captured) FALLBACK; the details are in the notes under the table
   and the tracebacks in the JSON.

The process uses new temporary cache directories for torch, triton and kiln (removed at the
end). float32 matmuls keep torch's default precision (no TF32).

Run on the GPU machine (meant to take about 5 minutes there; ``--quick``: fewer rows and
models)::

    scripts/device_run.sh python3 benchmarks/gpu_bench.py --json $OUT/gpu_bench.json

Smoke test on a CPU (tiny sizes, kiln's C++ kernels; ``--compilers eager,kiln`` skips
torch.compile's slow C++ compiles)::

    python benchmarks/gpu_bench.py --device cpu --quick --compilers eager,kiln

``--cases`` takes names or their prefixes (``softmax``, ``softmax-bf16``, ``block``,
``block-bf16-train``, ``gpt2``; ``kernels``, ``models``, ``latency``: a whole table; ``all``).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import logging
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch._inductor.utils
import torch.nn.functional as F
from torch import nn

import kiln

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
BF16_TOL = {"atol": 2e-2, "rtol": 2e-2}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# ops a compiler leaves to vendor libraries: kiln's ATen calls of these are not noted (the JSON
# lists every one)
LIBRARY_OPS = ("aten.mm.", "aten.addmm.", "aten.bmm.", "aten.baddbmm.", "aten._scaled_dot_product_",
               "aten._flash_attention", "aten._efficient_attention", "aten.convolution")

# -- sizes ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sizes:
    """The shapes of every case: the GPU's, and tiny ones for a CPU smoke test."""

    copy_mib: float = 1024
    rows_mib: float = 64
    cols: tuple[int, ...] = (4096, 8192, 16384, 32768)
    d: int = 1024
    heads: int = 16
    batch: int = 8
    seq: int = 512
    gpt_d: int = 512
    gpt_heads: int = 8
    gpt_layers: int = 4
    gpt_vocab: int = 8192
    hf_batch: int = 8
    hf_seq: int = 128
    small_batch: int = 1
    small_seq: int = 32


GPU = Sizes()
CPU = Sizes(copy_mib=16, rows_mib=0.25, cols=(4096, 32768), d=64, heads=4, batch=2, seq=16, gpt_d=64,
            gpt_heads=4, gpt_layers=2, gpt_vocab=256, hf_batch=2, hf_seq=16, small_seq=8)

# -- memory-bound functions -----------------------------------------------------------------

EPS = 1e-6


def _softmax(x):
    return torch.softmax(x, -1)


def _layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def _rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def _add_layer_norm_gelu(x, y, w, b):
    return F.gelu(F.layer_norm(x + y, (x.shape[-1],), w, b))


# name: (function, number of (rows, cols) inputs, number of (cols,) parameters)
KERNELS: dict[str, tuple[Callable[..., torch.Tensor], int, int]] = {
    "softmax": (_softmax, 1, 0),
    "layernorm": (_layer_norm, 1, 2),
    "rmsnorm": (_rms_norm, 1, 1),
    "add_ln_gelu": (_add_layer_norm_gelu, 2, 2),
}

# -- models ---------------------------------------------------------------------------------


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, causal: bool) -> None:
        super().__init__()
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.heads, self.causal = heads, causal

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


def _mlp(d: int) -> nn.Module:
    return nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))


class Block(nn.Module):
    """A pre-LN transformer block: x + attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, d: int, heads: int, causal: bool = False) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.mlp = Attention(d, heads, causal), _mlp(d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token and position embeddings, causal blocks, a final LayerNorm and the vocabulary head."""

    def __init__(self, vocab: int, d: int, heads: int, layers: int, seq: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, causal=True) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class WithLoss(nn.Module):
    """``model`` followed by a loss, ``sum(model(x) * target)`` in float32 (gradients of order
    one, so that the checks mean something)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x, target):
        return (self.model(x).float() * target).sum()


@dataclass(slots=True)
class Workload:
    """``model`` on ``args``; ``train``: the model returns a loss (backward and an SGD step)."""

    model: nn.Module
    args: tuple
    train: bool = False
    tol: dict[str, float] = field(default_factory=dict)


def _dense(model: nn.Module, shape: tuple[int, ...], dtype: str, train: bool, device: torch.device) -> Workload:
    model = model.to(device, DTYPES[dtype])
    x = torch.randn(shape, device=device, dtype=DTYPES[dtype])
    tol = BF16_TOL if dtype == "bf16" else {}
    if not train:
        return Workload(model.eval(), (x,), tol=tol)
    target = torch.randn(shape, device=device) / math.sqrt(math.prod(shape[:-1]))
    return Workload(WithLoss(model.train()), (x, target), True, tol)


def _gpt(s: Sizes, dtype: str, device: torch.device) -> Workload:
    model = GPT(s.gpt_vocab, s.gpt_d, s.gpt_heads, s.gpt_layers, s.seq).to(device, DTYPES[dtype]).eval()
    idx = torch.randint(0, s.gpt_vocab, (s.batch, s.seq), device=device)
    return Workload(model, (idx,), tol=BF16_TOL if dtype == "bf16" else {})


def _transformers(name: str, s: Sizes, device: torch.device) -> Workload | str:
    try:
        import transformers
    except ImportError:
        return "skipped: no transformers"
    transformers.logging.set_verbosity_error()
    model_name, config_name, kwargs = {
        "gpt2": ("GPT2Model", "GPT2Config", dict(n_layer=2, n_embd=256, n_head=4, use_cache=False)),
        "llama": ("LlamaModel", "LlamaConfig", dict(hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                                                    num_attention_heads=4, num_key_value_heads=4, use_cache=False)),
        "bert": ("BertModel", "BertConfig", dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                                                 intermediate_size=1024)),
    }[name]
    if not hasattr(transformers, model_name):
        return f"skipped: transformers {transformers.__version__} has no {model_name}"
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**kwargs)).to(device).eval()
    return Workload(model, (torch.randint(0, 1000, (s.hf_batch, s.hf_seq), device=device),))


def _model_cases() -> dict[str, tuple[str, str, Callable[[Sizes, torch.device], Workload | str]]]:
    """name: (table, description, maker)."""
    cases: dict[str, tuple[str, str, Callable[[Sizes, torch.device], Workload | str]]] = {}
    for dtype in DTYPES:
        for train in (False, True):
            suffix = f"-{dtype}" + ("-train" if train else "")
            what = "train step" if train else "inference"
            cases["mlp" + suffix] = ("models", f"GELU MLP, {dtype}, {what}", lambda s, dev, dt=dtype, tr=train: _dense(
                _mlp(s.d), (s.batch, s.seq, s.d), dt, tr, dev))
            cases["block" + suffix] = ("models", f"transformer block, {dtype}, {what}", lambda s, dev, dt=dtype, tr=train:
                                       _dense(Block(s.d, s.heads), (s.batch, s.seq, s.d), dt, tr, dev))
    for dtype in DTYPES:
        cases[f"gpt-{dtype}"] = ("models", f"GPT {dtype}", lambda s, dev, dt=dtype: _gpt(s, dt, dev))
    for name in ("gpt2", "llama", "bert"):
        cases[name] = ("models", f"{name} (transformers, 2 layers, d256), fp32",
                       lambda s, dev, n=name: _transformers(n, s, dev))
    for dtype in DTYPES:
        cases[f"block_b1-{dtype}"] = ("latency", f"transformer block, {dtype}, small batch", lambda s, dev, dt=dtype: _dense(
            Block(s.d, s.heads), (s.small_batch, s.small_seq, s.d), dt, False, dev))
    return cases


MODEL_CASES = _model_cases()
DEFAULT_MODELS = ("mlp-fp32", "mlp-bf16-train", "block-fp32", "block-bf16", "block-fp32-train", "block-bf16-train",
                  "gpt-bf16", "gpt2", "llama", "bert", "block_b1-bf16")
QUICK_MODELS = ("mlp-bf16", "block-bf16", "block-bf16-train", "gpt2", "block_b1-bf16")
QUICK_COLS = (4096, 32768)

# -- compilers, caches and what kiln says -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Compiler:
    """``stack`` ("torch" or "kiln") in ``mode``; its name labels a column."""

    stack: str
    mode: str

    @property
    def name(self) -> str:
        return f"{self.stack}:{self.mode}"

    def __call__(self, fn: Any) -> Any:
        return (torch.compile if self.stack == "torch" else kiln.compile)(fn, mode=self.mode)


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    old = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _fresh_torch_cache() -> contextlib.AbstractContextManager[None]:
    """torch's empty temporary cache directories (Inductor's and triton's) for the block."""
    utils = torch._inductor.utils
    fresh = getattr(utils, "fresh_cache", None) or utils.fresh_inductor_cache  # its older name
    return fresh()


def _kiln_cache(directory: str) -> contextlib.AbstractContextManager[None]:
    """kiln's cache directory, with triton's (for kiln's Triton kernels) under it."""
    return _environ(KILN_CACHE_DIR=directory, TRITON_CACHE_DIR=os.path.join(directory, "triton"))


@dataclass(slots=True)
class KilnWatch:
    """What kiln said while compiling: warnings (a graph run as captured), and per compiled
    ATen graph its kernels and ATen calls."""

    warnings: list[str] = field(default_factory=list)
    kernels: list[int] = field(default_factory=list)
    externs: list[int] = field(default_factory=list)
    fallbacks: dict[str, str] = field(default_factory=dict)


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        message = (record.getMessage().splitlines() or [""])[0]
        if record.exc_info and record.exc_info[1] is not None:
            message += f" [{_error(record.exc_info[1])}]"
        self.into.append(message)


@contextlib.contextmanager
def watch_kiln() -> Iterator[KilnWatch]:
    """Collect kiln's warnings and, through the public compiler factory that kiln's inductor
    backend looks up for each graph (``kiln.inductor.aten_compiler``), its compiled graphs."""
    import kiln.inductor

    seen = KilnWatch()
    factory = kiln.inductor.aten_compiler

    def counting_factory(*args: Any, **kwargs: Any) -> Callable[[Any], Any]:
        compile_aten = factory(*args, **kwargs)

        def compiler(gm: Any) -> Any:
            compiled = compile_aten(gm)
            graph = getattr(compiled, "compiled", None)  # None: the graph runs as generated Python
            if graph is not None:
                seen.kernels.append(getattr(graph, "kernels", 0))
                seen.externs.append(getattr(graph, "externs", 0))
                seen.fallbacks.update(getattr(graph, "fallbacks", {}))
            return compiled

        return compiler

    handler = _Collect(seen.warnings)
    logging.getLogger("kiln").addHandler(handler)
    kiln.inductor.aten_compiler = counting_factory
    try:
        yield seen
    finally:
        kiln.inductor.aten_compiler = factory
        logging.getLogger("kiln").removeHandler(handler)


def _add_one(x):
    return (x + 1).sin()


def pay_first_use(device: torch.device, stacks: list[str], kiln_options: dict[str, Any] | None = None) -> list[str]:
    """Compile, run and differentiate a one-op function with each compiler (throwaway
    caches; kiln with ``kiln_options``, those of the compiles to come: e.g. its compile worker
    processes, started by a first compile and kept, as torch's are), so that later first calls
    pay no imports or per-process setup; its errors."""
    errors = []
    x = torch.randn(64, device=device, requires_grad=True)
    for stack in stacks:
        try:
            if stack == "kiln":
                with tempfile.TemporaryDirectory(prefix="gpu-bench-") as d, _kiln_cache(d):
                    kiln.compile(_add_one, options=kiln_options)(x).sum().backward()
            else:
                with _fresh_torch_cache():
                    torch.compile(_add_one)(x).sum().backward()
        except Exception as e:  # reported; the cases will say more
            errors.append(f"{stack} warm-up ERROR: {_error(e)}")
    kiln.reset()
    torch._dynamo.reset()
    return errors


# -- results --------------------------------------------------------------------------------


@dataclass(slots=True)
class Cell:
    """One variant of one row: ``ms`` median per call (kernels: device time), ``first_s`` its
    first call (compile included), ``mark``: "", MISMATCH, ERROR <type>, FALLBACK."""

    ms: float = math.nan
    first_s: float = math.nan
    mark: str = ""
    kiln_kernels: str = ""  # kernels per compiled graph, "forward+backward"
    kiln_aten: dict[str, str] = field(default_factory=dict)  # ops run as ATen calls: why


@dataclass(slots=True)
class Row:
    name: str
    description: str
    table: str  # "kernels", "models", "latency"
    bytes: int = 0  # kernels: inputs read once + output written once
    shape: str = ""
    cells: dict[str, Cell] = field(default_factory=dict)
    skipped: str = ""
    notes: list[str] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)

    def fail(self, variant: str, e: BaseException, when: str = "") -> None:
        cell = self.cells.setdefault(variant, Cell())
        cell.mark, cell.ms = f"ERROR {type(e).__name__}", math.nan
        self.notes.append(f"{variant} ERROR{when}: {_error(e)}")
        self.tracebacks.append(f"{variant}{when}:\n{traceback.format_exc()}")


def _error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
    cause = e.__cause__ or e.__context__
    return text + (f" (from {type(cause).__name__}: {(str(cause).strip().splitlines() or [''])[0]})" if cause else "")


def _check(got: list[torch.Tensor], expected: list[torch.Tensor], tol: dict[str, float]) -> str:
    """"" or a note with the largest difference."""
    try:
        torch.testing.assert_close(got, expected, **tol)
        return ""
    except AssertionError as e:
        keep = ("Mismatched elements", "Greatest absolute", "Greatest relative", "The failure occurred")
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        return "; ".join([line for line in lines if line.startswith(keep)] or lines[:1])


def _record_first(row: Row, c: Compiler, got: list[torch.Tensor], expected: list[torch.Tensor],
                  tol: dict[str, float], seconds: float, watch: KilnWatch | None) -> None:
    cell = row.cells.setdefault(c.name, Cell())
    cell.first_s = seconds
    detail = _check(got, expected, tol)
    if detail:
        cell.mark = "MISMATCH"
        row.notes.append(f"{c.name} MISMATCH: {detail}")
    if watch is None:
        return
    cell.kiln_kernels = "+".join(map(str, watch.kernels))
    if watch.warnings and not cell.mark:
        cell.mark = "FALLBACK"
    row.notes += [f"{c.name} warning: {w}" for w in dict.fromkeys(watch.warnings)]
    cell.kiln_aten = dict(watch.fallbacks)
    unexpected = {op: why for op, why in watch.fallbacks.items() if not op.startswith(LIBRARY_OPS)}
    if unexpected:
        row.notes.append(f"{c.name} ATen calls: " + ", ".join(f"{op} ({why})" for op, why in unexpected.items()))


# -- timing ---------------------------------------------------------------------------------


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def kernel_ms(fn: Callable[[], Any], device: torch.device, rep_ms: float) -> float:
    """Median milliseconds of ``fn`` on the device (CPU: wall time of single calls)."""
    if device.type == "cuda":
        try:
            from triton.testing import do_bench
        except ImportError:
            return _events_ms(fn, rep_ms)
        return do_bench(fn, warmup=max(5, rep_ms // 4), rep=rep_ms, return_mode="median")
    fn()
    times = []
    deadline = time.perf_counter() + rep_ms / 1e3
    while len(times) < 5 or (time.perf_counter() < deadline and len(times) < 1000):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _events_ms(fn: Callable[[], Any], rep_ms: float) -> float:
    for _ in range(3):
        fn()
    times: list[float] = []
    while len(times) < 10 or sum(times) < rep_ms:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth(device: torch.device, mib: float, rep_ms: float) -> dict[str, float]:
    """GB/s of ``dst.copy_(src)`` (float16), bytes read plus bytes written."""
    src = torch.randn(int(mib * 2**20) // 2, device=device, dtype=torch.float16)
    dst = torch.empty_like(src)
    ms = statistics.median(kernel_ms(lambda: dst.copy_(src), device, rep_ms) for _ in range(3))
    return {"bytes": int(mib * 2**20) * 2, "ms": ms, "gbps": int(mib * 2**20) * 2 / ms / 1e6}


def _steady(calls: dict[str, Callable[[], Any]], row: Row, device: torch.device, rounds: int,
            target_s: float) -> None:
    """Median ms per call of each variant: 5 warm-up calls, then ``rounds`` interleaved rounds
    of ``number`` calls each, synchronized around each round."""
    for name, call in list(calls.items()):
        try:
            for _ in range(5):
                call()
            _sync(device)
        except Exception as e:  # this variant's failure, not the row's
            del calls[name]
            row.fail(name, e, " after its first call")
    if "eager" not in calls:
        return
    _sync(device)
    start = time.perf_counter()
    calls["eager"]()
    _sync(device)
    number = max(1, min(500, int(target_s / max(time.perf_counter() - start, 1e-6))))
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in list(calls.items()):
            try:
                _sync(device)
                start = time.perf_counter()
                for _ in range(number):
                    call()
                _sync(device)
            except Exception as e:
                del calls[name], samples[name]
                row.fail(name, e, " in the steady state")
                continue
            samples[name].append((time.perf_counter() - start) / number * 1e3)
    for name, s in samples.items():
        row.cells.setdefault(name, Cell()).ms = statistics.median(s)


# -- the memory-bound table -----------------------------------------------------------------


def run_kernel_row(op: str, dtype: str, cols: int, rows_mib: float, device: torch.device,
                   compilers: list[Compiler], rounds: int, rep_ms: float) -> Row:
    fn, n_inputs, n_params = KERNELS[op]
    dt = DTYPES[dtype]
    rows = max(1, int(rows_mib * 2**20) // (cols * dt.itemsize))
    row = Row(f"{op}-{dtype}-{cols}", f"{op} {dtype}", "kernels", shape=f"{rows}x{cols}")
    torch.manual_seed(0)
    args = tuple(torch.randn(rows, cols, device=device, dtype=dt) for _ in range(n_inputs)) + tuple(
        torch.randn(cols, device=device, dtype=dt) * 0.1 + 1 for _ in range(n_params))
    tol = BF16_TOL if dtype == "bf16" else {}
    torch._dynamo.reset()
    kiln.reset()
    with torch.no_grad():
        expected = fn(*args)
        row.bytes = sum(a.nbytes for a in args) + expected.nbytes
        calls: dict[str, Callable[[], Any]] = {"eager": lambda: fn(*args)}
        for c in compilers:
            try:
                with watch_kiln() if c.stack == "kiln" else contextlib.nullcontext() as watch:
                    compiled = c(fn)
                    _sync(device)
                    start = time.perf_counter()
                    got = compiled(*args).clone()
                    _sync(device)
                    seconds = time.perf_counter() - start
                _record_first(row, c, [got], [expected], tol, seconds, watch)
                calls[c.name] = lambda compiled=compiled: compiled(*args)
            except Exception as e:
                row.fail(c.name, e)
        samples: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(rounds):
            for name, call in list(calls.items()):
                try:
                    samples[name].append(kernel_ms(call, device, rep_ms))
                except Exception as e:
                    del calls[name], samples[name]
                    row.fail(name, e, " while timed")
        for name, s in samples.items():
            row.cells.setdefault(name, Cell()).ms = statistics.median(s)
        _check_steady(row, calls, [expected], tol)
    return row


def _check_steady(row: Row, calls: dict[str, Callable[[], Any]], expected: list[torch.Tensor],
                  tol: dict[str, float]) -> None:
    """One more call of each compiled variant (a CUDA graph's replay) against eager."""
    for name, call in calls.items():
        if name == "eager" or row.cells[name].mark == "MISMATCH":
            continue
        try:
            detail = _check([t.clone() for t in _tensors(call())], expected, tol)
        except Exception as e:
            row.fail(name, e, " on a checked steady-state call")
            continue
        if detail:
            row.cells[name].mark = "MISMATCH"
            row.notes.append(f"{name} MISMATCH on a steady-state call: {detail}")


# -- the model tables -----------------------------------------------------------------------


def _tensors(out: Any) -> list[torch.Tensor]:
    """The tensors of an output (tensor, sequence, mapping or transformers ModelOutput)."""
    if isinstance(out, torch.Tensor):
        return [out.detach()]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, list | tuple):
        return [t for item in out for t in _tensors(item)]
    return []


@dataclass(slots=True)
class Variant:
    """One copy of a workload, compiled or not: ``first()`` returns what is checked (copies),
    ``step()`` is one steady-state call."""

    first: Callable[[], list[torch.Tensor]]
    step: Callable[[], Any]


def variant(work: Workload, compiler: Callable[[Any], Any]) -> Variant:
    """``work`` on its own copy of the model (and optimizer), compiled by ``compiler``."""
    model = copy.deepcopy(work.model)
    compiled = compiler(model)
    if not work.train:
        def infer():
            with torch.no_grad():
                return compiled(*work.args)

        return Variant(lambda: [t.clone() for t in _tensors(infer())], infer)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=1e-3)

    def train(keep: bool) -> list[torch.Tensor]:
        loss = compiled(*work.args)
        loss.backward()
        kept = [loss.detach().clone(), *(p.grad.clone() for p in params)] if keep else []
        opt.step()
        opt.zero_grad(set_to_none=True)
        return kept

    return Variant(lambda: train(True), lambda: train(False))


def _first(row: Row, work: Workload, c: Compiler, expected: list[torch.Tensor], device: torch.device,
           variants: dict[str, Variant]) -> None:
    """``c``'s variant and its first call: timed, checked; an exception marks the cell."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    FakeTensorMode.cache_clear()
    try:
        with watch_kiln() if c.stack == "kiln" else contextlib.nullcontext() as watch:
            v = variant(work, c)  # the deepcopy happens before the clock starts; compiling is lazy
            _sync(device)
            start = time.perf_counter()
            got = v.first()
            _sync(device)
            seconds = time.perf_counter() - start
        _record_first(row, c, got, expected, work.tol, seconds, watch)
        variants[c.name] = v
    except Exception as e:
        row.fail(c.name, e)


def run_model_row(name: str, s: Sizes, device: torch.device, compilers: list[Compiler], rounds: int,
                  target_s: float) -> Row:
    table, description, make = MODEL_CASES[name]
    row = Row(name, description, table)
    torch.manual_seed(0)
    work = make(s, device)
    if isinstance(work, str):
        row.skipped = work
        row.notes.append(work)
        return row
    variants = {"eager": variant(work, lambda m: m)}
    expected = variants["eager"].first()
    torch._dynamo.reset()
    kiln.reset()
    kiln_dir = tempfile.mkdtemp(prefix="gpu-bench-kiln-")
    try:
        with _kiln_cache(kiln_dir):
            for c in (c for c in compilers if c.stack == "kiln"):
                _first(row, work, c, expected, device, variants)
        with _fresh_torch_cache():
            for c in (c for c in compilers if c.stack == "torch"):
                _first(row, work, c, expected, device, variants)
    finally:
        shutil.rmtree(kiln_dir, ignore_errors=True)
    _steady({n: v.step for n, v in variants.items()}, row, device, rounds, target_s)
    if not work.train:
        _check_steady(row, {n: v.step for n, v in variants.items() if n in row.cells and not
                            row.cells[n].mark.startswith("ERROR")}, expected, work.tol)
    return row


# -- report ---------------------------------------------------------------------------------


def _table(headers: list[str], lines: list[list[str]]) -> str:
    widths = [max([len(h), *(len(line[i]) for line in lines)]) for i, h in enumerate(headers)]

    def render(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([render(headers), "  ".join("-" * w for w in widths), *map(render, lines)])


def _num(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def _geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


def _speedups(rows: list[Row], names: list[str], speed: Callable[[Row, str], float]) -> list[str]:
    """Geomean lines: each variant's speed over eager's, and kiln's over torch's per mode."""
    lines = []
    for name in names:
        values = [speed(r, name) for r in rows if name in r.cells]
        values = [v for v in values if math.isfinite(v)]
        lines.append(f"  {name}: {_num(_geomean(values))}x over eager ({len(values)} rows)")
    for mode in dict.fromkeys(n.split(":", 1)[1] for n in names):
        pairs = [(speed(r, f"kiln:{mode}"), speed(r, f"torch:{mode}")) for r in rows
                 if f"kiln:{mode}" in r.cells and f"torch:{mode}" in r.cells]
        ratios = [k / t for k, t in pairs if math.isfinite(k / t)] if pairs else []
        if ratios:
            lines.append(f"  kiln/torch speed, {mode}: {_num(_geomean(ratios))} ({len(ratios)} rows with both)")
    return lines


def _mark(cell: Cell | None, text: str) -> str:
    if cell is None:
        return "-"
    if cell.mark.startswith("ERROR"):
        return cell.mark
    return f"{text} {cell.mark}".strip()


def _notes(rows: list[Row]) -> list[str]:
    notes = [f"- {r.name}: {n}" for r in rows for n in dict.fromkeys(r.notes)]
    return ["", "Notes:", *notes] if notes else []


def report_kernels(rows: list[Row], names: list[str], copy: dict[str, float], device: torch.device) -> str:
    def gbps(r: Row, name: str) -> float:
        return r.bytes / r.cells[name].ms / 1e6 if name in r.cells else math.nan

    headers = ["row", "shape", "MiB moved", *(f"{n} GB/s (% copy)" for n in ["eager", *names])]
    lines = [[r.name, r.shape or "-", _num(r.bytes / 2**20) if r.bytes else "-",
              *(r.skipped or _mark(r.cells.get(n), f"{_num(gbps(r, n))} ({100 * gbps(r, n) / copy['gbps']:.0f}%)")
                for n in ["eager", *names])] for r in rows]
    speed_lines = _speedups(rows, names, lambda r, n: gbps(r, n) / gbps(r, "eager"))
    timer = "device time, do_bench median" if device.type == "cuda" else "wall time per call, median"
    return "\n".join([f"Memory-bound kernels ({timer}; copy {_num(copy['gbps'])} GB/s = 100%)",
                      "", _table(headers, lines), "", "geomean bandwidth over eager's:", *speed_lines,
                      *_notes(rows)])


def report_models(title: str, rows: list[Row], names: list[str]) -> str:
    def speedup(r: Row, name: str) -> float:
        eager, cell = r.cells.get("eager"), r.cells.get(name)
        return eager.ms / cell.ms if eager and cell else math.nan

    def cell(r: Row, name: str) -> str:
        if r.skipped:
            return r.skipped if r.skipped.startswith("ERROR") else "skipped"
        if name == "eager":
            return _mark(r.cells.get(name), _num(r.cells[name].ms) if name in r.cells else "")
        return _mark(r.cells.get(name), f"{_num(r.cells[name].ms)} ({_num(speedup(r, name))}x)" if name in r.cells else "")

    headers = ["case", "eager ms", *(f"{n} ms (x eager)" for n in names)]
    lines = [[r.name, *(cell(r, n) for n in ["eager", *names])] for r in rows]
    first_headers = ["case", *(f"{n} first call s" for n in names)]
    first = [[r.name, *("-" if r.skipped or n not in r.cells else _num(r.cells[n].first_s) for n in names)]
             for r in rows]
    firsts = {stack: next((n for n in names if n.startswith(stack + ":")), None) for stack in ("torch", "kiln")}
    cold = []
    if firsts["torch"] and firsts["kiln"]:
        ratios = [r.cells[firsts["kiln"]].first_s / r.cells[firsts["torch"]].first_s for r in rows
                  if firsts["kiln"] in r.cells and firsts["torch"] in r.cells]
        cold = [f"  cold compile kiln/torch ({firsts['kiln']} / {firsts['torch']}): {_num(_geomean(ratios))}"]
    return "\n".join([f"{title} (steady-state ms per call, median)", "", _table(headers, lines), "",
                      "geomean speedup over eager:", *_speedups(rows, names, speedup), *cold, "",
                      "First calls, seconds (each compiler's first mode: a cold compile, empty caches; later "
                      "modes share its cache directory)", "", _table(first_headers, first), *_notes(rows)])


def _json_ready(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    return value


# -- main -----------------------------------------------------------------------------------


def _selected(names: list[str], wanted: list[str] | None) -> list[str]:
    if wanted is None:
        return names
    return [n for n in names if any(w == n or n.startswith(w + "-") for w in wanted)]


def _plan(args: argparse.Namespace, s: Sizes) -> tuple[list[tuple[str, str, int]], list[str]]:
    """The kernel rows (op, dtype, cols) and model cases asked for."""
    cols = [int(c) for c in args.cols.split(",")] if args.cols else list(QUICK_COLS if args.quick else s.cols)
    kernel_rows = [(op, dt, c) for op in KERNELS for dt in DTYPES for c in cols]
    wanted = None if args.cases in (None, "all") else args.cases.split(",")
    if wanted is None:
        models = list(QUICK_MODELS if args.quick else DEFAULT_MODELS) if args.cases is None else list(MODEL_CASES)
        return kernel_rows, models
    tables = {"kernels", "models", "latency"}
    kernel_names = [f"{op}-{dt}-{c}" for op, dt, c in kernel_rows]
    chosen_kernels = set(kernel_names if "kernels" in wanted else _selected(kernel_names, wanted))
    models = [n for n in MODEL_CASES if MODEL_CASES[n][0] in wanted] + _selected(list(MODEL_CASES), wanted)
    unknown = [w for w in wanted if w not in tables and not _selected(kernel_names + list(MODEL_CASES), [w])]
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; known: {', '.join(kernel_names + list(MODEL_CASES))}, "
                         f"or a prefix of these, or kernels, models, latency, all")
    return ([r for r, n in zip(kernel_rows, kernel_names, strict=True) if n in chosen_kernels],
            list(dict.fromkeys(models)))


def _compilers(stacks: list[str], modes: str) -> list[Compiler]:
    chosen = modes.split(",")
    bad = [m for m in chosen if m not in MODES]
    if bad:
        raise SystemExit(f"unknown modes {bad}; known: {', '.join(MODES)}")
    return [Compiler(stack, mode) for stack in ("torch", "kiln") if stack in stacks for mode in chosen]


def _meta(device: torch.device, argv: list[str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": argv, "python": platform.python_version(),
                            "torch": torch.__version__, "device": str(device), "cpus": os.cpu_count()}
    if device.type == "cuda":
        meta["gpu"] = torch.cuda.get_device_name(device)
    for package in ("triton", "transformers"):
        try:
            meta[package] = __import__(package).__version__
        except ImportError:
            meta[package] = None
    return meta


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (a smoke test at tiny sizes)")
    parser.add_argument("--quick", action="store_true", help=f"cols {QUICK_COLS}, models {','.join(QUICK_MODELS)}, "
                                                              "fewer rounds")
    parser.add_argument("--modes", default="default,reduce-overhead", help=f"models' modes, comma list of {', '.join(MODES)}")
    parser.add_argument("--kernel-modes", default="default", help="the memory-bound rows' modes")
    parser.add_argument("--compilers", default="eager,torch,kiln", help="comma list of eager,torch,kiln (eager always runs)")
    parser.add_argument("--cases", default=None, help="comma list of names or prefixes (softmax, block-bf16, gpt2), "
                                                      "kernels, models, latency or all; default: the default set")
    parser.add_argument("--cols", default=None, help="memory-bound rows' column counts (default 4096,8192,16384,32768)")
    parser.add_argument("--rows-mib", type=float, default=None, help="MiB per memory-bound input (default 64; cpu 0.25)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds for models (default 7, quick 5)")
    parser.add_argument("--json", default=None, help="write every figure, note and traceback here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("CUDA is not available (use --device cpu for a smoke test)")
    s = GPU if device.type == "cuda" else CPU
    stacks = [c for c in args.compilers.split(",") if c != "eager"]
    if any(c not in ("torch", "kiln") for c in stacks):
        parser.error(f"unknown compilers in {args.compilers!r}; known: eager, torch, kiln")
    kernel_compilers, model_compilers = _compilers(stacks, args.kernel_modes), _compilers(stacks, args.modes)
    kernel_rows, models = _plan(args, s)
    rows_mib = args.rows_mib or s.rows_mib
    rounds = args.rounds or (5 if args.quick else 7)
    kernel_rounds, rep_ms = (2, 25) if args.quick else (3, 40)
    target_s = (0.02 if args.quick else 0.05) if device.type == "cuda" else 0.02

    scratch = tempfile.mkdtemp(prefix="gpu-bench-")
    os.environ.update(TORCHINDUCTOR_CACHE_DIR=os.path.join(scratch, "torch"),
                      TRITON_CACHE_DIR=os.path.join(scratch, "triton"), KILN_CACHE_DIR=os.path.join(scratch, "kiln"))
    meta = _meta(device, sys.argv[1:] if argv is None else argv)
    meta["modes"], meta["kernel_modes"], meta["rounds"] = args.modes, args.kernel_modes, rounds
    meta["rows_mib"] = rows_mib

    def progress(what: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {what}", file=sys.stderr, flush=True)

    try:
        progress("first use of each compiler")
        meta["warm_up_errors"] = pay_first_use(device, stacks)
        progress("copy bandwidth")
        copy_bw = copy_bandwidth(device, s.copy_mib, rep_ms * 2)
        rows: list[Row] = []
        for op, dtype, cols in kernel_rows:
            progress(f"{op}-{dtype}-{cols}")
            rows.append(_guarded(f"{op}-{dtype}-{cols}", "kernels", lambda op=op, dtype=dtype, cols=cols: run_kernel_row(
                op, dtype, cols, rows_mib, device, kernel_compilers, kernel_rounds, rep_ms)))
            _release(device)
        for name in models:
            progress(name)
            rows.append(_guarded(name, MODEL_CASES[name][0], lambda name=name: run_model_row(
                name, s, device, model_compilers, rounds, target_s)))
            _release(device)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    meta["wall_s"] = time.perf_counter() - started
    _print_report(rows, kernel_compilers, model_compilers, copy_bw, meta)
    if args.json:
        result = {"meta": meta, "copy": copy_bw, "rows": [asdict(r) for r in rows]}
        with open(args.json, "w") as f:
            json.dump(_json_ready(result), f, indent=1)
        print(f"\nresults: {args.json}")


def _guarded(name: str, table: str, run: Callable[[], Row]) -> Row:
    """The row ``run`` makes; an exception outside any one variant (building the case, eager)
    makes a row that says so."""
    try:
        return run()
    except Exception as e:
        row = Row(name, name, table, skipped=f"ERROR {type(e).__name__}")
        row.notes.append(f"case ERROR: {_error(e)}")
        row.tracebacks.append(traceback.format_exc())
        return row


def _release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _print_report(rows: list[Row], kernel_compilers: list[Compiler], model_compilers: list[Compiler],
                  copy_bw: dict[str, float], meta: dict[str, Any]) -> None:
    print(f"\n# gpu_bench: {meta.get('gpu', meta['device'])}, torch {meta['torch']}, triton {meta['triton']}, "
          f"python {meta['python']}, {meta['cpus']} CPUs; {meta['wall_s']:.0f} s in all")
    print(f"copy bandwidth: {_num(copy_bw['gbps'])} GB/s ({copy_bw['bytes'] / 2**30:.2f} GiB read+written in "
          f"{copy_bw['ms']:.3f} ms)")
    for error in meta["warm_up_errors"]:
        print(f"warm-up: {error}")
    kernels = [r for r in rows if r.table == "kernels"]
    if kernels:
        print("\n" + report_kernels(kernels, [c.name for c in kernel_compilers], copy_bw, torch.device(meta["device"])))
    for table, title in (("models", "Models"), ("latency", "Small-batch latency")):
        chosen = [r for r in rows if r.table == table]
        if chosen:
            print("\n" + report_models(title, chosen, [c.name for c in model_compilers]))


if __name__ == "__main__":
    main()
