"""What the structured trace (``KILN_TRACE``, ``kiln.config.trace_dir``) costs: cold compiles
with the trace off and on, and a cache hit's time per call with it off and on.

Cases (default backend, CPU):
- ``mlp training step``: the first call of a compiled 3-layer MLP's training step (forward,
  loss, backward): capture, aotgrad's joint graph and partition, inductor's two halves;
- ``graph break``: the first call of a function with a data-dependent branch (two graphs:
  the frame and its resume function, each compiled);
- ``cache hit``: a call of a compiled function whose entry exists (microseconds per call).

A cold compile is timed from ``kiln.reset()`` (nothing compiled, the disk caches of graphs and
frames off) to the end of the first call; kernel libraries come from the kernel cache in both
modes (compiled once in the warm-up), so the figures compare kiln's own work. Off and on rounds
alternate, after a warm-up of each, each after a full garbage collection, with one torch
thread (the kernels' OpenMP threads would otherwise spin in CPU time); medians are reported, of
wall time and of the process's CPU time (``time.process_time``: steadier where other work
shares the machine's cores).

    python benchmarks/trace_overhead.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from collections.abc import Callable

import torch

import kiln


def _mlp_step() -> Callable[[], None]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                torch.nn.GELU(), torch.nn.Linear(128, 10))
    x, target = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def step(model: torch.nn.Module) -> None:
        loss = torch.nn.functional.cross_entropy(model(x), target)
        loss.backward()

    def run() -> None:
        compiled = kiln.compile(model)
        step(compiled)

    return run


def _with_break(x: torch.Tensor) -> torch.Tensor:
    y = (x * 2).sin()
    if y.sum() > 0:  # data-dependent: a graph break and a resume function
        y = y + 1
    return (y * y).cos().sum(dim=-1)


def _graph_break() -> Callable[[], None]:
    x = torch.randn(16, 32)

    def run() -> None:
        kiln.compile(_with_break)(x)

    return run


def _timed(fn: Callable[[], None], count: int = 1) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``fn()``, per call of ``count``."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - wall) / count, (time.process_time() - cpu) / count


def _cold(run: Callable[[], None], trace_dir: str | None) -> tuple[float, float]:
    kiln.config.trace_dir = trace_dir
    kiln.reset()
    return _timed(run)


def _hit(trace_dir: str | None, calls: int = 20000) -> tuple[float, float]:
    kiln.config.trace_dir = trace_dir
    kiln.reset()
    compiled = kiln.compile(lambda x: x + 1)
    x = torch.ones(4)
    for _ in range(200):
        compiled(x)

    def loop() -> None:
        for _ in range(calls):
            compiled(x)

    return _timed(loop, calls)


def measure(rounds: int) -> list[tuple[str, str, float, float, float, float]]:
    """Per case: (name, unit, median wall off, on, median CPU off, on)."""
    kiln.config.graph_cache = kiln.config.frame_cache = kiln.config.recompile_memory = False
    torch.set_num_threads(1)
    cases: list[tuple[str, str, float, Callable[[str | None], tuple[float, float]]]] = []
    for name, make in (("mlp training step", _mlp_step), ("graph break", _graph_break)):
        run = make()
        cases.append((name, "ms", 1e3, lambda folder, run=run: _cold(run, folder)))
    cases.append(("cache hit", "us/call", 1e6, _hit))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name, unit, scale, once in cases:
            once(None), once(folder)  # warm-up: imports, the kernel cache
            off, on = [], []
            for _ in range(rounds):
                off.append(once(None))
                on.append(once(folder))
            rows.append((name, unit, *(statistics.median(t[k] for t in times) * scale
                                       for k in (0, 1) for times in (off, on))))
    kiln.config.trace_dir = None
    kiln.reset()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds per mode (medians)")
    args = parser.parse_args(argv)
    print(f"{'case':<20}{'unit':>9}{'wall off':>10}{'wall on':>10}{'overhead':>10}"
          f"{'cpu off':>10}{'cpu on':>10}{'overhead':>10}")
    for name, unit, wall_off, wall_on, cpu_off, cpu_on in measure(args.rounds):
        print(f"{name:<20}{unit:>9}{wall_off:>10.2f}{wall_on:>10.2f}{(wall_on / wall_off - 1) * 100:>+9.1f}%"
              f"{cpu_off:>10.2f}{cpu_on:>10.2f}{(cpu_on / cpu_off - 1) * 100:>+9.1f}%")


if __name__ == "__main__":
    main()
