"""Cold and warm starts of a restarted program: torch.compile's and kiln's first call of
gpu_bench.py's model cases, each in a new process.

For each case and compiler (``--stacks``), in a new empty cache directory (torch: Inductor's
and triton's; kiln: kiln's, triton's under it):

- **cold**: a new process makes the case (seeded), pays its imports and each compiler's
  per-process first use on a one-op function (throwaway caches; kiln with the timed
  compile's options), then times the first call
  (compile included; a training case's forward, backward and SGD step; the device
  synchronized) and checks it against eager's;
- **warm**: another new process does the same with the caches the cold one left. kiln's warm
  start captures and compiles nothing it has on disk (the child reports its whole-graph
  cache's hits and misses).

The table (printed last): seconds per first call, and kiln's over torch's for each start
(the targets of kiln.inductor part 2: cold at most 1/5 of torch's, warm at most 1/20).

Run on the GPU machine::

    scripts/device_run.sh python3 benchmarks/restart_bench.py --cases mlp-bf16,block-bf16-train,gpt2 --json $OUT/restart.json

Smoke test on a CPU (tiny sizes, kiln's C++ kernels)::

    python benchmarks/restart_bench.py --device cpu --cases mlp-fp32 --stacks kiln

``--profile DIR`` writes each child's first call under cProfile (the main thread's functions
by cumulative and own time) to ``DIR/<case>-<stack>-<cold|warm>.txt``, and its standard error
(with ``KILN_LOGS=perf``: kiln's compile phases) to ``.log`` beside it. ``KILN_RESTART_OPTIONS``
(JSON) are kiln's options for the timed compile, e.g. ``'{"inductor.compile_threads": 16}'``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _child(case: str, stack: str, mode: str, device_name: str) -> dict[str, Any]:
    """The first call of ``case`` compiled by ``stack`` in this process (the parent set the
    cache directories), timed and checked."""
    sys.path.insert(0, str(ROOT))
    import torch

    import kiln
    from benchmarks.gpu_bench import CPU, GPU, MODEL_CASES, Compiler, pay_first_use, variant

    device = torch.device(device_name)
    sizes = GPU if device.type == "cuda" else CPU
    torch.manual_seed(0)
    work = MODEL_CASES[case][2](sizes, device)
    if isinstance(work, str):
        return {"skipped": work}
    expected = variant(work, lambda m: m).first()
    options = json.loads(os.environ.get("KILN_RESTART_OPTIONS") or "null")  # kiln's, for mode default
    errors = pay_first_use(device, [stack], options)
    compiled = variant(work, Compiler(stack, mode) if options is None or stack != "kiln"
                       else (lambda fn: kiln.compile(fn, options=options)))
    if device.type == "cuda":
        torch.cuda.synchronize()
    profile_to = os.environ.get("KILN_RESTART_PROFILE")
    profiler = cProfile.Profile() if profile_to else None
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    got = compiled.first()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if profiler is not None:
        profiler.disable()
        _write_profile(profiler, profile_to)
    result: dict[str, Any] = {"first_s": seconds, "errors": errors}
    try:
        torch.testing.assert_close(got, expected, **work.tol)
    except AssertionError as e:
        result["mismatch"] = (str(e).strip().splitlines() or [""])[0]
    if stack == "kiln":
        cache = kiln.session().graph_cache
        result["graph_cache"] = {"hits": cache.hits, "misses": cache.misses}
    return result


def _write_profile(profiler: cProfile.Profile, path: str) -> None:
    """The first call's profile (this thread's: compile threads show as waits), the top
    functions by cumulative and by own time, as text."""
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(30)
    Path(path).write_text(text.getvalue())


def _run_child(case: str, stack: str, mode: str, device: str, cache: str, start: str,
               profile_dir: str | None) -> dict[str, Any]:
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(cache, "triton"))
    if profile_dir:
        env["KILN_RESTART_PROFILE"] = os.path.join(profile_dir, f"{case}-{stack}-{start}.txt")
    if stack == "kiln":
        env["KILN_CACHE_DIR"] = cache
    else:
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "torch")
    cmd = [sys.executable, __file__, "--child", case, "--stacks", stack, "--mode", mode, "--device", device]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if profile_dir:  # the child's logs (KILN_LOGS=perf: kiln's phases) beside its profile
        Path(profile_dir, f"{case}-{stack}-{start}.log").write_text(done.stderr)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.3f}" if a and b else "-"


def _seconds(cell: dict[str, Any]) -> str:
    if "first_s" not in cell:
        return "ERROR" if "error" in cell else "-"
    return f"{cell['first_s']:.2f}" + (" MISMATCH" if "mismatch" in cell else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cases", default="mlp-bf16,block-bf16-train,gpt2")
    parser.add_argument("--stacks", default="torch,kiln")
    parser.add_argument("--mode", default="default")
    parser.add_argument("--json", default=None)
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="write each first call's cProfile (top functions, text) to DIR/<case>-<stack>-<start>.txt")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_child(args.child, args.stacks, args.mode, args.device)))
        return
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    rows = []
    for case in args.cases.split(","):
        row: dict[str, Any] = {"case": case}
        for stack in args.stacks.split(","):
            cache = tempfile.mkdtemp(prefix=f"restart-{stack}-")
            try:
                for start in ("cold", "warm"):
                    row[f"{stack}_{start}"] = _run_child(case, stack, args.mode, args.device, cache, start,
                                                         args.profile)
                    print(f"{case} {stack} {start}: {row[f'{stack}_{start}']}", file=sys.stderr, flush=True)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
        rows.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "mode": args.mode, "rows": rows}, indent=1))
    starts = [f"{s}_{t}" for s in args.stacks.split(",") for t in ("cold", "warm")]
    profiled = "; every child under cProfile, which slows both" if args.profile else ""
    print(f"\nFirst call of a restarted program, seconds (mode {args.mode}; kiln/torch: ratio of seconds{profiled})")
    print(f"{'case':<18}" + "".join(f"{s:>16}" for s in starts) + f"{'kiln/torch cold':>17}{'kiln/torch warm':>17}")
    for row in rows:
        first = {s: row.get(s, {}).get("first_s") for s in starts}
        print(f"{row['case']:<18}" + "".join(f"{_seconds(row.get(s, {})):>16}" for s in starts)
              + f"{_ratio(first.get('kiln_cold'), first.get('torch_cold')):>17}"
              + f"{_ratio(first.get('kiln_warm'), first.get('torch_warm')):>17}")
    for row in rows:
        for s in starts:
            cell = row.get(s, {})
            for key in ("error", "mismatch", "skipped"):
                if key in cell:
                    print(f"  {row['case']} {s} {key}: {cell[key]}")
            if "graph_cache" in cell:
                print(f"  {row['case']} {s}: kiln graph cache {cell['graph_cache']}")


if __name__ == "__main__":
    main()
