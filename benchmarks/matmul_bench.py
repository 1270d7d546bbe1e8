"""Matrix products with epilogues under max-autotune: device time per call of eager,
torch.compile (``mode="max-autotune-no-cudagraphs"``: its Triton GEMM templates against
cuBLAS), kiln with the same mode (``matmul_templates="auto"``: a template where measured
faster than cuBLAS) and kiln with templates always (``"always"``), and each compiler's
compile seconds, in one run; every result checked against eager first. A table last.

Cases (linear layers of a transformer at 8 x 512 tokens, and attention's batched products):
``linear_gelu`` (``gelu(x @ w.t() + b)``, 1024 -> 4096), ``linear_residual``
(``x @ w.t() + b + r``, 4096 -> 1024), ``mm_relu`` (a plain ``relu(a @ b)``, 4096 x 4096 x 1024)
and ``bmm_scale`` (``(q @ k.t()) * 0.125`` per head: 128 x 512 x 64), in bfloat16 and
float32 (float32 without TF32, torch's default).

Device time is the sum of the CUDA kernels' times under torch.profiler (``column_bench``).

Run on the GPU machine::

    scripts/device_run.sh python3 benchmarks/matmul_bench.py [--json out.json]

On CPU: ``python benchmarks/matmul_bench.py --device cpu`` (tiny sizes through triton's
interpreter, a smoke test; torch.compile left out).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kiln
from benchmarks.column_bench import device_us


def _linear_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b))


def _linear_residual(x, w, b, r):
    return F.linear(x, w, b) + r


def _mm_relu(a, b):
    return torch.relu(a @ b)


def _bmm_scale(q, k):
    return (q @ k.transpose(-1, -2)) * 0.125


def _cases(scale: int) -> dict[str, tuple]:
    """name: (function, input shapes); ``scale`` divides the sizes (CPU smoke test)."""
    t, d, h = 4096 // scale, 1024 // scale, 4096 // scale
    return {
        "linear_gelu": (_linear_gelu, [(8, t // 8, d), (h, d), (h,)]),
        "linear_residual": (_linear_residual, [(8, t // 8, h), (d, h), (d,), (8, t // 8, d)]),
        "mm_relu": (_mm_relu, [(t, d), (d, h)]),
        "bmm_scale": (_bmm_scale, [(128 // scale, 512 // scale, 64), (128 // scale, 512 // scale, 64)]),
    }


def _tolerance(dtype: torch.dtype, k: int) -> dict[str, float]:
    """A product sums ``k`` terms of unit-normal products (about sqrt(k) large): float32 sums in
    other orders differ by up to eps * k of it; half types round inputs' products alike
    (float32 accumulators) and the result once (one unit in the last place each side)."""
    if dtype == torch.float32:
        return {"rtol": 1e-4, "atol": 1e-5 * k ** 0.5 * 4}
    return {"rtol": 2e-2, "atol": 2e-2 * k ** 0.5 / 8}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtypes", default="bfloat16,float32")
    parser.add_argument("--cases", default=None, help="comma list (default all)")
    parser.add_argument("--compilers", default="eager,torch,kiln,kiln_always")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    device = torch.device(args.device)
    cpu = device.type == "cpu"
    cases = _cases(64 if cpu else 1)
    wanted = args.cases.split(",") if args.cases else list(cases)
    compilers = args.compilers.split(",")
    if cpu:
        compilers = [c for c in compilers if c != "torch"]
    # the mode's options spelled out (kiln.compile takes a mode or options, as torch.compile)
    base = {"inductor.max_autotune": True, **({"inductor.cpu_backend": "triton"} if cpu else {})}
    table = []
    for name in wanted:
        fn, shapes = cases[name]
        for dtype_name in args.dtypes.split(","):
            dtype = getattr(torch, dtype_name)
            torch.manual_seed(0)
            xs = [torch.randn(s, device=device, dtype=dtype) for s in shapes]
            with torch.no_grad():
                expected = fn(*xs)
            torch._dynamo.reset()
            kiln.reset()
            made = {"eager": fn}
            if "torch" in compilers:
                made["torch"] = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)
            if "kiln" in compilers:
                made["kiln"] = kiln.compile(fn, dynamic=False, options=base)
            if "kiln_always" in compilers:
                made["kiln_always"] = kiln.compile(fn, dynamic=False,
                                                   options={**base, "inductor.matmul_templates": "always"})
            row = {"case": name, "dtype": dtype_name}
            k = shapes[0][-1]
            for who, f in made.items():
                start = time.perf_counter()
                with torch.no_grad():
                    got = f(*xs)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                row[f"{who}_first_s"] = time.perf_counter() - start
                torch.testing.assert_close(got, expected, **_tolerance(dtype, k))
                with torch.no_grad():
                    row[f"{who}_us"] = device_us(lambda f=f, xs=xs: f(*xs), args.calls)
            table.append(row)
            print(row, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name() if not cpu else "cpu",
                                               "rows": table}, indent=1))
    who = [w for w in ("eager", "torch", "kiln", "kiln_always") if w in made]
    print("device us per call (first call s: a cold compile, max-autotune's search included)")
    print(f"{'case':<16} {'dtype':<9} " + " ".join(f"{w:>20}" for w in who)
          + (f" {'kiln/torch':>10}" if "torch" in who and "kiln" in who else ""))
    for r in table:
        cells = [f"{r[f'{w}_us']:8.1f} ({r[f'{w}_first_s']:5.1f} s)" for w in who]
        ratio = f" {r['torch_us'] / r['kiln_us']:10.2f}" if "torch" in who and "kiln" in who else ""
        print(f"{r['case']:<16} {r['dtype']:<9} " + " ".join(f"{c:>20}" for c in cells) + ratio)


if __name__ == "__main__":
    main()
