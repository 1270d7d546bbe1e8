"""OpInfo sweep: torch's OpInfo database, op by op, compiled by kiln's ``inductor`` backend
(and torch.compile's) on CPU float32 samples, each result compared with eager.

For each op of ``op_db`` that supports float32 on CPU, the first samples (3 by default) of
``op.sample_inputs("cpu", torch.float32)`` are called through a small Python function
``call(input, *args, **kwargs)`` (the op's ``op`` inside), as the compiled code would see
them. Samples are made anew for every run from one seed, so each run gets equal inputs with
the same strides and storage offsets, and an op that mutates its input cannot spoil the next
run. The run, in order:

1. eager, twice, the RNG seeded differently each time: a sample whose eager call raises, or
   whose two results differ (a random op), is left out; an op with no sample left, or named
   in ``RANDOM_OPS``, is skipped;
2. kiln: ``kiln.compile(call, backend="inductor", fullgraph=False)`` with
   ``kiln.config.raise_internal_errors`` set, so that kiln's own errors are counted rather
   than hidden by its eager fallback;
3. torch.compile (``backend="inductor"``), unless ``--no-torch``.

Each compiled result is compared with eager by ``torch.testing.assert_close`` (``equal_nan``,
``RTOL``/``ATOL`` for both compilers). The verdict per op and compiler is ``pass``,
``mismatch`` (a result differs) or ``error`` (the compiled call raised; the first failing
sample decides). For kiln the record also says what it compiled: graphs (a pass without one
ran eagerly), graph breaks, the ATen graphs kiln.inductor compiled, their C++ kernels and
ATen calls, the ATen ops it did not lower, and the warnings of graphs aotgrad refused.
``kiln.reset()`` and ``torch._dynamo.reset()`` run between ops; kiln's disk caches of
compiled graphs and of the recompile memory are off, so no op starts from another's state.

Run: ``python benchmarks/inductor_opinfo.py [--ops add,div.floor_rounding] [--limit N]
[--no-torch] [--json PATH]``; the summary table comes last, then kiln's mismatches and
errors with a one-line reason each.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import logging
import random
import signal
import sys
import time
import traceback
import types
import unittest
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

import kiln

SAMPLES = 3
SEED = 0
RTOL = 1e-5
ATOL = 1e-5
TIMEOUT_S = 120

# Ops whose results are random or uninitialized memory; the two eager runs catch the rest.
RANDOM_OPS = frozenset({
    "bernoulli", "cauchy", "empty", "empty_like", "empty_permuted", "empty_strided",
    "exponential", "geometric", "log_normal", "multinomial", "new_empty", "new_empty_strided",
    "nn.functional.alpha_dropout", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.feature_alpha_dropout",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "nn.functional.rrelu", "normal", "pca_lowrank", "rand_like", "randint", "randint_like",
    "randn", "randn_like", "resize_", "resize_as_", "svd_lowrank", "uniform",
})


# -- op_db and its samples -------------------------------------------------------------------

def load_op_db() -> list[Any]:
    """torch's OpInfo list (``common_methods_invocations.op_db``).

    torch's test utilities import ``expecttest``, which kiln's environments do not install: a
    stand-in module takes its place (only its TestCase base class is used at import). They
    also freeze ``torch.backends`` flags at import (``disable_global_flags``); the previous
    setting is restored so that importing them changes nothing for other code."""
    if "expecttest" not in sys.modules and importlib.util.find_spec("expecttest") is None:
        stand_in = types.ModuleType("expecttest")
        stand_in.TestCase = unittest.TestCase  # type: ignore[attr-defined]
        sys.modules["expecttest"] = stand_in
    flag = "__allow_nonbracketed_mutation_flag"
    mutable = getattr(torch.backends, flag, True)
    from torch.testing._internal.common_methods_invocations import op_db

    setattr(torch.backends, flag, mutable)
    return list(op_db)


def full_name(op: Any) -> str:
    """``name`` or ``name.variant`` (``div.floor_rounding``): unique within ``op_db``."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def select_ops(ops: list[Any], names: list[str] | None = None, limit: int | None = None) -> list[Any]:
    """The ops named (a full name, or a name for all its variants), at most ``limit``."""
    if names:
        wanted = set(names)
        ops = [op for op in ops if op.name in wanted or full_name(op) in wanted]
    return ops[:limit] if limit is not None else ops


def fresh_samples(op: Any, count: int = SAMPLES) -> list[Any]:
    """The first ``count`` CPU float32 samples of ``op``, made anew from ``SEED``."""
    torch.manual_seed(SEED)
    random.seed(SEED)
    samples = []
    for sample in op.sample_inputs("cpu", torch.float32, requires_grad=False):
        samples.append(sample)
        if len(samples) == count:
            break
    return samples


