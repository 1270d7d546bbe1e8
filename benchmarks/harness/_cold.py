"""One cold compile in this (fresh) process, printed as one JSON line; run by ``scaling.py``.

``python -m benchmarks.harness._cold KIND SIZE COMPILER DEVICE``:

- ``first``: the first compile of a one-op function (``x + 1``) in a fresh process: seconds
  from after ``import torch`` to the first result, everything the compiler imports included
  (``import_s``: the part spent in ``import kiln``; torch.compile needs no import);
- ``block``: a pre-norm transformer block (LayerNorm, nn.MultiheadAttention, GELU MLP,
  d=64) repeated SIZE times in an ``nn.Sequential``;
- ``loop``: ``x = tanh(x @ w) + i`` unrolled SIZE times.

For ``block`` and ``loop`` the compiler's imports are paid first (a one-op function compiled,
run and reset), so ``cold_s`` is a first call after a reset: capture, guards and codegen of
one graph (backend "eager" for both). ``peak_mb``: the process's resident-memory high-water
mark during that call, less the resident memory before it (Linux: ``/proc/self/clear_refs``
resets the mark; elsewhere the lifetime peak is used).
"""

from __future__ import annotations

import json
import sys
import time

import torch


def _rss_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_mb() -> float:
    peak = _rss_mb("VmHWM")
    if peak is not None:
        return peak
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Block(torch.nn.Module):
    def __init__(self, d: int = 64) -> None:
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, 4, batch_first=True)
        self.ln2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


def _unrolled(n: int):
    def loop(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        for i in range(n):
            x = torch.tanh(x @ w) + i
        return x

    return loop


def _workload(kind: str, size: int, device: str):
    g = torch.Generator().manual_seed(0)
    if kind == "block":
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[_Block() for _ in range(size)]).to(device).eval()
        return model, (torch.randn(2, 8, 64, generator=g).to(device),)
    if kind == "loop":
        return _unrolled(size), (torch.randn(4, 4, generator=g).to(device),
                                 (torch.randn(4, 4, generator=g) * 0.1).to(device))
    raise ValueError(f"unknown kind {kind!r}")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main(kind: str, size: int, compiler: str, device: str) -> dict:
    torch.set_num_threads(1)
    graphs = [0]

    def counting(gm, example_inputs):
        graphs[0] += 1
        return gm.forward

    def add_one(x):
        return x + 1

    out: dict = {"kind": kind, "size": size, "compiler": compiler}
    t0 = time.perf_counter()
    if compiler == "kiln":
        import kiln

        out["import_s"] = time.perf_counter() - t0
        compile_, reset = kiln.compile, kiln.reset
    else:
        out["import_s"] = 0.0
        compile_ = torch.compile

        def reset() -> None:
            import torch._dynamo

            torch._dynamo.reset()

    x1 = torch.randn(3, device=device)
    if kind == "first":
        result = compile_(add_one, backend=counting)(x1)
        _sync(device)
        out["cold_s"] = time.perf_counter() - t0
        fn, args = add_one, (x1,)
    else:
        compile_(add_one, backend="eager")(x1)  # the compiler's imports, paid before timing
        reset()
        fn, args = _workload(kind, size, device)
        with torch.no_grad():
            before = _rss_mb("VmRSS") or 0.0
            exact = _reset_peak()
            t = time.perf_counter()
            result = compile_(fn, backend=counting)(*args)
            _sync(device)
            out["cold_s"] = time.perf_counter() - t
            out["peak_mb"] = max(_peak_mb() - before, 0.0)
            out["peak_exact"] = exact
    with torch.no_grad():
        expected = fn(*args)
    try:
        torch.testing.assert_close(result, expected)
        out["matches_eager"] = True
    except AssertionError:
        out["matches_eager"] = False
    out["graphs"] = graphs[0]
    out["frontend_loaded"] = sorted(m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules)
    return out


if __name__ == "__main__":
    kind, size, compiler, device = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    print(json.dumps(main(kind, size, compiler, device)))
