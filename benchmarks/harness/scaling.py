"""The ``scaling`` suite: cold compile time and peak memory as programs grow, kiln vs
torch.compile, each measurement in a fresh interpreter (``_cold.py``), so that no compile
of one size or compiler warms the next.

Rows give seconds per unit (layer, loop iteration): capture should cost the same per layer
at 512 layers as at 8. The ``first compile`` row is a one-op function in a fresh process,
imports included (what a user waits for on a script's first call).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["ColdCompile", "run_cold", "scaling_cases"]

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TIMEOUT_S = 900


@dataclass(frozen=True)
class ColdCompile:
    """A cold compile of ``kind`` (see ``_cold.py``) at ``size`` units."""

    suite: str
    name: str
    kind: str
    size: int
    unit: str


def scaling_cases() -> list[ColdCompile]:
    return [ColdCompile("scaling", "first compile, x+1, fresh process", "first", 1, "call"),
            *(ColdCompile("scaling", f"transformer block x{n}", "block", n, "layer") for n in (8, 32, 128, 512)),
            *(ColdCompile("scaling", f"unrolled loop x{n}", "loop", n, "iteration") for n in (1000, 10000))]


def _child(case: ColdCompile, compiler: str, device: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.harness._cold", case.kind, str(case.size), compiler, device]
    env = dict(os.environ, KILN_LOGS="")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH", "")) if p)
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=_ROOT, env=env, timeout=_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{case.name} with {compiler} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_cold(case: ColdCompile, device: str) -> dict[str, Any]:
    """One row: both compilers' cold seconds, seconds per unit, peak memory, graphs."""
    row: dict[str, Any] = {"suite": case.suite, "name": case.name, "kind": case.kind,
                           "size": case.size, "unit": case.unit}
    for compiler in ("kiln", "torch"):
        got = _child(case, compiler, device)
        row[f"{compiler}_cold_s"] = got["cold_s"]
        row[f"{compiler}_import_s"] = got["import_s"]
        row[f"{compiler}_per_unit_ms"] = got["cold_s"] / case.size * 1000
        row[f"{compiler}_peak_mb"] = got.get("peak_mb")
        row[f"{compiler}_graphs"] = got["graphs"]
        row[f"{compiler}_matches_eager"] = got["matches_eager"]
        row[f"{compiler}_frontend_loaded"] = got["frontend_loaded"]
    # torch.compile's own mismatch (at 512 blocks on CPU its output drifts from eager's past
    # assert_close's tolerance) is shown in the table, not counted against kiln
    row["matches_eager"] = row["kiln_matches_eager"]
    return row


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def format_scaling(rows: list[dict[str, Any]]) -> str:
    """The scaling rows as a table (kiln/torch < 1: kiln compiles faster)."""
    from .run import _aligned

    def mb(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    headers = ("suite", "cold compile", "kiln s", "torch s", "kiln/torch", "kiln ms/unit",
               "torch ms/unit", "peak MB k/t", "graphs k/t", "ok k/t")
    lines = [(r["suite"], r["name"], f"{r['kiln_cold_s']:.3f}", f"{r['torch_cold_s']:.3f}",
              f"{r['kiln_cold_s'] / r['torch_cold_s']:.2f}",
              f"{r['kiln_per_unit_ms']:.2f}/{r['unit']}", f"{r['torch_per_unit_ms']:.2f}/{r['unit']}",
              f"{mb(r['kiln_peak_mb'])}/{mb(r['torch_peak_mb'])}",
              f"{r['kiln_graphs']}/{r['torch_graphs']}",
              f"{_yes(r['kiln_matches_eager'])}/{_yes(r['torch_matches_eager'])}") for r in rows]
    return _aligned(headers, lines)
