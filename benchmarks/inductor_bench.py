"""kiln.inductor benchmark: kiln's C++ kernels against eager and torch.compile (default
inductor backend) on CPU, float32, with kiln's outputs checked against eager.

For each thread count (``torch.set_num_threads``) and each case, in one process:

- cold compile: the first call (a training case's first step: forward, backward, SGD step)
  after ``kiln.reset()`` / ``torch._dynamo.reset()``, each with a fresh empty cache
  directory (``KILN_CACHE_DIR`` set to a new temporary directory; torch's
  ``torch._inductor.utils.fresh_cache()``, a new ``TORCHINDUCTOR_CACHE_DIR``) and torch's
  FakeTensor cache cleared; kiln first, so any warming one gives the other goes to torch.
  Both compilers' imports and per-process first use are paid before by a one-op function
  with a backward (torch probes the CPU's vector ISAs once per process: ~30 s here);
- a restarted program (kiln only): the same first call in a new process running the case
  alone with an empty ``KILN_CACHE_DIR`` (cold, new process), then in another new process
  with what that one left there (warm), imports paid first in both: the warm process loads
  each frame's guards and replacement code, aotgrad's split, inductor's compiled graphs and
  kernel libraries from the disk caches and captures nothing (a note says when it captured
  or compiled anything). The warm/cold ratio is of these two; the in-process cold column is
  the one compared with torch.compile's;
- steady state: median milliseconds per call of eager, torch.compile and kiln, interleaved
  rounds after warm-up (each variant with its own copy of the model and optimizer);
- kernels per graph ("a+b": forward + backward): kiln's ``CompiledGraph.kernels`` of every
  ATen graph it compiled (a wrapper around ``kiln.inductor._compile.compile_graph``, also
  put where ``kiln.inductor._api`` imported that name); torch's
  ``cpp_fused_*`` kernels defined in each output code module it loads. (torch's
  ``metrics.generated_kernel_count`` counts loop nests, not kernels: 4 for softmax's one.)
- correctness: kiln's and torch.compile's first-call outputs (training: loss, gradients,
  buffers; in-place cases: the mutated tensors) against eager's with
  ``torch.testing.assert_close`` (default float32 tolerances); a miss marks the time
  "MISMATCH"; an exception marks "ERROR"; a graph kiln
  could not compile and ran as captured (its warning) marks "FALLBACK". Notes below each
  table give the differences, kiln's warnings with their exceptions and the ops
  kiln.inductor ran as ATen calls.

Run: ``python benchmarks/inductor_bench.py`` (``--quick``: six cases, fewer rounds;
``--cases softmax,gpt2``; ``--threads 1,2``).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import logging
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch._inductor.utils
import torch.nn.functional as F
from torch import nn

import kiln

# -- cases ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Workload:
    """What a case runs: ``fn`` (a module or function) on ``args``; ``kind`` is "infer" (under
    no_grad), "train" (``fn`` returns a loss: backward and an SGD step) or "inplace" (``fn``
    mutates ``args``, which each variant gets a copy of)."""

    fn: Callable[..., Any]
    args: tuple
    kind: str = "infer"


def _softmax(x):
    return torch.softmax(x, dim=-1)


class LnGeluResidual(nn.Module):
    def __init__(self, d: int = 1024) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x):
        x = x + F.gelu(self.ln1(x))
        return x + F.gelu(self.ln2(x))


class Block(nn.Module):
    """A pre-norm transformer block written out: attention by matmuls and softmax, GELU MLP."""

    def __init__(self, d: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = ((q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU())
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


class WithLoss(nn.Module):
    """``model`` followed by cross entropy: the loss is part of the compiled graph."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x, target):
        return F.cross_entropy(self.model(x), target)


class EmbeddingSum(nn.Module):
    def __init__(self, vocab: int = 50000, d: int = 128) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)

    def forward(self, idx):
        return self.emb(idx).sum(1)


LR, B1, B2, EPS, STEP = 1e-3, 0.9, 0.999, 1e-8, 10
BC1, BC2 = 1 - B1**STEP, 1 - B2**STEP


def _adam(*tensors):
    """Adam's update, functional: (param, grad, exp_avg, exp_avg_sq) per parameter, flat."""
    out = []
    for i in range(0, len(tensors), 4):
        p, g, m, v = tensors[i:i + 4]
        m = m * B1 + g * (1 - B1)
        v = v * B2 + g * g * (1 - B2)
        out += [p - (LR / BC1) * m / ((v / BC2).sqrt() + EPS), m, v]
    return out


