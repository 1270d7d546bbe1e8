"""Running suites: each workload timed for eager, torch.compile and kiln in one process.

Per workload: kiln and torch.compile are reset, then each compiles it with a counting
``backend="eager"`` (the comparison is between frontends until kiln's own backends exist);
the first call of each is the compile time (the median of ``COMPILE_REPEATS`` first calls,
each after a reset); outputs are checked against eager; then the
three run interleaved, median of ``rounds`` rounds after warm-up. A call sequence (the
``recompiles`` suite) runs its calls once per compiler from a reset, counting graphs and
timing the whole sequence, compiles included. A cold compile (the ``scaling`` suite) runs
in fresh interpreters (``scaling.py``).
"""

from __future__ import annotations

import datetime
import json
import platform
import statistics
from typing import Any

import torch

import kiln
from kiln.demo import measure, outputs_match, time_once

from .scaling import ColdCompile, format_scaling, run_cold
from .suites import SUITES, CallSequence, Workload

__all__ = ["COMPILE_REPEATS", "compare", "format_table", "run_suites"]

COMPILE_REPEATS = 3  # first calls timed per compiler and workload (the median is reported)


class _Counting:
    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: Any, example_inputs: list[Any]) -> Any:
        self.graphs += 1
        return gm.forward


def run_workload(w: Workload, device: str, rounds: int) -> dict[str, Any]:
    """The figures of one workload (times in ms, compile times in s)."""
    import torch._dynamo

    fn, args = w.make(device)
    # Both explains run the call and reset their compiler: before anything is timed.
    with torch.no_grad():
        explained = kiln.explain(fn)(*args)
    torch_breaks = _torch_breaks(fn, args)
    with torch.no_grad():
        expected = fn(*args)
        row: dict[str, Any] = {"suite": w.suite, "name": w.name}
        firsts: dict[str, list[float]] = {"kiln": [], "torch": []}
        for _ in range(COMPILE_REPEATS):  # each from a reset: a single first call is noisy
            kiln.reset()
            torch._dynamo.reset()
            ours, theirs = _Counting(), _Counting()
            k = kiln.compile(fn, backend=ours)
            tc = torch.compile(fn, backend=theirs)
            firsts["kiln"].append(time_once(lambda k=k: k(*args), device))
            firsts["torch"].append(time_once(lambda tc=tc: tc(*args), device))
        row["kiln_compile_s"] = statistics.median(firsts["kiln"])
        row["torch_compile_s"] = statistics.median(firsts["torch"])
        row["matches_eager"] = outputs_match(k(*args), expected)
        row["kiln_graphs"], row["torch_graphs"] = ours.graphs, theirs.graphs
        row["kiln_breaks"] = explained.graph_break_count
        row["torch_breaks"] = torch_breaks
        row["break_reasons"] = [r.reason for r in explained.break_reasons]
        t = measure({"eager": lambda: fn(*args), "kiln": lambda: k(*args),
                     "torch.compile": lambda: tc(*args)}, device=device, rounds=rounds, number=5)
    row.update({f"{name}_ms": v * 1000 for name, v in t.items()})
    return row


def run_sequence(w: CallSequence, device: str) -> dict[str, Any]:
    """Graphs each compiler makes over a sequence of calls with changing inputs, whether
    every call matches eager, and the seconds the whole sequence takes (compiles included)."""
    import torch._dynamo

    row: dict[str, Any] = {"suite": w.suite, "name": w.name}
    fn, calls = w.make(device)
    with torch.no_grad():
        expected = []
        for args, before in calls:
            if before is not None:
                before()
            expected.append(fn(*args))
        row["calls"] = len(calls)
        row["eager_total_s"] = time_once(lambda: [fn(*a) for a, _ in calls], device)
        matches = True
        for name, compile_ in (("kiln", kiln.compile), ("torch", torch.compile)):
            kiln.reset()
            torch._dynamo.reset()
            counting = _Counting()
            compiled = compile_(fn, backend=counting)

            outs: list[Any] = []

            def run_all(compiled: Any = compiled, outs: list[Any] = outs) -> None:
                for args, before in calls:
                    if before is not None:
                        before()
                    outs.append(compiled(*args))

            row[f"{name}_total_s"] = time_once(run_all, device)
            row[f"{name}_graphs"] = counting.graphs
            matches = matches and all(outputs_match(o, e) for o, e in zip(outs, expected, strict=True))
        row["matches_eager"] = matches
    kiln.reset()
    torch._dynamo.reset()
    return row


