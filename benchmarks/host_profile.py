"""Where the host's time goes in steady-state calls of a kiln-compiled model (``--mode``,
default "default"): the model cases of gpu_bench.py, compiled once, warmed up, then
``--calls`` calls under cProfile (the device synchronized once at the end, so the host's own
time is what shows); prints the host time per call against eager's and torch.compile's (no
profiler), each compiled graph's kernels, ATen calls and CUDA graph use, and the functions
with the most own time per call. ``--device-top N``: also the N CUDA kernels (and copies)
with the most device time per call, kiln's and torch.compile's (torch.profiler).

Run on the GPU machine::

    scripts/device_run.sh python3 benchmarks/host_profile.py --cases gpt2,block-bf16
    scripts/device_run.sh python3 benchmarks/host_profile.py --cases block-bf16-train --mode reduce-overhead --device-top 12

On CPU it runs the tiny sizes (a smoke test): ``python benchmarks/host_profile.py --device cpu``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kiln
from benchmarks.gpu_bench import CPU, GPU, MODEL_CASES, variant
from kiln.inductor import _api


def _host_us(step, device: torch.device, calls: int) -> float:
    for _ in range(5):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        step()
    seconds = time.perf_counter() - start  # queued work may still run: the host's time
    if device.type == "cuda":
        torch.cuda.synchronize()
    return seconds / calls * 1e6


def _device_top(step, top: int, calls: int = 20) -> str:
    """The kernels with the most device time over ``calls`` calls of ``step`` (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            step()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if getattr(e, "self_device_time_total", 0) > 0]
    events.sort(key=lambda e: -e.self_device_time_total)
    total = sum(e.self_device_time_total for e in events) / calls
    lines = [f"      {total:8.1f} us of device time per call, in all"]
    for e in events[:top]:
        lines.append(f"      {e.self_device_time_total / calls:8.1f} us  x{e.count / calls:<4.1f} {e.key[:90]}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="gpt2,block-bf16")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--mode", default="default")
    parser.add_argument("--device-top", type=int, default=0)
    args = parser.parse_args()
    device = torch.device(args.device)
    sizes = GPU if device.type == "cuda" else CPU
    for name in args.cases.split(","):
        work = MODEL_CASES[name][2](sizes, device)
        if isinstance(work, str):
            print(f"{name}: {work}")
            continue
        compiled_graphs = []
        original = _api.compile_graph

        def record(gm, config=None, builders=None, group=None, _original=original, _seen=compiled_graphs):
            result = _original(gm, config, builders, group)
            _seen.append(result)
            return result

        _api.compile_graph = record
        try:
            kiln.reset()
            k = variant(work, lambda m: kiln.compile(m, mode=args.mode))
            k.first()
        finally:
            _api.compile_graph = original
        torch._dynamo.reset()
        t = variant(work, lambda m: torch.compile(m, mode=args.mode))
        t.first()
        e = variant(work, lambda m: m)
        times = {label: _host_us(v.step, device, args.calls) for label, v in (("eager", e), ("torch", t), ("kiln", k))}
        print(f"\n== {name} ({args.mode}): host us per call: " + ", ".join(f"{a} {b:.0f}" for a, b in times.items()))
        for g in compiled_graphs:
            stats = getattr(g.call, "stats", None)
            graphs = f", CUDA graphs {stats} ({g.call.off or 'on'})" if stats is not None else ""
            print(f"   graph: {g.kernels} kernels, {g.externs} ATen calls, fallbacks {g.fallbacks or 'none'}{graphs}")
        if args.device_top and device.type == "cuda":
            for label, v in (("kiln", k), ("torch", t)):
                print(f"   {label}: device time per call, top {args.device_top}")
                print(_device_top(v.step, args.device_top))
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.calls):
            k.step()
        profile.disable()
        if device.type == "cuda":
            torch.cuda.synchronize()
        out = io.StringIO()
        stats = pstats.Stats(profile, stream=out)
        stats.sort_stats("tottime").print_stats(args.top)
        print(f"   (profile of {args.calls} calls; divide by it for per call)")
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