def _adam_inplace(*tensors):
    """Adam's update in place, as torch.optim.Adam's single-tensor loop writes it."""
    for i in range(0, len(tensors), 4):
        p, g, m, v = tensors[i:i + 4]
        m.mul_(B1).add_(g, alpha=1 - B1)
        v.mul_(B2).addcmul_(g, g, value=1 - B2)
        p.addcdiv_(m, (v / BC2).sqrt().add_(EPS), value=-LR / BC1)


def _adam_tensors():
    n = 1 << 20
    return tuple(t for _ in range(3) for t in (torch.randn(n), torch.randn(n), torch.randn(n) * 0.1,
                                               torch.rand(n) * 0.01))


def _mlp():
    return nn.Sequential(nn.Linear(512, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(),
                         nn.Linear(1024, 10))


def _transformers(name: str) -> Workload | None:
    try:
        import transformers
    except ImportError:
        return None
    transformers.logging.set_verbosity_error()
    small = dict(vocab_size=512, num_hidden_layers=2, num_attention_heads=4, hidden_size=128,
                 intermediate_size=512, max_position_embeddings=128)
    configs = {
        "gpt2": ("GPT2Model", "GPT2Config", dict(vocab_size=512, n_embd=128, n_layer=2, n_head=4,
                                                 n_positions=128, use_cache=False)),
        "bert": ("BertModel", "BertConfig", small),
        "llama": ("LlamaModel", "LlamaConfig", dict(num_key_value_heads=2, use_cache=False, **small)),
        "t5": ("T5Model", "T5Config", dict(vocab_size=512, d_model=128, d_kv=32, d_ff=512, num_layers=2,
                                           num_heads=4, use_cache=False)),
        "vit": ("ViTModel", "ViTConfig", dict(image_size=64, patch_size=8, num_channels=3, hidden_size=128,
                                              num_hidden_layers=2, num_attention_heads=4,
                                              intermediate_size=512)),
    }
    model_name, config_name, kwargs = configs[name]
    if not hasattr(transformers, model_name):
        return None
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**kwargs)).eval()
    if name == "vit":
        return Workload(model, (torch.randn(4, 3, 64, 64),))
    ids = torch.randint(0, 512, (4, 64))
    if name == "t5":
        return Workload(_Keywords(model, ("input_ids", "decoder_input_ids")), (ids, ids[:, :32]))
    return Workload(model, (ids,))


class _Keywords(nn.Module):
    """Calls ``model`` with its positional arguments passed as the keywords ``names``."""

    def __init__(self, model: nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args, strict=True)))


CASES: dict[str, tuple[str, Callable[[], Workload | None]]] = {
    "softmax": ("softmax rows 512x1024", lambda: Workload(_softmax, (torch.randn(512, 1024),))),
    "layernorm": ("LayerNorm 512x1024", lambda: Workload(nn.LayerNorm(1024), (torch.randn(512, 1024),))),
    "gelu_mlp": ("Linear-GELU-Linear 256x512 (hidden 2048)", lambda: Workload(
        nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512)), (torch.randn(256, 512),))),
    "ln_gelu_residual": ("2x (LayerNorm, GELU, residual) 512x1024",
                         lambda: Workload(LnGeluResidual(), (torch.randn(512, 1024),))),
    "transformer_block": ("transformer block (attention + MLP) d256 8x128",
                          lambda: Workload(Block().eval(), (torch.randn(8, 128, 256),))),
    "convnet_eval": ("convnet + BatchNorm, eval, 16x3x32x32",
                     lambda: Workload(ConvNet().eval(), (torch.randn(16, 3, 32, 32),))),
    "convnet_train": ("convnet + BatchNorm, train step", lambda: Workload(
        WithLoss(ConvNet().train()), (torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))), "train")),
    "embedding_sum": ("embedding + sum, 256 bags of 32, d128",
                      lambda: Workload(EmbeddingSum(), (torch.randint(0, 50000, (256, 32)),))),
    "mlp_train": ("MLP 512-1024-1024-10 train step, batch 256", lambda: Workload(
        WithLoss(_mlp()), (torch.randn(256, 512), torch.randint(0, 10, (256,))), "train")),
    "adam": ("Adam update, functional, 3x1M", lambda: Workload(_adam, _adam_tensors())),
    "adam_inplace": ("Adam update, in place, 3x1M", lambda: Workload(_adam_inplace, _adam_tensors(), "inplace")),
    **{name: (f"{name} (transformers, 2 layers, d128, 4x64)", lambda name=name: _transformers(name))
       for name in ("gpt2", "bert", "llama", "t5", "vit")},
}
QUICK = ("softmax", "layernorm", "gelu_mlp", "mlp_train", "adam", "gpt2")


