"""Timing shared by the demo and the benchmarks: interleaved medians after warm-up.

Every variant (eager, kiln, torch.compile) is run in turn inside each round, so drift of the
machine (frequency, other load) hits all of them alike; CUDA work is synchronized before a
clock is read.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["measure", "time_once"]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_once(fn: Callable[[], Any], device: str = "cpu") -> float:
    """Seconds one call of ``fn`` takes (a first call: compile time included)."""
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def measure(variants: dict[str, Callable[[], Any]], *, device: str = "cpu", number: int = 10,
            rounds: int = 15, warmup: int = 3) -> dict[str, float]:
    """Median seconds per call of each variant, interleaved round by round."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            _sync(device)
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            _sync(device)
            samples[name].append((time.perf_counter() - t0) / number)
    return {name: statistics.median(v) for name, v in samples.items()}
