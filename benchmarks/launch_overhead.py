"""Per-call overhead of a compiled call on the GPU: microseconds of host time per call of a
one-kernel function on a small CUDA tensor (``x * 2 + 1``, 1024 elements), for eager,
torch.compile (default mode) and kiln, median of rounds of 2000 calls after warm-up, the
calls queued without synchronizing (the host's time is what is measured: a small kernel's
GPU time hides under it). Also one Triton launch of kiln's kernel alone (the wrapper's
``kernel[grid](...)``).

Run on the GPU machine: ``scripts/device_run.sh python3 benchmarks/launch_overhead.py``.
"""

from __future__ import annotations

import statistics
import time

import torch


def _per_call_us(fn, x, calls: int = 2000, rounds: int = 7) -> float:
    for _ in range(200):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn(x)
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def main() -> None:
    import kiln

    def f(x):
        return x * 2 + 1

    x = torch.randn(1024, device="cuda")
    compiled = kiln.compile(f)
    torch.testing.assert_close(compiled(x), f(x))
    torch_compiled = torch.compile(f)
    torch.testing.assert_close(torch_compiled(x), f(x))
    rows = [("eager", _per_call_us(f, x)), ("torch.compile", _per_call_us(torch_compiled, x)),
            ("kiln", _per_call_us(compiled, x))]
    print(f"{'variant':<16}{'us per call':>12}")
    for name, us in rows:
        print(f"{name:<16}{us:>12.2f}")


if __name__ == "__main__":
    main()