def make(name: str) -> Workload | None:
    torch.manual_seed(0)  # the same model and inputs in every process (the warm compile's too)
    return CASES[name][1]()


# -- running a variant ---------------------------------------------------------------------


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
    """One compiled (or eager) copy of a workload: ``first()`` is the first call (timed),
    ``collect(first())`` what is compared with eager, ``step()`` one steady-state call."""

    first: Callable[[], Any]
    step: Callable[[], Any]
    # what ``first()`` returned, turned into what is compared (copies of the mutated inputs),
    # outside the timed first call
    collect: Callable[[Any], list[torch.Tensor]] = lambda out: out


def variant(work: Workload, compiler: Callable[[Any], Any]) -> Variant:
    """``work`` on its own copy of the model (and optimizer, and mutated inputs), compiled by
    ``compiler`` (identity: eager)."""
    fn = copy.deepcopy(work.fn) if isinstance(work.fn, nn.Module) else work.fn
    args = tuple(a.clone() for a in work.args) if work.kind == "inplace" else work.args
    compiled = compiler(fn)
    if work.kind == "infer":
        def step():
            with torch.no_grad():
                return compiled(*args)

        return Variant(lambda: _tensors(step()), step)
    if work.kind == "inplace":
        def mutate():
            with torch.no_grad():
                compiled(*args)

        return Variant(mutate, mutate, lambda _: [a.clone() for a in args])
    params = list(fn.parameters())
    opt = torch.optim.SGD(params, lr=0.01)

    def train(keep: bool):
        loss = compiled(*args)
        loss.backward()
        kept = [loss.detach(), *(p.grad.clone() for p in params), *(b.clone() for b in fn.buffers())] if keep else []
        opt.step()
        opt.zero_grad(set_to_none=True)
        return kept

    return Variant(lambda: train(True), lambda: train(False))


def _torch_compile(fn):
    return torch.compile(fn)


def _kiln_compile(fn):
    return kiln.compile(fn)


def _add_one(x):
    return (x + 1).sin()


def source_digest() -> str:
    """A digest of kiln.inductor's and kiln.aotgrad's Python sources as they are on disk now
    (others may edit them while this runs: a warm process would then run other code)."""
    import kiln.aotgrad
    import kiln.inductor

    digest = hashlib.sha256()
    for package in (kiln.inductor, kiln.aotgrad):
        for root in package.__path__:
            for path in sorted(Path(root).rglob("*.py")):
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def pay_imports(kiln_only: bool) -> None:
    """Compile, run and differentiate a one-op function with each compiler (throwaway caches),
    so that later first calls pay no imports or per-process setup."""
    x = torch.randn(8, requires_grad=True)
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as d:
        kiln.compile(_add_one, options={"inductor.cache_dir": d})(x).sum().backward()
    kiln.reset()
    if not kiln_only:
        with torch._inductor.utils.fresh_cache():
            torch.compile(_add_one)(x).sum().backward()
        torch._dynamo.reset()


# -- counting kernels ------------------------------------------------------------------------


@dataclass(slots=True)
class Counts:
    """Per compiled graph: kiln's kernels and ATen calls, torch's kernels; kiln's warnings."""

    kiln: list[int] = field(default_factory=list)
    kiln_externs: list[int] = field(default_factory=list)
    kiln_fallbacks: dict[str, str] = field(default_factory=dict)
    torch: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


_FUSED = re.compile(r"^(cpp_fused_\w+) = async_compile", re.MULTILINE)


