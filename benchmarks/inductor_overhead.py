"""Per-call overhead of kiln.inductor's wrapper: ``x + 1`` on a 1-element CPU tensor (one
kernel), under ``no_grad`` and as forward + backward, against eager and torch.compile
(default inductor) in the same run: median microseconds per call after warm-up, rounds
interleaved, one thread.

Run: ``python benchmarks/inductor_overhead.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import kiln


def _add_one(x):
    return x + 1


def _per_call(fn, x, number: int, backward: bool) -> float:
    start = time.perf_counter()
    if backward:
        for _ in range(number):
            fn(x).backward()
    else:
        for _ in range(number):
            fn(x)
    return (time.perf_counter() - start) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, number = (3, 300) if args.quick else (9, 3000)
    torch.set_num_threads(1)
    print("| x + 1, 1 element, CPU, 1 thread | eager µs | kiln µs | torch.compile µs | overhead kiln µs | "
          "overhead torch µs |")
    print("|---|---|---|---|---|---|")
    for backward in (False, True):
        kiln.reset()
        torch._dynamo.reset()
        runs = {"eager": _add_one, "kiln": kiln.compile(_add_one), "torch": torch.compile(_add_one)}
        x = torch.ones(1, requires_grad=backward)
        samples: dict[str, list[float]] = {name: [] for name in runs}
        with torch.set_grad_enabled(backward):
            for fn in runs.values():
                for _ in range(3):
                    fn(x).backward() if backward else fn(x)  # compile and warm up
            for _ in range(rounds):
                for name, fn in runs.items():
                    samples[name].append(_per_call(fn, x, number, backward))
        med = {name: statistics.median(v) for name, v in samples.items()}
        label = "forward + backward" if backward else "no_grad"
        print(f"| {label} | {med['eager']:.2f} | {med['kiln']:.2f} | {med['torch']:.2f} | "
              f"{med['kiln'] - med['eager']:.2f} | {med['torch'] - med['eager']:.2f} |")


if __name__ == "__main__":
    main()
