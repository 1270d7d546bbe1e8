"""Why ``test_triton_layouts_fuzz.py::test_dynamic_sizes_keep_eagers_layout`` failed on an H100
at 7b84e4b (program 21 at grown sizes: one element 0.0136 from the float64 value, eager
0.0053): the test's inputs rebuilt in its order, the worst element of kiln's output, and the
``sin`` argument of program 21's chain (``exp`` of ``(x + y) * 1.5 - 0.25``, then twice
``* 1.5 - 0.25``) computed by eager, in float64, and by two Triton kernels: one with
``tl.exp`` (what kiln emits; triton lowers it to an approximate ``ex2``), one with
``libdevice.exp``. Prints a table; no assertion.

Run on the GPU machine::

    scripts/device_run.sh python3 benchmarks/exp_precision.py

Under ``TRITON_INTERPRET=1`` it runs on the CPU (where both exponentials are numpy's).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "inductor"))

from test_triton_layouts_fuzz import _grown, _program  # noqa: E402
from triton_support import DEVICE, OPTIONS  # noqa: E402

import kiln  # noqa: E402
from kiln.inductor.triton._runtime import resolve_libdevice  # noqa: E402

libdevice = resolve_libdevice()


@triton.jit
def _chain(x_ptr, y_ptr, fast_ptr, accurate_ptr, n, BLOCK: tl.constexpr, ACCURATE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    v = (tl.load(x_ptr + offsets, mask) + tl.load(y_ptr + offsets, mask)) * 1.5 - 0.25
    fast = (tl.exp(v) * 1.5 - 0.25) * 1.5 - 0.25
    if ACCURATE:
        accurate = (libdevice.exp(v) * 1.5 - 0.25) * 1.5 - 0.25
    else:  # (triton's interpreter: numpy's exp either way)
        accurate = fast
    tl.store(fast_ptr + offsets, fast, mask)
    tl.store(accurate_ptr + offsets, accurate, mask)


def main() -> None:
    torch.manual_seed(0)  # as the test's ``graphs`` fixture
    for seed in range(22):  # the test's draws, in its order
        fn, x, y = _program(random.Random(seed))
        grown = [(_grown(x, 2), _grown(y, 2))]
        if seed == 21:
            break
    a, b = (t.to(DEVICE) for t in grown[0])
    kiln.reset()
    compiled = kiln.compile(fn, options=OPTIONS, dynamic=True)
    with torch.no_grad():
        compiled(x.to(DEVICE), y.to(DEVICE))  # the first size, as the test (then the grown one)
        actual, expected, exact = compiled(a, b), fn(a, b), fn(a.double(), b.double())
    kiln_error, eager_error = (actual.double() - exact).abs(), (expected.double() - exact).abs()
    flat = kiln_error.flatten().argmax().item()
    print(f"program 21 at {tuple(a.shape)}: kiln's largest error {kiln_error.max().item():.3g}, "
          f"eager's {eager_error.max().item():.3g}; at element {flat}: kiln {actual.flatten()[flat].item():.6g}, "
          f"eager {expected.flatten()[flat].item():.6g}, float64 {exact.flatten()[flat].item():.6g}")
    # the chain's input, the sum of the permuted inputs (``_program``'s first draws)
    rng = random.Random(21)
    ndim = rng.choice([2, 3, 4])
    [rng.choice([1, 3, 16, 17, 24, 33]) for _ in range(ndim)]
    perm_x, perm_y = rng.sample(range(ndim), ndim), rng.sample(range(ndim), ndim)
    xs = a.permute(*perm_x).contiguous().flatten()
    ys = b.permute(*perm_y).contiguous().flatten()
    fast, accurate = torch.empty_like(xs), torch.empty_like(xs)
    _chain[(triton.cdiv(xs.numel(), 256),)](xs, ys, fast, accurate, xs.numel(), BLOCK=256,
                                            ACCURATE=torch.cuda.is_available())
    v64 = (xs.double() + ys.double()) * 1.5 - 0.25
    arg64 = (v64.exp() * 1.5 - 0.25) * 1.5 - 0.25
    v32 = (xs + ys) * 1.5 - 0.25
    arg32 = (v32.exp() * 1.5 - 0.25) * 1.5 - 0.25
    rows = [("eager", arg32), ("tl.exp", fast), ("libdevice.exp", accurate)]
    print(f"sin's argument over {xs.numel()} elements (largest |float64| {arg64.abs().max().item():.5g}):")
    print(f"{'computed by':<16}{'max abs error':>16}{'max error in ulps':>20}")
    ulp = torch.finfo(torch.float32).eps * arg64.abs().clamp(min=1)
    for name, value in rows:
        error = (value.double() - arg64).abs()
        print(f"{name:<16}{error.max().item():>16.4g}{(error / ulp).max().item():>20.2f}")


if __name__ == "__main__":
    main()