def install_counters(counts: Counts) -> None:
    """Wrap (without editing either package) the functions through which each compiler's graphs
    pass, and collect kiln's warnings."""
    from torch._inductor.codecache import PyCodeCache

    import kiln.inductor._api as kiln_api
    import kiln.inductor._compile as kiln_compile

    compile_graph = kiln_compile.compile_graph

    def counting_compile_graph(gm, config=None, builders=None, group=None):
        compiled = compile_graph(gm, config, builders, group)
        counts.kiln.append(compiled.kernels)
        counts.kiln_externs.append(compiled.externs)
        counts.kiln_fallbacks.update(compiled.fallbacks)
        return compiled

    kiln_compile.compile_graph = counting_compile_graph
    if kiln_api.compile_graph is compile_graph:  # aten_compiler's own binding of the name
        kiln_api.compile_graph = counting_compile_graph
    load = PyCodeCache.load_by_key_path.__func__

    def counting_load(cls, key, path, *args, **kwargs):
        with open(path) as f:
            counts.torch.append(len(set(_FUSED.findall(f.read()))))
        return load(cls, key, path, *args, **kwargs)

    PyCodeCache.load_by_key_path = classmethod(counting_load)

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage().splitlines()[0]
            if record.exc_info and record.exc_info[1] is not None:
                error = record.exc_info[1]
                message += f" [{type(error).__name__}: {(str(error).splitlines() or [''])[0]}]"
            counts.warnings.append(message)

    logging.getLogger("kiln").addHandler(Collect(logging.WARNING))


def _reset_counts(counts: Counts) -> None:
    for name in ("kiln", "kiln_externs", "torch", "warnings"):
        getattr(counts, name).clear()
    counts.kiln_fallbacks.clear()


# -- one case --------------------------------------------------------------------------------


@dataclass(slots=True)
class Row:
    name: str
    eager_ms: float = math.nan
    torch_ms: float = math.nan
    kiln_ms: float = math.nan
    torch_cold_s: float = math.nan
    kiln_cold_s: float = math.nan
    kiln_warm_s: float = math.nan
    kiln_process_cold_s: float = math.nan  # the first call in a new process with an empty cache
    torch_kernels: str = "-"
    kiln_kernels: str = "-"
    eager_mark: str = ""
    torch_mark: str = ""
    kiln_mark: str = ""  # "", "MISMATCH", "ERROR" or "FALLBACK"
    notes: list[str] = field(default_factory=list)


def _first_call(make_variant: Callable[[], Variant]) -> tuple[Variant, list[torch.Tensor], float]:
    from torch._subclasses.fake_tensor import FakeTensorMode

    FakeTensorMode.cache_clear()
    v = make_variant()  # the workload's own copy of the model (a deepcopy): not the compiler's time
    start = time.perf_counter()
    out = v.first()
    seconds = time.perf_counter() - start
    return v, v.collect(out), seconds


def _check(got: list[torch.Tensor], expected: list[torch.Tensor]) -> tuple[str, str]:
    """("" | "MISMATCH", a note with the largest difference)."""
    try:
        torch.testing.assert_close(got, expected)
        return "", ""
    except AssertionError as e:
        keep = ("Mismatched elements", "Greatest absolute", "Greatest relative", "The failure occurred")
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        detail = "; ".join([line for line in lines if line.startswith(keep)] or lines[:1])
        return "MISMATCH", detail


def _kernels(per_graph: list[int]) -> str:
    return "+".join(map(str, per_graph)) if per_graph else "0"