def make_caller(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A new Python function calling ``fn``: what both compilers compile."""

    def call(input: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(input, *args, **kwargs)

    return call


def call_sample(fn: Callable[..., Any], sample: Any) -> Any:
    return fn(sample.input, *sample.args, **sample.kwargs)


def compare(actual: Any, expected: Any) -> str | None:
    """None when ``actual`` matches ``expected`` (assert_close, NaNs equal), else why not."""
    try:
        torch.testing.assert_close(actual, expected, rtol=RTOL, atol=ATOL, equal_nan=True)
    except Exception as e:  # AssertionError, or a TypeError for results of different kinds
        return one_line(str(e))
    return None


def one_line(text: str, width: int = 240) -> str:
    line = "; ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return line if len(line) <= width else line[: width - 3] + "..."


# -- verdicts ----------------------------------------------------------------------------------

@dataclass(slots=True)
class Verdict:
    """One compiler's result on one op; ``where``: the innermost frame of kiln's (or torch's)
    own code in the error's traceback."""

    status: str  # pass | mismatch | error
    reason: str = ""
    where: str = ""
    seconds: float = 0.0


@dataclass(slots=True)
class KilnRecord:
    """What kiln made of one op, beside its verdict."""

    graphs: int = 0
    breaks: list[str] = field(default_factory=list)
    aten_graphs: int = 0  # ATen graphs kiln.inductor compiled (forward graphs here)
    kernels: int = 0
    aten_calls: int = 0
    fallbacks: dict[str, str] = field(default_factory=dict)  # ATen op not lowered -> why
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class OpResult:
    name: str
    skipped: str = ""  # why, when the op did not run
    samples: int = 0
    kiln: Verdict | None = None
    kiln_record: KilnRecord | None = None
    torch: Verdict | None = None


def describe_error(error: BaseException) -> tuple[str, str]:
    """(one-line reason, innermost compiler frame) of ``error``, through its chained causes
    (a BackendCompilerFailed says what the backend raised)."""
    chain = [error]
    while chain[-1].__cause__ is not None and len(chain) < 8:
        chain.append(chain[-1].__cause__)
    root = chain[-1]
    message = str(root).strip().splitlines()
    reason = f"{type(root).__name__}: {message[0] if message else ''}"
    # a compiler's diagnostic (a CppBuildError's first line is the command)
    diagnostic = next((line for line in message[1:] if "error:" in line), None)
    if diagnostic is not None:
        reason = f"{type(root).__name__}: {diagnostic.split('error:', 1)[1].strip()}"
    if root is not error:
        reason = f"{type(error).__name__} <- {reason}"
    where = ""
    for frame in traceback.extract_tb(root.__traceback__):
        path = frame.filename.replace("\\", "/")
        if path.startswith("<kiln."):  # generated code: a graph's, a wrapper's
            where = f"{path}:{frame.lineno}"
            continue
        for marker in ("/kiln/", "/torch/_inductor/", "/torch/_dynamo/"):
            if marker in path:
                where = f"{marker.strip('/')}/{path.rsplit(marker, 1)[1]}:{frame.lineno} {frame.name}"
    return one_line(reason), where


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Raise TimeoutError in the main thread after ``seconds`` (0: no limit)."""
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def eager_references(op: Any, count: int = SAMPLES) -> tuple[dict[int, Any], str]:
    """Eager results of ``op``'s usable samples (by sample index), or why none is usable."""
    call = make_caller(op.op)
    results: dict[int, Any] = {}
    why = Counter()
    runs = []
    for seed in (1, 2):
        samples = fresh_samples(op, count)
        outputs = []
        for sample in samples:
            torch.manual_seed(SEED + seed)
            try:
                outputs.append((True, call_sample(call, sample)))
            except Exception as e:
                outputs.append((False, describe_error(e)[0]))
        runs.append(outputs)
    if not runs[0]:
        return results, "no float32 CPU samples"
    for index, ((ok, first), (_, second)) in enumerate(zip(*runs, strict=True)):
        if not ok:
            why[f"eager raises: {first}"] += 1
        elif compare(second, first) is not None:
            why["nondeterministic"] += 1
        else:
            results[index] = first
    return results, "" if results else why.most_common(1)[0][0]


def run_compiled(op: Any, compile_fn: Callable[[Callable[..., Any]], Callable[..., Any]],
                 expected: dict[int, Any], count: int = SAMPLES) -> Verdict:
    """Compile a caller of ``op`` once and run every usable sample through it."""
    start = time.perf_counter()
    compiled = compile_fn(make_caller(op.op))
    samples = fresh_samples(op, count)
    verdict = Verdict("pass")
    for index, reference in expected.items():
        torch.manual_seed(SEED + 3)
        try:
            actual = call_sample(compiled, samples[index])
        except Exception as e:
            reason, where = describe_error(e)
            verdict = Verdict("error", f"sample {index}: {reason}", where)
            break
        problem = compare(actual, reference)
        if problem is not None:
            verdict = Verdict("mismatch", f"sample {index}: {problem}")
            break
    verdict.seconds = time.perf_counter() - start
    return verdict


# -- kiln's records -----------------------------------------------------------------------

class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(one_line(record.getMessage(), 200))


@contextlib.contextmanager
def kiln_recording() -> Iterator[tuple[list[Any], _Warnings]]:
    """The CompiledGraphs kiln.inductor makes meanwhile, and kiln's logged warnings.

    kiln.inductor reports what a graph is made of on its ``CompiledGraph``, which the
    backend keeps inside aotgrad's runtime; the benchmark wraps the ``compile_graph`` that
    ``aten_compiler`` calls to see them (kiln's private layout: when it changes, the records
    stay empty and the verdicts are unaffected)."""
    graphs: list[Any] = []
    handler = _Warnings()
    logger = logging.getLogger("kiln")
    logger.addHandler(handler)
    try:
        api = importlib.import_module("kiln.inductor._api")
    except ImportError:
        api = None
    original = getattr(api, "compile_graph", None)
    if original is not None:
        def recording(*args: Any, **kwargs: Any) -> Any:
            compiled = original(*args, **kwargs)
            graphs.append(compiled)
            return compiled

        api.compile_graph = recording
    try:
        yield graphs, handler
    finally:
        if original is not None:
            api.compile_graph = original
        logger.removeHandler(handler)


def run_kiln(op: Any, expected: dict[int, Any], count: int = SAMPLES) -> tuple[Verdict, KilnRecord]:
    """``op`` under ``kiln.compile(backend="inductor")``: the verdict and what kiln made."""
    kiln.reset()
    previous = kiln.config.raise_internal_errors, kiln.config.recompile_memory, kiln.config.graph_cache
    kiln.config.raise_internal_errors = True
    # every op starts from nothing, as under torch.compile: its samples are called through one
    # shared caller, whose dynamic dimensions the disk's recompile memory would carry from op to op
    kiln.config.recompile_memory = kiln.config.graph_cache = False
    try:
        with kiln_recording() as (graphs, logged):
            verdict = run_compiled(
                op, lambda fn: kiln.compile(fn, backend="inductor", fullgraph=False), expected, count)
        stats = kiln.session().stats
        record = KilnRecord(
            graphs=stats.unique_graphs,
            breaks=[one_line(str(b), 200) for b in stats.breaks[:3]],
            aten_graphs=len(graphs),
            kernels=sum(getattr(g, "kernels", 0) for g in graphs),
            aten_calls=sum(getattr(g, "externs", 0) for g in graphs),
            fallbacks={name: why for g in graphs for name, why in getattr(g, "fallbacks", {}).items()},
            warnings=logged.messages[:3],
        )
    finally:
        kiln.config.raise_internal_errors, kiln.config.recompile_memory, kiln.config.graph_cache = previous
        kiln.reset()
    return verdict, record


def run_torch(op: Any, expected: dict[int, Any], count: int = SAMPLES) -> Verdict:
    """``op`` under ``torch.compile(backend="inductor")``."""
    torch._dynamo.reset()
    try:
        return run_compiled(
            op, lambda fn: torch.compile(fn, backend="inductor", fullgraph=False), expected, count)
    finally:
        torch._dynamo.reset()


def run_op(op: Any, *, with_torch: bool, count: int = SAMPLES, timeout: int = TIMEOUT_S) -> OpResult:
    """One op through eager, kiln and (``with_torch``) torch.compile."""
    result = OpResult(full_name(op))
    if op.name in RANDOM_OPS:
        result.skipped = "random"
        return result
    if torch.float32 not in op.supported_dtypes("cpu"):
        result.skipped = "no float32 on CPU"
        return result
    try:
        with time_limit(timeout):
            expected, why = eager_references(op, count)
    except TimeoutError:
        expected, why = {}, "eager timed out"
    if not expected:
        result.skipped = why
        return result
    result.samples = len(expected)
    try:
        with time_limit(timeout):
            result.kiln, result.kiln_record = run_kiln(op, expected, count)
    except TimeoutError as e:
        result.kiln, result.kiln_record = Verdict("error", f"TimeoutError: {e}"), KilnRecord()
        kiln.reset()
    if with_torch:
        try:
            with time_limit(timeout):
                result.torch = run_torch(op, expected, count)
        except TimeoutError as e:
            result.torch = Verdict("error", f"TimeoutError: {e}")
            torch._dynamo.reset()
    return result


# -- report --------------------------------------------------------------------------------

def _counts(verdicts: list[Verdict]) -> Counter:
    return Counter(v.status for v in verdicts)


def summarize(results: list[OpResult], seconds: float) -> str:
    """The summary table, then kiln's mismatches and errors, one line each."""
    ran = [r for r in results if r.kiln is not None]
    skipped = Counter(r.skipped.split(":")[0] for r in results if r.skipped)
    lines = [f"ops: {len(results)} selected, {len(ran)} run, {sum(skipped.values())} skipped "
             f"({', '.join(f'{why}: {n}' for why, n in skipped.most_common()) or 'none'}); "
             f"{seconds:.0f} s in all"]
    lines.append(f"{'':15}{'pass':>6}{'mismatch':>10}{'error':>7}{'total':>7}{'seconds':>9}")
    kiln_counts = _counts([r.kiln for r in ran])
    kiln_time = sum(r.kiln.seconds for r in ran)
    lines.append(f"{'kiln':15}{kiln_counts['pass']:>6}{kiln_counts['mismatch']:>10}"
                 f"{kiln_counts['error']:>7}{len(ran):>7}{kiln_time:>9.1f}")
    torched = [r for r in ran if r.torch is not None]
    if torched:
        torch_counts = _counts([r.torch for r in torched])
        torch_time = sum(r.torch.seconds for r in torched)
        lines.append(f"{'torch.compile':15}{torch_counts['pass']:>6}{torch_counts['mismatch']:>10}"
                     f"{torch_counts['error']:>7}{len(torched):>7}{torch_time:>9.1f}")
        both = Counter((r.kiln.status, r.torch.status) for r in torched)
        lines.append("kiln vs torch.compile on the same ops: " + ", ".join(
            f"{k}/{t}: {n}" for (k, t), n in sorted(both.items())))
    passes = [r for r in ran if r.kiln.status == "pass"]
    with_graph = [r for r in passes if r.kiln_record.graphs]
    with_kernel = [r for r in with_graph if r.kiln_record.kernels]
    inductor = [r for r in with_graph if r.kiln_record.aten_graphs]
    broken = [r for r in passes if not r.kiln_record.graphs and r.kiln_record.breaks]
    lines.append(f"kiln passes: {len(passes)}, with a graph: {len(with_graph)} (compiled by "
                 f"kiln.inductor: {len(inductor)}, with a C++ kernel: {len(with_kernel)}), "
                 f"without: {len(passes) - len(with_graph)} (a graph break or eager fallback: "
                 f"{len(broken)}, no op to compile: {len(passes) - len(with_graph) - len(broken)})")
    fallbacks = Counter(name for r in ran for name in r.kiln_record.fallbacks)
    common = ", ".join(f"{name} {n}" for name, n in fallbacks.most_common(10))
    lines.append(f"ATen ops kiln.inductor ran as ATen calls (ops using them): {common or 'none'}")
    for status, title in (("mismatch", "mismatches"), ("error", "errors")):
        failing = sorted((r for r in ran if r.kiln.status == status), key=lambda r: (r.kiln.where, r.kiln.reason))
        lines.append(f"kiln {title} ({len(failing)}):")
        for r in failing:
            other = f" [torch.compile: {r.torch.status}]" if r.torch is not None else ""
            where = f" at {r.kiln.where}" if r.kiln.where else ""
            lines.append(f"  {r.name}{other}: {r.kiln.reason}{where}")
    return "\n".join(lines)


def sweep(ops: list[Any], *, with_torch: bool, count: int = SAMPLES, timeout: int = TIMEOUT_S,
          progress: bool = True) -> list[OpResult]:
    """Every op of ``ops`` through ``run_op``, a line of progress each (to stderr)."""
    results = []
    for i, op in enumerate(ops):
        result = run_op(op, with_torch=with_torch, count=count, timeout=timeout)
        results.append(result)
        if progress:
            verdicts = result.skipped or " ".join(
                f"{who}={v.status}({v.seconds:.1f}s)" for who, v in (("kiln", result.kiln), ("torch", result.torch))
                if v is not None)
            print(f"[{i + 1}/{len(ops)}] {result.name}: {verdicts}", file=sys.stderr, flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated op names (name or name.variant)")
    parser.add_argument("--limit", type=int, help="at most this many ops (after --ops)")
    parser.add_argument("--samples", type=int, default=SAMPLES, help="samples per op")
    parser.add_argument("--no-torch", action="store_true", help="skip torch.compile (slow)")
    parser.add_argument("--timeout", type=int, default=TIMEOUT_S, help="seconds per op and compiler (0: none)")
    parser.add_argument("--json", help="write every op's record here")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.ops.split(",") if n.strip()] if args.ops else None
    ops = select_ops(load_op_db(), names, args.limit)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = sweep(ops, with_torch=not args.no_torch, count=args.samples, timeout=args.timeout)
    seconds = time.perf_counter() - start
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in results], f, indent=1)
    print(summarize(results, seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
