"""Reductions over the leading dimensions (a bias's and a norm weight's gradient: each result
sums a column of a ``[rows, cols]`` tensor): device time per call and achieved GB/s (bytes
read plus written, over a measured device-to-device copy's) of eager, torch.compile and kiln
(both compiled with static shapes, and kiln once more with ``dynamic=True``: its kernels for
a batch of any size), in one run; results checked against eager first. A table last.

Device time is the sum of the CUDA kernels' times under torch.profiler (these calls take
10-100 µs of device time, less than a compiled call's host time, so a wall-clock timer would
measure the host).

Run on the GPU machine::

    scripts/device_run.sh python3 benchmarks/column_bench.py [--json out.json]

On CPU: ``python benchmarks/column_bench.py --device cpu`` (tiny sizes, a smoke test).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kiln
from benchmarks.gpu_bench import copy_bandwidth, kernel_ms


def device_us(fn, calls: int) -> float:
    """Microseconds of CUDA kernels per call of ``fn`` (torch.profiler); CPU: wall time."""
    if not torch.cuda.is_available():
        return kernel_ms(fn, torch.device("cpu"), 10) * 1e3
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA and not e.name.startswith("##")]
    return sum(e.device_time for e in kernels) / calls


def _bias_grad(g):
    return g.sum(0)


def _norm_weight_grads(g, x):
    return (g * x).sum(0), g.sum(0)


def _bias_grad_3d(g):
    return g.sum((0, 1))


# name: (function, inputs, the inputs' shape from (rows, cols))
CASES = {
    "bias_grad": (_bias_grad, 1, lambda r, c: (r, c)),
    "norm_weight_grads": (_norm_weight_grads, 2, lambda r, c: (r, c)),
    "bias_grad_3d": (_bias_grad_3d, 1, lambda r, c: (8, r // 8, c)),
}


def _tolerance(dtype: str, rows: int) -> dict[str, float]:
    """How far a result may be from eager's, from the dtype alone: a result sums ``rows``
    standard-normal terms (or their products), so it is at most about 4 sqrt(rows); eager's
    and the compiled one each round it once to ``dtype`` (triton's interpreter truncates: up
    to one unit in the last place each), and both accumulate in float32 in another order
    (up to float32's epsilon times ``rows``)."""
    eps = torch.finfo(getattr(torch, dtype)).eps
    return {"rtol": 0.0, "atol": 2 * eps * 4 * rows ** 0.5 + torch.finfo(torch.float32).eps * rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rows", type=int, default=None, help="rows summed (default 4096; cpu 256)")
    parser.add_argument("--cols", default=None, help="comma list (default 768,1024,4096; cpu 64)")
    parser.add_argument("--dtypes", default="bfloat16,float32")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rep-ms", type=float, default=100.0, help="the copy's timing")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    device = torch.device(args.device)
    cpu = device.type == "cpu"
    rows = args.rows or (256 if cpu else 4096)
    cols = [int(c) for c in (args.cols or ("64" if cpu else "768,1024,4096")).split(",")]
    options = {"inductor.cpu_backend": "triton"} if cpu else None
    copy = copy_bandwidth(device, 1 if cpu else 64, args.rep_ms)
    table = []
    for name, (fn, n_inputs, shape) in CASES.items():
        for dtype in args.dtypes.split(","):
            for c in cols:
                torch.manual_seed(0)
                xs = [torch.randn(shape(rows, c), device=device, dtype=getattr(torch, dtype)) for _ in range(n_inputs)]
                expected = fn(*xs)
                torch._dynamo.reset()
                kiln.reset()
                compiled = {"eager": fn, "torch": torch.compile(fn, dynamic=False),
                            "kiln": kiln.compile(fn, options=options, dynamic=False),
                            "kiln_dyn": kiln.compile(fn, options=options, dynamic=True)}
                row = {"case": name, "dtype": dtype, "rows": rows, "cols": c}
                for who, f in compiled.items():
                    got = f(*xs)
                    torch.testing.assert_close(got, expected, **_tolerance(dtype, rows))
                    ms = device_us(lambda f=f, xs=xs: f(*xs), args.calls) / 1e3
                    moved = sum(x.numel() * x.element_size() for x in xs)
                    moved += sum(t.numel() * t.element_size() for t in (got if isinstance(got, tuple) else (got,)))
                    row[f"{who}_us"] = ms * 1e3
                    row[f"{who}_pct_copy"] = 100 * moved / ms / 1e6 / copy["gbps"]
                table.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps({"copy": copy, "rows": table}, indent=1))
    print(f"copy {copy['gbps']:.0f} GB/s; us (% of copy bandwidth)")
    who = ("eager", "torch", "kiln", "kiln_dyn")
    print(f"{'case':<18} {'dtype':<9} {'cols':>5} " + " ".join(f"{w:>14}" for w in who) + f" {'kiln/torch':>10}")
    for r in table:
        cells = [f"{r[f'{w}_us']:7.1f} ({r[f'{w}_pct_copy']:3.0f}%)" for w in who]
        print(f"{r['case']:<18} {r['dtype']:<9} {r['cols']:>5} " + " ".join(f"{c:>14}" for c in cells)
              + f" {r['torch_us'] / r['kiln_us']:10.2f}")


if __name__ == "__main__":
    main()
