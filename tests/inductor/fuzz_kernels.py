"""Differential fuzzing of kiln.inductor: seeded random programs of pointwise ops, norms,
reductions over either dimension, cumsum, views (transposed copies, slices, flips, expands)
and in-place-free concatenation, on ``[rows, cols]`` inputs (one maybe transposed), in
float32 or bfloat16, sometimes with dynamic sizes (called at two sizes) and sometimes with
gradients; each compiled by kiln (C++ or Triton) and compared with eager: values, dtypes,
sizes, strides, and the inputs' gradients. The tolerances are the dtypes' rounding: kiln
computes a fused chain in float32 and reduces in another order than eager, so float32 values
agree to about 1e-4 after up to seven ops (exp, std, cumsum over 130 elements), and bfloat16
ones (8 bits of mantissa, rounded per op by eager, once per store by kiln) to a few of its
2**-8 ulps, 5e-2; gradients, a second chain as long, get ten times those.

It found, in its first runs: a wrong gradient (an ATen ``conj_physical`` returning its
argument, ``test_inplace.py``), output strides other than eager's (``test_layout.py``), and
bfloat16 rounding in triton's interpreter (``test_triton_rounding.py``).

``check(seed, backend)`` returns None or the failure as text; ``test_kernel_fuzz.py`` runs a
few seeds. A longer run::

    TRITON_INTERPRET=1 python tests/inductor/fuzz_kernels.py triton 0 200
    python tests/inductor/fuzz_kernels.py cpp 0 200
"""

from __future__ import annotations

import random
import sys

import torch
import torch.nn.functional as F

import kiln

_OPS = 16


def _op(k: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if k == 0:
        return a + b
    if k == 1:
        return a * b.sigmoid()
    if k == 2:
        return torch.tanh(a) - b
    if k == 3:
        return a.t().contiguous().t() * 1.5
    if k == 4:
        return (a - a.mean(-1, keepdim=True)) / (a.std(-1, keepdim=True) + 1)
    if k == 5:
        return a.sum(0, keepdim=True) + b
    if k == 6:
        return torch.softmax(a, 0) * b
    if k == 7:
        return a.cumsum(-1) * 0.1
    if k == 8:
        return F.gelu(a) + b.amax(0, keepdim=True)
    if k == 9:
        return a.exp().log1p() - b
    if k == 10:
        return torch.cat([a[:, :1] * 2, a[:, 1:]], 1)
    if k == 11:
        return a.flip(-1) + b
    if k == 12:
        return torch.where(b > 0, a, -a)
    if k == 13:
        return (a * b).sum(-1, keepdim=True).expand_as(a) + a
    if k == 14:
        return F.layer_norm(a, a.shape[-1:]) * b
    return a.clamp(-1, 1) * b.abs()


def program(rng: random.Random):
    """A function of ``(x, y)`` of 2-7 steps, returning 1-2 of their values, and its steps."""
    steps = [(rng.randrange(_OPS), rng.randrange(100), rng.randrange(100)) for _ in range(rng.randint(2, 7))]
    outs = rng.sample(range(len(steps)), k=min(len(steps), rng.randint(1, 2)))

    def f(x, y):
        values = [x, y]
        for k, i, j in steps:
            values.append(_op(k, values[i % len(values)], values[j % len(values)]))
        return tuple(values[2 + i] for i in outs)

    return f, steps, outs


def check(seed: int, backend: str) -> str | None:
    """Program ``seed`` compiled with kiln's ``backend`` ("cpp" or "triton": CUDA tensors on
    a GPU, else CPU tensors through triton's interpreter) against eager; None, or what differs."""
    rng = random.Random(seed)
    dtype = rng.choice([torch.float32, torch.float32, torch.bfloat16])
    dynamic, grad = rng.random() < 0.4, rng.random() < 0.4
    f, steps, outs = program(rng)
    sizes = [(rng.choice([2, 5, 17, 64]), rng.choice([3, 8, 33, 130]))]
    if dynamic:
        sizes.append((sizes[0][0] + rng.randint(1, 9), sizes[0][1] + rng.randint(1, 9)))
    cuda = backend == "triton" and torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    options = {"inductor.cpu_backend": "triton"} if backend == "triton" and not cuda else None
    what = f"seed {seed} ({backend}, {dtype}, dynamic={dynamic}, grad={grad}, steps={steps}, outputs={outs})"
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=5e-2, atol=5e-2)
    kiln.reset()
    compiled = kiln.compile(f, options=options, dynamic=dynamic or None, fullgraph=True)
    for rows, cols in sizes:
        g = torch.Generator().manual_seed(seed * 7 + rows)
        x = torch.randn(rows, cols, generator=g).to(dtype)
        y = torch.randn(rows, cols, generator=g).to(dtype)
        if rng.random() < 0.3:
            x = torch.randn(cols, rows, generator=g).to(dtype).t()
        eager_in = [t.to(device).requires_grad_(grad) for t in (x.clone(), y.clone())]
        kiln_in = [t.to(device).requires_grad_(grad) for t in (x.clone(), y.clone())]
        with torch.set_grad_enabled(grad):
            expected, actual = f(*eager_in), compiled(*kiln_in)
        for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
            if (a.dtype, a.shape, a.stride()) != (e.dtype, e.shape, e.stride()):
                return f"{what}: output {k} is {a.dtype} {tuple(a.shape)} {a.stride()}, eager's " \
                       f"{e.dtype} {tuple(e.shape)} {e.stride()}"
            try:
                torch.testing.assert_close(a, e, equal_nan=True, **tol)
            except AssertionError as error:
                return f"{what}: output {k} at {rows}x{cols}: {str(error).strip().splitlines()[0]}"
        if grad:
            weights = [torch.randn(e.shape, generator=g).to(e.dtype).to(device) for e in expected]
            wanted = torch.autograd.grad(expected, eager_in, weights, allow_unused=True)
            got = torch.autograd.grad(actual, kiln_in, weights, allow_unused=True)
            for k, (a, e) in enumerate(zip(got, wanted, strict=True)):
                if e is None:
                    if a is not None and a.any():
                        return f"{what}: input {k} has a gradient where eager's has none"
                    continue
                try:
                    torch.testing.assert_close(a, e, equal_nan=True, rtol=tol["rtol"] * 10, atol=tol["atol"] * 10)
                except AssertionError as error:
                    return f"{what}: input {k}'s gradient at {rows}x{cols}: {str(error).strip().splitlines()[0]}"
    return None


if __name__ == "__main__":
    backend, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    failures = [text for seed in range(first, first + count) if (text := check(seed, backend)) is not None]
    print("\n".join(failures))
    print(f"{count} programs, {len(failures)} failures")