def _torch_breaks(fn: Any, args: tuple) -> int:
    """torch.compile's graph break count for one call (torch._dynamo.explain)."""
    import torch._dynamo

    with torch.no_grad():
        report = torch._dynamo.explain(fn)(*args)
    torch._dynamo.reset()
    return report.graph_break_count


def run_suites(names: list[str], device: str, rounds: int = 15) -> dict[str, Any]:
    """Run the named suites; a JSON-ready dict with the machine, versions and every row."""
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise ValueError(f"unknown suite(s) {unknown}; known: {', '.join(SUITES)}")
    meta = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": device,
        "gpu": torch.cuda.get_device_name() if device.startswith("cuda") else None,
        "machine": platform.machine(), "processor": platform.processor(),
        "python": platform.python_version(), "torch": torch.__version__, "kiln": kiln.__version__,
        "backend": "eager (both)", "rounds": rounds,
    }
    rows = [_run_one(w, device, rounds) for n in names for w in SUITES[n]]
    return {"meta": meta, "rows": rows}


def _run_one(w: Any, device: str, rounds: int) -> dict[str, Any]:
    if isinstance(w, CallSequence):
        return run_sequence(w, device)
    if isinstance(w, ColdCompile):
        return run_cold(w, device)
    return run_workload(w, device, rounds)


def format_table(result: dict[str, Any]) -> str:
    """The rows as an aligned text table (ratios: kiln / torch.compile; < 1 is better)."""
    headers = ("suite", "workload", "eager ms", "kiln ms", "torch ms", "kiln/torch",
               "compile kiln s", "compile torch s", "graphs k/t", "breaks k/t", "ok")
    lines = []
    timed = [r for r in result["rows"] if "kiln_ms" in r]
    sequences = [r for r in result["rows"] if "kiln_total_s" in r]
    cold = [r for r in result["rows"] if "kiln_cold_s" in r]
    for r in timed:
        lines.append((r["suite"], r["name"], f"{r['eager_ms']:.4f}", f"{r['kiln_ms']:.4f}",
                      f"{r['torch.compile_ms']:.4f}", f"{r['kiln_ms'] / r['torch.compile_ms']:.2f}",
                      f"{r['kiln_compile_s']:.3f}", f"{r['torch_compile_s']:.3f}",
                      f"{r['kiln_graphs']}/{r['torch_graphs']}", f"{r['kiln_breaks']}/{r.get('torch_breaks', '?')}",
                      "yes" if r["matches_eager"] else "NO"))
    out = [_aligned(headers, lines)] if lines else []
    for table in ([_sequence_table(sequences)] if sequences else []) + ([format_scaling(cold)] if cold else []):
        out += ["", table] if out else [table]
    m = result["meta"]
    out.append(f"{m['date']}  {m['device']}{' ' + m['gpu'] if m['gpu'] else ''}  Python {m['python']}  "
               f"torch {m['torch']}  backend {m['backend']}  median of {m['rounds']} rounds")
    return "\n".join(out)


def _sequence_table(rows: list[dict[str, Any]]) -> str:
    headers = ("suite", "calls with changing inputs", "graphs kiln", "graphs torch",
               "sequence s: eager / kiln / torch", "ok")
    lines = [(r["suite"], r["name"], str(r["kiln_graphs"]), str(r["torch_graphs"]),
              f"{r['eager_total_s']:.4g} / {r['kiln_total_s']:.4g} / {r['torch_total_s']:.4g}",
              "yes" if r["matches_eager"] else "NO") for r in rows]
    return _aligned(headers, lines)


def _aligned(headers: tuple[str, ...], lines: list[tuple[str, ...]]) -> str:
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    return "\n".join(out)


def compare(old: dict[str, Any], new: dict[str, Any], threshold: float = 0.05) -> str:
    """Per workload: kiln's time and compile time, old vs new; regressions past ``threshold``."""
    before = {(r["suite"], r["name"]): r for r in old["rows"]}
    lines = []
    for r in new["rows"]:
        o = before.get((r["suite"], r["name"]))
        if o is None:
            lines.append(f"{r['suite']}/{r['name']}: new")
            continue
        for key in [k for k in ("kiln_ms", "kiln_compile_s", "kiln_graphs", "kiln_total_s", "kiln_cold_s", "kiln_peak_mb")
                    if r.get(k) is not None and o.get(k) is not None]:
            ratio = r[key] / o[key] if o[key] else float("inf")
            flag = "REGRESSION" if ratio > 1 + threshold else ("improved" if ratio < 1 - threshold else "")
            lines.append(f"{r['suite']}/{r['name']} {key}: {o[key]:.4g} -> {r[key]:.4g} ({ratio:.2f}x) {flag}".rstrip())
    return "\n".join(lines)


def save(result: dict[str, Any], path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