def _warm(name: str, threads: int, cache_dir: str) -> dict[str, Any]:
    env = dict(os.environ, KILN_CACHE_DIR=cache_dir, KILN_LOGS="")
    cmd = [sys.executable, os.path.abspath(__file__), "--warm-case", name, "--threads", str(threads)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"


def _cold(row: Row, who: str, work: Workload, expected: list[torch.Tensor],
          compiler: Callable[[Any], Any], runs: dict[str, Variant]) -> None:
    """``who``'s (kiln's, torch's) first call: its seconds, its check against eager, its
    variant in ``runs``; an exception is recorded, not raised."""
    label = "torch.compile" if who == "torch" else who
    try:
        runs[who], got, seconds = _first_call(lambda: variant(work, compiler))
    except Exception as e:  # a compiler's failure is a result, not the end of the run
        setattr(row, f"{who}_mark", "ERROR")
        row.notes.append(f"{label} ERROR: {_error(e)}")
        return
    setattr(row, f"{who}_cold_s", seconds)
    mark, detail = _check(got, expected)
    setattr(row, f"{who}_mark", mark)
    row.notes += [f"{label} {mark}: {detail}"] if detail else []


def _kiln_notes(row: Row, counts: Counts) -> None:
    row.kiln_kernels = _kernels(counts.kiln)
    if counts.warnings and not row.kiln_mark:
        row.kiln_mark = "FALLBACK"  # a graph kiln could not compile ran as captured
    row.notes += [f"kiln warning: {w}" for w in dict.fromkeys(counts.warnings)]
    if counts.kiln_fallbacks:
        row.notes.append("kiln ATen calls: " + ", ".join(f"{op} ({why})" for op, why in counts.kiln_fallbacks.items()))
    if any(counts.kiln_externs):
        row.notes.append(f"kiln ATen calls per graph: {_kernels(counts.kiln_externs)}")


def run_case(name: str, threads: int, rounds: int, target_s: float, counts: Counts, source: str) -> Row:
    """One table row: cold and warm compiles, checks, kernels, steady-state times."""
    row = Row(name)
    work = make(name)
    if work is None:
        row.notes.append("skipped: transformers lacks this model")
        return row
    runs = {"eager": variant(work, lambda fn: fn)}
    expected = runs["eager"].collect(runs["eager"].first())
    _reset_counts(counts)
    cache_dir = tempfile.mkdtemp(prefix="kiln-bench-cold-")
    os.environ["KILN_CACHE_DIR"] = cache_dir
    kiln.reset()
    _cold(row, "kiln", work, expected, _kiln_compile, runs)
    _kiln_notes(row, counts)
    torch._dynamo.reset()
    with torch._inductor.utils.fresh_cache():
        _cold(row, "torch", work, expected, _torch_compile, runs)
    row.torch_kernels = _kernels(counts.torch)
    if "kiln" in runs:
        # a restarted program: a new process with an empty cache directory (cold), then another
        # one with what it left there (warm); both run this case alone, as the user's program
        process_dir = tempfile.mkdtemp(prefix="kiln-bench-process-")
        cold = _warm(name, threads, process_dir)
        row.kiln_process_cold_s = cold.get("first_s", math.nan)
        warm = _warm(name, threads, process_dir)
        row.kiln_warm_s = warm.get("first_s", math.nan)
        shutil.rmtree(process_dir, ignore_errors=True)
        if "error" in cold or "error" in warm:
            row.notes.append(f"kiln process failed: {cold.get('error') or warm.get('error')}")
        elif warm["compiled"] or warm["graph_misses"] or warm["frame_captures"]:
            edited = ("; kiln's sources changed on disk during the run (edited in parallel), so it ran "
                      "other code" if warm["source"] != source else "")
            row.notes.append(f"kiln warm process captured {warm['frame_captures']} frames "
                             f"({warm['frames_loaded']} loaded), compiled {warm['graph_misses']} captured graphs "
                             f"({warm['graph_hits']} loaded) and {warm['compiled']} libraries again "
                             f"({warm['disk_hits']} disk hits){edited}")
    shutil.rmtree(cache_dir, ignore_errors=True)
    times = _steady(runs, rounds, target_s, row)
    row.eager_ms, row.torch_ms, row.kiln_ms = (times.get(k, math.nan) for k in ("eager", "torch", "kiln"))
    if work.kind == "infer" and "kiln" in runs and row.kiln_mark in ("", "FALLBACK"):
        mark, detail = _check(_tensors(runs["kiln"].step()), _tensors(runs["eager"].step()))
        if mark:
            row.kiln_mark = mark
            row.notes.append(f"kiln {mark} on a steady-state call: {detail}")
    return row


def _steady(runs: dict[str, Variant], rounds: int, target_s: float, row: Row) -> dict[str, float]:
    """Median ms per call of each variant: warm-up, then interleaved rounds of ``number`` calls."""
    for name, v in list(runs.items()):
        try:
            for _ in range(3):
                v.step()
        except Exception as e:
            del runs[name]
            setattr(row, f"{name}_mark", "ERROR")
            row.notes.append(f"{name} ERROR after its first call: {_error(e)}")
    start = time.perf_counter()
    runs["eager"].step()
    number = max(1, min(1000, int(target_s / max(time.perf_counter() - start, 1e-6))))
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, v in runs.items():
            start = time.perf_counter()
            for _ in range(number):
                v.step()
            samples[name].append((time.perf_counter() - start) / number * 1e3)
    return {name: statistics.median(s) for name, s in samples.items()}


def warm_main(name: str, threads: int) -> None:
    """kiln's first call of ``name`` in this new process (cold or warm, as the cache directory
    finds it), as one JSON line."""
    from kiln.inductor import InductorConfig, cache_root

    torch.set_num_threads(threads)
    pay_imports(kiln_only=True)
    work = make(name)
    _, _, seconds = _first_call(lambda: variant(work, _kiln_compile))
    builder = kiln.session().kernels.get(str(cache_root(InductorConfig())))  # none: no graph had a kernel
    compiled, hits = (builder.stats.compiled, builder.stats.disk_hits) if builder else (0, 0)
    graphs = kiln.session().graph_cache
    print(json.dumps({"first_s": seconds, "compiled": compiled, "disk_hits": hits, "graph_hits": graphs.hits,
                      "frames_loaded": graphs.frames_loaded, "frame_captures": kiln.session().stats.captures,
                      "graph_misses": graphs.misses + graphs.uncacheable, "source": source_digest()}))


# -- report ------------------------------------------------------------------------------------


def _ms(value: float, mark: str = "") -> str:
    text = "-" if math.isnan(value) else f"{value:.3f}" if value < 1 else f"{value:.2f}"
    return f"{text} {mark}".strip()


def _s(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}" if value < 0.1 else f"{value:.2f}"


def _geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0 and not math.isnan(v)]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


