"""Launch-config sweep of kiln's Triton kernels on the memory-bound rows of gpu_bench.py.

For each row (softmax, LayerNorm, RMSNorm, add+LayerNorm+GELU; fp32 and bf16; a few column
counts) it compiles the function with kiln once per candidate launch config (the persistent
row kernel with XBLOCK x num_warps, and the looped row kernel with RBLOCK x num_warps), checks
each result against eager and times it with ``triton.testing.do_bench`` (median), then prints,
per row, kiln's default heuristic, the best candidate and torch.compile, as % of a measured
device-to-device copy. The table is the evidence behind the heuristics in
``kiln.inductor.triton._kernel`` (``_rows_launch``) and the candidate set of max-autotune.

Run on the GPU machine::

    scripts/device_run.sh python3 benchmarks/triton_sweep.py [--cols 4096,32768] [--ops softmax]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import re
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kiln
from benchmarks.gpu_bench import BF16_TOL, DTYPES, KERNELS, copy_bandwidth, kernel_ms
from kiln.inductor import _compile as compile_module
from kiln.inductor._policy import FusionPolicy
from kiln.inductor.triton import _kernel as kernel_module


@contextlib.contextmanager
def forced(meta: dict[str, int] | None, persistent_max: int | None) -> Iterator[None]:
    """kiln compiles with ``meta`` as every row kernel's launch config, and rows wider than
    ``persistent_max`` looped."""
    old_launch, old_policy = kernel_module._rows_launch, compile_module.FusionPolicy
    if meta is not None:
        def launch(xnumel: Any, width: int | None, persistent: bool, *rest: Any) -> dict[str, int]:
            base = old_launch(xnumel, width, persistent, *rest)
            return {**base, **meta}
        kernel_module._rows_launch = launch
    if persistent_max is not None:
        compile_module.FusionPolicy = functools.partial(FusionPolicy, triton_persistent_max=persistent_max)
    try:
        yield
    finally:
        kernel_module._rows_launch, compile_module.FusionPolicy = old_launch, old_policy


def candidates(cols: int, itemsize: int) -> list[tuple[str, dict[str, int] | None, int | None]]:
    out: list[tuple[str, dict[str, int] | None, int | None]] = [("default", None, None)]
    for xblock in (1, 2, 4, 8):
        if xblock * cols > 65536:
            continue
        for warps in (4, 8, 16, 32):
            if xblock * cols // (32 * warps) < 4 or xblock * cols // (32 * warps) > 128:
                continue
            out.append((f"p x{xblock} w{warps}", {"XBLOCK": xblock, "num_warps": warps}, None))
    for rblock in (1024, 2048, 4096, 8192, 16384):
        if rblock >= cols:
            continue
        for warps in (4, 8, 16, 32):
            if rblock // (32 * warps) < 2 or rblock // (32 * warps) > 64:
                continue
            out.append((f"l r{rblock} w{warps}", {"XBLOCK": 1, "RBLOCK": rblock, "num_warps": warps}, cols // 2))
    return out


def run_row(op: str, dtype: str, cols: int, rows_mib: float, rep_ms: float, copy_gbps: float,
            with_torch: bool, only: re.Pattern[str] | None = None) -> dict[str, Any]:
    fn, n_inputs, n_params = KERNELS[op]
    dt = DTYPES[dtype]
    rows = max(1, int(rows_mib * 2**20) // (cols * dt.itemsize))
    torch.manual_seed(0)
    args = tuple(torch.randn(rows, cols, device="cuda", dtype=dt) for _ in range(n_inputs)) + tuple(
        torch.randn(cols, device="cuda", dtype=dt) * 0.1 + 1 for _ in range(n_params))
    tol = BF16_TOL if dtype == "bf16" else {}
    result: dict[str, Any] = {"row": f"{op}-{dtype}-{cols}", "shape": f"{rows}x{cols}", "configs": {}}
    with torch.no_grad():
        expected = fn(*args)
        nbytes = sum(a.nbytes for a in args) + expected.nbytes
        gbps = lambda ms: nbytes / ms / 1e6  # noqa: E731
        result["eager"] = gbps(kernel_ms(lambda: fn(*args), torch.device("cuda"), rep_ms)) / copy_gbps
        if with_torch:
            torch._dynamo.reset()
            compiled = torch.compile(fn)
            compiled(*args)
            result["torch"] = gbps(kernel_ms(lambda: compiled(*args), torch.device("cuda"), rep_ms)) / copy_gbps
        for name, meta, persistent_max in candidates(cols, dt.itemsize):
            if only is not None and name != "default" and not only.fullmatch(name):
                continue
            kiln.reset()
            try:
                with forced(meta, persistent_max):
                    compiled = kiln.compile(fn, options={"inductor.graph_cache": False})
                    got = compiled(*args)
                torch.testing.assert_close(got, expected, **tol)
                ms = statistics.median(kernel_ms(lambda c=compiled: c(*args), torch.device("cuda"), rep_ms)
                                       for _ in range(2))
                result["configs"][name] = gbps(ms) / copy_gbps
            except Exception as e:  # a config triton cannot compile (too many registers) is a result too
                result["configs"][name] = f"{type(e).__name__}: {str(e)[:120]}"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", default="softmax,layernorm,rmsnorm,add_ln_gelu")
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--cols", default="4096,32768")
    parser.add_argument("--rows-mib", type=float, default=64)
    parser.add_argument("--rep-ms", type=float, default=40)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--json", default="")
    parser.add_argument("--configs", default="", help="a regular expression: only the candidates it matches "
                        "(and the default), e.g. 'p x1 w32|l r(4096|8192) w(16|32)'")
    args = parser.parse_args()
    start = time.perf_counter()
    copy = copy_bandwidth(torch.device("cuda"), 1024, 100)
    print(f"copy {copy['gbps']:.0f} GB/s  ({torch.cuda.get_device_name()})", flush=True)
    results = []
    for op in args.ops.split(","):
        for dtype in args.dtypes.split(","):
            for cols in (int(c) for c in args.cols.split(",")):
                r = run_row(op, dtype, cols, args.rows_mib, args.rep_ms, copy["gbps"], not args.no_torch,
                            re.compile(args.configs) if args.configs else None)
                results.append(r)
                numbers = {k: v for k, v in r["configs"].items() if isinstance(v, float)}
                best = max(numbers, key=numbers.get) if numbers else "-"
                line = "  ".join(f"{k}={v:.0%}" for k, v in sorted(numbers.items(), key=lambda kv: -kv[1])[:6])
                print(f"{r['row']:<24} eager {r['eager']:.0%} torch {r.get('torch', 0):.0%} "
                      f"default {numbers.get('default', 0):.0%} best {best} | {line}", flush=True)
                for k, v in r["configs"].items():
                    if not isinstance(v, float):
                        print(f"    {k}: {v}", flush=True)
                if args.json:  # after every row: a run cut short keeps what it measured
                    Path(args.json).write_text(json.dumps({"copy": copy, "rows": results}, indent=1))
    print(f"\n{'row':<24} {'eager':>6} {'torch':>6} {'kiln':>6} {'best':>6}  best config")
    for r in results:
        numbers = {k: v for k, v in r["configs"].items() if isinstance(v, float)}
        best = max(numbers, key=numbers.get) if numbers else "-"
        print(f"{r['row']:<24} {r['eager']:>6.0%} {r.get('torch', 0):>6.0%} {numbers.get('default', 0):>6.0%} "
              f"{numbers.get(best, 0):>6.0%}  {best}")
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
