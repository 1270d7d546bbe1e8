"""Frontend benchmark: per-call overhead of a cache hit, and cold capture time.

kiln and torch.compile both use backend="eager", so the compiled graph runs the same ATen
ops and the difference to eager is the frontend's own cost (frame hook, guard check,
replacement code). Both are measured in the same process, interleaved; every figure is a
median after warm-up. Cold capture: the first call of a 12-layer transformer after a reset.

Run: ``python benchmarks/overhead_bench.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

import kiln


def tiny(x):
    return x + 1


class MLP(nn.Module):
    def __init__(self, layers: int = 10, width: int = 16) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class Block(nn.Module):
    def __init__(self, d: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, s, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(torch.ones(s, s, dtype=torch.bool).tril().logical_not(), float("-inf"))
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, layers: int = 12, d: int = 64) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.ln(x)


def _per_call_us(fn, args, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn(*args)
    return (time.perf_counter() - t0) / number * 1e6


def measure_calls(fns: dict[str, object], args: tuple, number: int, repeat: int) -> dict[str, float]:
    """Median µs per call for each function, interleaved round by round."""
    for fn in fns.values():
        for _ in range(3):
            fn(*args)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            samples[name].append(_per_call_us(fn, args, number))
    return {name: statistics.median(v) for name, v in samples.items()}


def overhead_rows(number: int, repeat: int) -> list[tuple[str, ...]]:
    torch.manual_seed(0)
    rows = []
    cases = [("x + 1 on a 1-element tensor", tiny, (torch.ones(1),)),
             ("10-layer MLP module", MLP(), (torch.randn(8, 16),))]
    for label, model, args in cases:
        if isinstance(model, nn.Module):
            model.eval()
        fns = {
            "eager": model,
            "kiln": kiln.compile(model, backend="eager"),
            "torch.compile": torch.compile(model, backend="eager"),
        }
        with torch.no_grad():
            for name in ("kiln", "torch.compile"):
                torch.testing.assert_close(fns[name](*args), model(*args))
            t = measure_calls(fns, args, number, repeat)
        ours, theirs = t["kiln"] - t["eager"], t["torch.compile"] - t["eager"]
        rows.append((f"per call: {label}", f"{t['kiln']:.2f} us", f"{t['torch.compile']:.2f} us",
                     f"{t['kiln'] / t['torch.compile']:.2f}x",
                     f"eager {t['eager']:.2f} us; over eager: kiln {ours:+.2f}, torch {theirs:+.2f} us"))
    return rows


def cold_capture_row(repeat: int) -> tuple[str, ...]:
    import torch._dynamo

    torch.manual_seed(0)
    model = Transformer().eval()
    x = torch.randn(2, 16, 64)
    ours, theirs = [], []
    with torch.no_grad():
        expected = model(x)
        for _ in range(repeat):
            kiln.reset()
            compiled = kiln.compile(model, backend="eager", fullgraph=True)
            t0 = time.perf_counter()
            out = compiled(x)
            ours.append(time.perf_counter() - t0)
            torch.testing.assert_close(out, expected)
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="eager", fullgraph=True)
            t0 = time.perf_counter()
            out = compiled(x)
            theirs.append(time.perf_counter() - t0)
            torch.testing.assert_close(out, expected)
    a, b = statistics.median(ours), statistics.median(theirs)
    return ("cold capture: 12-layer transformer (first call)", f"{a * 1000:.0f} ms",
            f"{b * 1000:.0f} ms", f"{a / b:.2f}x", "target <= 0.33x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (smoke run)")
    args = parser.parse_args(argv)
    number, repeat, cold = (500, 5, 1) if args.quick else (5000, 15, 5)
    torch.set_num_threads(1)
    print(f"kiln frontend benchmark - Python {platform.python_version()}, torch {torch.__version__}, "
          f"{platform.machine()}, 1 thread")
    rows = overhead_rows(number, repeat)
    rows.append(cold_capture_row(cold))
    headers = ("measure", "kiln", "torch.compile", "ratio", "note")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    print("both backends 'eager'; ratio = kiln / torch.compile (< 1: kiln is cheaper); a compiled call can beat "
          "eager because it skips nn.Module call machinery")
    return 0


if __name__ == "__main__":
    sys.exit(main())
