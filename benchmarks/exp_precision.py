"""Why ``test_triton_layouts_fuzz.py::test_dynamic_sizes_keep_eagers_layout`` failed on an H100
at 7b84e4b (program 21 at grown sizes: one element 0.0136 from the float64 value, eager
0.0053): the test's inputs rebuilt in its order, the worst element of kiln's output, and the
``sin`` argument of program 21's chain (``exp`` of ``(x + y) * 1.5 - 0.25``, then twice
``* 1.5 - 0.25``) computed by eager, in float64, and by two Triton kernels: one with
``tl.exp`` (what kiln emits; triton lowers it to an approximate ``ex2``), one with
``libdevice.exp``. Prints a table; no assertion. Then exp over float32's range (``tl.exp``, libdevice's, a
corrected ``exp2``), and triton's other functions kiln emits (``tl.log``, ``tl.sin``...)
against libdevice's and eager's.

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


# ---------------------------------------------------------------- exp over float32's range
# (module constants a triton function reads must be constexpr)
LOG2E: tl.constexpr = tl.constexpr(1.4426950216293335)  # float32(log2(e))
LOG2E_LO: tl.constexpr = tl.constexpr(1.925963033500011e-08)  # log2(e) - LOG2E
LN2: tl.constexpr = tl.constexpr(0.6931471805599453)


@triton.jit
def _corrected_exp(x):
    """``exp2`` of the rounded ``x * log2(e)``, corrected by the product's rounding error (an
    fma gives it exactly) and log2(e)'s low part: a candidate for kiln's ``exp``."""
    t = x * LOG2E
    r = tl.fma(x, LOG2E, -t) + x * LOG2E_LO
    e = tl.exp2(t)
    return tl.where(tl.abs(t) < 256.0, tl.fma(e, r * LN2, e), e)  # (infinities: inf - inf, inf * 0)


@triton.jit
def _exps(x_ptr, out_ptr, n, BLOCK: tl.constexpr, KIND: tl.constexpr, CHAIN: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    v = tl.load(x_ptr + offsets, mask)
    for _ in tl.static_range(CHAIN):
        if KIND == 0:
            v = tl.exp(v)
        elif KIND == 1:
            v = libdevice.exp(v)
        else:
            v = _corrected_exp(v)
        if CHAIN > 1:
            v = v * 1e-3
    tl.store(out_ptr + offsets, v, mask)


def exp_table() -> None:
    """Each exponential's error over float32's range (against float64, in ulps of the float32
    result), its first call's seconds (the compile) and the device time of 16 chained."""
    import time

    gpu = torch.cuda.is_available()
    n = 1 << 22 if gpu else 1 << 14
    x = torch.linspace(-87.0, 88.0, n, device=DEVICE, dtype=torch.float32)
    x = torch.cat([x, torch.randn(n, device=DEVICE) * 10, torch.tensor([float("inf"), -float("inf"),
                                                                        float("nan"), 0.0, -0.0], device=DEVICE)])
    exact = x.double().exp()
    finite = torch.isfinite(exact) & (exact < torch.finfo(torch.float32).max)
    ulp = (exact.float().abs().nextafter(torch.tensor(float("inf"), device=DEVICE)) - exact.float().abs()).double()
    out = torch.empty_like(x)
    warm = torch.empty(4, device=DEVICE)
    _exps[(1,)](warm, warm, 4, BLOCK=16, KIND=0, CHAIN=1)  # triton's first compile
    print(f"\nexp over [-87, 88] and randn * 10 ({x.numel()} float32 values), against float64:")
    print(f"{'computed by':<16}{'max ulps':>10}{'mean ulps':>11}{'specials ok':>13}{'first call s':>14}"
          f"{'16 chained us':>15}")
    rows = [("eager", None)] + [(name, kind) for kind, name in enumerate(("tl.exp", "libdevice.exp", "corrected"))]
    for name, kind in rows:
        if kind is not None and kind == 1 and not gpu:
            continue
        start = time.perf_counter()
        if kind is None:
            out = x.exp()
        else:
            _exps[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024, KIND=kind, CHAIN=1)
        if gpu:
            torch.cuda.synchronize()
        first = time.perf_counter() - start
        error = ((out.double() - exact).abs() / ulp)[finite]
        specials = torch.equal(out[-5:].isnan(), exact[-5:].isnan()) and \
            torch.equal(out[-5:][~out[-5:].isnan()], exact[-5:][~exact[-5:].isnan()].float())
        chained = float("nan")
        if gpu and kind is not None:
            from triton.testing import do_bench

            big = torch.randn(1 << 24, device=DEVICE)
            dst = torch.empty_like(big)
            chained = 1e3 * do_bench(
                lambda kind=kind, big=big, dst=dst: _exps[(triton.cdiv(big.numel(), 1024),)](big, dst, big.numel(), BLOCK=1024,
                                                                          KIND=kind, CHAIN=16),
                return_mode="median")
        print(f"{name:<16}{error.max().item():>10.2f}{error.mean().item():>11.3f}{specials!s:>13}"
              f"{first:>14.3f}{chained:>15.1f}")