def report(threads: int, rows: list[Row], load: float) -> None:
    print(f"\n### {threads} thread{'s' if threads > 1 else ''} (load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs)\n")
    print("| case | eager ms | torch.compile ms | kiln ms | kiln/torch speed (torch ms / kiln ms) "
          "| cold compile s torch | cold s kiln | cold s kiln, new process | warm s kiln | kernels torch "
          "| kernels kiln |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.name} | {_ms(r.eager_ms)} | {_ms(r.torch_ms, r.torch_mark)} | {_ms(r.kiln_ms, r.kiln_mark)} "
              f"| {_s(r.torch_ms / r.kiln_ms)} | {_s(r.torch_cold_s)} | {_s(r.kiln_cold_s)} "
              f"| {_s(r.kiln_process_cold_s)} | {_s(r.kiln_warm_s)} | {r.torch_kernels} | {r.kiln_kernels} |")
    ok = [r for r in rows if not math.isnan(r.kiln_ms) and not math.isnan(r.torch_ms)]
    torch_speedup = _geomean([r.eager_ms / r.torch_ms for r in ok])
    kiln_speedup = _geomean([r.eager_ms / r.kiln_ms for r in ok])
    print(f"\ngeomean speedup vs eager over {len(ok)} cases: torch.compile {torch_speedup:.2f}x, "
          f"kiln {kiln_speedup:.2f}x; kiln/torch speed {kiln_speedup / torch_speedup:.2f}")
    print(f"geomean cold compile kiln/torch: {_geomean([r.kiln_cold_s / r.torch_cold_s for r in ok]):.2f}; "
          f"kiln warm/cold (new processes): {_geomean([r.kiln_warm_s / r.kiln_process_cold_s for r in ok]):.3f}, "
          f"worst {max((r.kiln_warm_s / r.kiln_process_cold_s for r in ok), default=math.nan):.3f}")
    notes = [(r.name, n) for r in rows for n in r.notes]
    if notes:
        print("\nNotes:\n")
        for name, note in notes:
            print(f"- {name}: {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"cases {','.join(QUICK)}, fewer rounds")
    parser.add_argument("--cases", default=None, help=f"comma list of {','.join(CASES)}")
    parser.add_argument("--threads", default="1,2", help="comma list of torch.set_num_threads values")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 7, quick 3)")
    parser.add_argument("--warm-case", default=None, help=argparse.SUPPRESS)  # the warm-compile child
    args = parser.parse_args()
    threads = [int(n) for n in args.threads.split(",")]
    if args.warm_case is not None:
        warm_main(args.warm_case, threads[0])
        return
    names = args.cases.split(",") if args.cases else list(QUICK if args.quick else CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    rounds = args.rounds or (3 if args.quick else 7)
    target_s = 0.03 if args.quick else 0.08
    counts = Counts()
    install_counters(counts)
    pay_imports(kiln_only=False)
    source = source_digest()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; {rounds} rounds; kiln cache: a fresh "
          f"temporary directory per case (cold), reused by a new process (warm)")
    for n in threads:
        torch.set_num_threads(n)
        load, rows = os.getloadavg()[0], []
        for name in names:
            print(f"[{n} threads] {name} ...", file=sys.stderr, flush=True)
            row = run_case(name, n, rounds, target_s, counts, source)
            row.name = CASES[name][0]
            rows.append(row)
        report(n, rows, load)


if __name__ == "__main__":
    main()