# ---------------------------------------------------------------- the other approximate functions
# kiln's Triton element ops that are triton's own (``_ops._UNARY``): triton lowers some to the
# GPU's approximate instructions (``tl.exp`` was 63 ulps off); each against libdevice's and eager's
_MATH = ("log", "log2", "sin", "cos", "erf", "exp2")


@triton.jit
def _math(x_ptr, out_ptr, n, BLOCK: tl.constexpr, FN: tl.constexpr, LIBDEVICE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    v = tl.load(x_ptr + offsets, mask)
    if LIBDEVICE:
        if FN == 0:
            v = libdevice.log(v)
        elif FN == 1:
            v = libdevice.log2(v)
        elif FN == 2:
            v = libdevice.sin(v)
        elif FN == 3:
            v = libdevice.cos(v)
        elif FN == 4:
            v = libdevice.erf(v)
        else:
            v = libdevice.exp2(v)
    else:
        if FN == 0:
            v = tl.log(v)
        elif FN == 1:
            v = tl.log2(v)
        elif FN == 2:
            v = tl.sin(v)
        elif FN == 3:
            v = tl.cos(v)
        elif FN == 4:
            v = tl.erf(v)
        else:
            v = tl.exp2(v)
    tl.store(out_ptr + offsets, v, mask)


def math_table() -> None:
    """``tl.log``, ``tl.log2``, ``tl.sin``, ``tl.cos``, ``tl.erf`` and ``tl.exp2`` (what kiln
    emits) against libdevice's and eager's, in ulps of the float32 result from float64 (values
    under 1e-6 left out: the zeros of sin and cos)."""
    gpu = torch.cuda.is_available()
    n = 1 << 22 if gpu else 1 << 14
    positive = torch.logspace(-30, 30, n, device=DEVICE, dtype=torch.float32)
    inputs = {
        "log": positive, "log2": positive,
        "sin": torch.cat([torch.linspace(-100.0, 100.0, n, device=DEVICE), torch.linspace(-1e4, 1e4, n, device=DEVICE)]),
        "erf": torch.linspace(-5.0, 5.0, n, device=DEVICE),
        "exp2": torch.linspace(-126.0, 127.0, n, device=DEVICE),
    }
    inputs["cos"] = inputs["sin"]
    eager = {"log": torch.log, "log2": torch.log2, "sin": torch.sin, "cos": torch.cos, "erf": torch.erf,
             "exp2": torch.exp2}
    print("\ntriton's functions against libdevice's and eager's (max / mean ulps from float64):")
    print(f"{'function':<10}{'range':>22}{'triton':>18}{'libdevice':>18}{'eager':>18}")
    for k, name in enumerate(_MATH):
        x = inputs[name]
        exact = eager[name](x.double())
        keep = exact.abs() > 1e-6
        ulp = (exact.float().abs().nextafter(torch.tensor(float("inf"), device=DEVICE)) - exact.float().abs()).double()
        cells = []
        for libdevice_fn in (False, True):
            if libdevice_fn and not gpu:
                cells.append("-")
                continue
            out = torch.empty_like(x)
            _math[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024, FN=k, LIBDEVICE=libdevice_fn)
            error = ((out.double() - exact).abs() / ulp)[keep]
            cells.append(f"{error.max().item():.2f} / {error.mean().item():.3f}")
        error = ((eager[name](x).double() - exact).abs() / ulp)[keep]
        cells.append(f"{error.max().item():.2f} / {error.mean().item():.3f}")
        span = f"[{x.min().item():.3g}, {x.max().item():.3g}]"
        print(f"{name:<10}{span:>22}{cells[0]:>18}{cells[1]:>18}{cells[2]:>18}")


if __name__ == "__main__":
    main()
    exp_table()
    math_table()
