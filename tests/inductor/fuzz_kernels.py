"""Differential fuzzing of kiln.inductor: seeded random programs of pointwise ops, norms,
reductions over either dimension, cumsum, views (transposed copies, slices, flips, expands)
and in-place-free concatenation, on ``[rows, cols]`` inputs (one maybe transposed), in
float32 or bfloat16, sometimes with dynamic sizes (called at two sizes) and sometimes with
gradients; each compiled by kiln (C++ or Triton) and compared with eager: values, dtypes,
sizes, strides, and the inputs' gradients. The tolerances are the dtypes' rounding: kiln
computes a fused chain in float32 (rounding each half op as eager) and reduces in another order than eager, so float32 values
agree to about 1e-4 after up to seven ops (exp, std, cumsum over 130 elements), and bfloat16
ones (8 bits of mantissa; reductions and transcendental functions in another order or library) to a few of its
2**-8 ulps, 5e-2; gradients, a second chain as long, get ten times those. A value outside
them passes only if it is as close to the program's float64 value as eager's is
(``_as_accurate_as_eager``: eager's rounding of intermediates is itself off where a sum cancels).

It found, in its first runs: a wrong gradient (an ATen ``conj_physical`` returning its
argument, ``test_inplace.py``), output strides other than eager's (``test_layout.py``), and
bfloat16 rounding in triton's interpreter (``test_triton_rounding.py``).

The ``extremes`` family (transcendental functions into maxima, minima and comparisons, at
sizes whose loops leave scalar tails) found NaN gradients of ``amax`` (seed 144: aotgrad
recomputed the value its backward compared with the saved maximum, in a loop glibc's scalar
``erff`` ran where the forward's had run the vector one).

``check(seed, backend, family)`` returns None or the failure as text; ``test_kernel_fuzz.py``
runs a few seeds. A longer run::

    TRITON_INTERPRET=1 python tests/inductor/fuzz_kernels.py triton 0 200
    python tests/inductor/fuzz_kernels.py cpp 0 200
    python tests/inductor/fuzz_kernels.py cpp 0 300 extremes
    python tests/inductor/fuzz_kernels.py cpp 0 300 twins
"""

from __future__ import annotations

import logging
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


_WIDE_OPS = 20


def _op_wide(k: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The second family: matrix products, gathers and scatters (duplicate targets among
    them), argmax ties, integer arithmetic, sorts, pads, 3-d views and whole-tensor sums."""
    rows, cols = a.shape
    # indices and masks made of values only in float32: a bfloat16 chain that eager rounds
    # after each op and kiln once, or in another order, ties or crosses a threshold elsewhere
    # (an argmax of two values an ulp apart; seed 5's ``v > 0.5`` at 0.5 against 0.5039)
    exact = a.dtype == torch.float32
    if k == 0:
        return (a @ b.t()) @ a / cols
    if k == 1:
        return F.linear(a, (b.t() @ b) / rows, b[0])
    if k == 2:
        index = (b.abs() * cols).long().clamp(max=cols - 1) if exact else (b * 0).long() + cols // 2
        return torch.gather(a, 1, index) + b
    if k == 3:
        return a[:, torch.arange(cols - 1, -1, -1, device=a.device)] * b
    if k == 4:
        index = (a.abs() * 3).long().clamp(max=cols - 1) if exact else (a * 0).long()
        return torch.zeros_like(a).scatter_add(1, index, b)
    if k == 5:
        mask = b > 0.5 if exact else (torch.arange(cols, device=a.device) % 3 == 0).expand(rows, cols)
        return a.masked_fill(mask, -1.0)
    if k == 6:
        return torch.logsumexp(a, -1, keepdim=True) - b
    if k == 7:
        var, mean = torch.var_mean(a, 0, keepdim=True)
        return (a - mean) * torch.rsqrt(var + 1) + b
    if k == 8:  # (in bfloat16 no gradient through the maximum: which of two tied values it is decides it)
        top = (a if exact else a.detach()).max(-1, keepdim=True)
        return top.values * b + (top.indices.to(a.dtype) if exact else 0)
    if k == 9:
        return F.softplus(a) * ((b >= 0).to(a.dtype) if exact else b.sigmoid())
    if k == 10:
        return torch.pow(a.abs() + 0.5, 1.5) - b
    if k == 11:
        return a.reshape(cols, rows).t() + b
    if k == 12:
        return F.pad(a[:, 1:], (0, 1)) * b
    if k == 13:
        return (((a * 4).floor() if exact else a * 0 - 5).to(torch.int64) % 3).to(a.dtype) * b
    if k == 14:
        return a.unsqueeze(0).expand(2, -1, -1).permute(1, 0, 2).sum(1) - b
    if k == 15:
        return a.amin(0, keepdim=True) + b * b.mean()
    if k == 16:
        return torch.sort(a, -1).values * b
    if k == 17:
        return a.index_add(0, torch.arange(rows, device=a.device) % 2, b)
    if k == 18:
        return a / (b.abs() + 1)
    return torch.sigmoid(a).cumprod(-1) + b


_EXTREME_OPS = 12


def _op_extremes(k: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The third family: functions whose vector and scalar versions differ in an ulp (glibc's
    libm in a vectorized loop's body and in its scalar tail), and the extremes and comparisons
    that read their bits: a value computed by two kernels must be the same value (amax's
    backward looks for ``x == amax(x)``; it once recomputed ``x`` elsewhere: NaN gradients).
    In bfloat16 the extremes take no gradient (ties: which of two equal values is the maximum
    decides it) and no mask is made of values."""
    exact = a.dtype == torch.float32

    def extreme(v: torch.Tensor) -> torch.Tensor:
        return v if exact else v.detach()

    if k == 0:
        return torch.tanh(a * 1.3 + b)
    if k == 1:
        return torch.sin(a) * b
    if k == 2:
        return torch.erf(a) - b
    if k == 3:
        return F.gelu(a) + torch.sigmoid(b)
    if k == 4:
        return torch.atan(a) * torch.cos(b)
    if k == 5:
        return torch.log1p(a.abs()) + b
    if k == 6:
        return extreme(a).amax(0, keepdim=True) + b
    if k == 7:
        return extreme(a).amin(-1, keepdim=True) * b
    if k == 8:
        return torch.maximum(a, b) if exact else torch.maximum(a.detach(), b.detach()) + a - a.detach()
    if k == 9:
        return extreme(a).max(-1, keepdim=True).values - b
    if k == 10:
        return a - extreme(a).amax(-1, keepdim=True)
    return torch.where(a == a.amax(0, keepdim=True), b, a) if exact else a * b


FAMILIES = {"basic": (_OPS, _op), "wide": (_WIDE_OPS, _op_wide), "extremes": (_EXTREME_OPS, _op_extremes),
            "twins": (_OPS, _op)}
# rows and columns a family draws from (others: 2-64 by 3-130): the extremes' are narrower
# than a vector of floats or leave a tail, so loops of one kernel run scalar where another's
# are vectorized
_SIZES = {"extremes": ([5, 17, 33], [3, 7, 9, 37])}


def program(rng: random.Random, family: str = "basic"):
    """A function of ``(x, y)`` of 2-7 steps of ``family``'s ops, returning 1-2 of their
    values, and its steps. The ``twins`` family: a function of ``(x, y, u, v)``, a basic
    program applied to ``(x, y)`` and again to ``(u, v)`` (a model's repeated layers: kernels
    that differ only in names, which kiln compiles once, ``_twins``)."""
    count, _op = FAMILIES["basic" if family == "twins" else family]
    steps = [(rng.randrange(count), rng.randrange(100), rng.randrange(100)) for _ in range(rng.randint(2, 7))]
    outs = rng.sample(range(len(steps)), k=min(len(steps), rng.randint(1, 2)))

    def f(x, y):
        values = [x, y]
        for k, i, j in steps:
            values.append(_op(k, values[i % len(values)], values[j % len(values)]))
        return tuple(values[2 + i] for i in outs)

    if family == "twins":
        return (lambda x, y, u, v: f(x, y) + f(u, v)), steps, outs
    return f, steps, outs


def _as_accurate_as_eager(actual: torch.Tensor, expected: torch.Tensor, exact: torch.Tensor,
                         tol: dict[str, float]) -> bool:
    """Whether ``actual``, which is not close to eager's ``expected``, is as close to ``exact``
    (the program in float64 on the same inputs) as eager is, up to a factor of 2 and the
    tolerances: each element's error within 2 times the largest of eager's errors plus
    ``atol``. Eager rounds every intermediate to the dtype and kiln a fused chain only once,
    so where a bfloat16 sum of terms about 40 cancels, eager's own result is 0.25 (an ulp at
    40) off, and kiln's as much from eager's while closer to the exact value (seed 767). A
    wrong kernel is far from both."""
    exact = exact.to(actual.device)
    if actual.shape != exact.shape:
        return False
    eager_error = (expected.double() - exact).abs()
    error = (actual.double() - exact).abs()
    finite = exact.isfinite()
    if not torch.equal(finite, actual.isfinite()) or not torch.equal(finite, expected.isfinite()):
        return False
    bound = 2 * eager_error[finite].max() + tol["atol"] if finite.any() else 0
    return bool((error[finite] <= bound).all())


def _meta_layout(f, inputs: list[torch.Tensor], k: int) -> tuple:
    """Output ``k``'s dtype, sizes and strides by torch's own meta kernels (its fake tensors,
    what torch.compile returns too): where they differ from eager's, kiln follows them
    (basic seed 1245: a bfloat16 ``sum(-1, keepdim=True).expand_as(x) + x`` of a transposed
    ``x``, eager (1, 64), torch's meta and torch.compile (33, 1))."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    fakes = [mode.from_tensor(t.detach()) for t in inputs]
    with mode, torch.no_grad():
        out = f(*fakes)[k]
        return out.dtype, out.shape, out.stride()


def _double_grads(f, inputs: list[torch.Tensor], weights: list[torch.Tensor]) -> tuple:
    """The gradients of ``f`` at ``inputs`` in float64, for ``_as_accurate_as_eager``."""
    doubles = [t.detach().double().requires_grad_() for t in inputs]
    return torch.autograd.grad(f(*doubles), doubles, [w.double() for w in weights], allow_unused=True)


def check(seed: int, backend: str, family: str = "basic") -> str | None:
    """Program ``seed`` of ``family`` compiled with kiln's ``backend`` ("cpp" or "triton":
    CUDA tensors on a GPU, else CPU tensors through triton's interpreter) against eager; None,
    or what differs."""
    rng = random.Random(seed)
    dtype = rng.choice([torch.float32, torch.float32, torch.bfloat16])
    dynamic, grad = rng.random() < 0.4, rng.random() < 0.4
    f, steps, outs = program(rng, family)
    row_sizes, col_sizes = _SIZES.get(family, ([2, 5, 17, 64], [3, 8, 33, 130]))
    sizes = [(rng.choice(row_sizes), rng.choice(col_sizes))]
    if dynamic:
        sizes.append((sizes[0][0] + rng.randint(1, 9), sizes[0][1] + rng.randint(1, 9)))
    cuda = backend == "triton" and torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    options = {"inductor.cpu_backend": "triton"} if backend == "triton" and not cuda else None
    what = f"seed {seed} ({backend}, {family}, {dtype}, dynamic={dynamic}, grad={grad}, steps={steps}, outputs={outs})"
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=5e-2, atol=5e-2)
    kiln.reset()
    compiled = kiln.compile(f, options=options, dynamic=dynamic or None, fullgraph=True)
    for rows, cols in sizes:
        g = torch.Generator().manual_seed(seed * 7 + rows)
        inputs = [torch.randn(rows, cols, generator=g).to(dtype) for _ in range(4 if family == "twins" else 2)]
        if rng.random() < 0.3:
            inputs[0] = torch.randn(cols, rows, generator=g).to(dtype).t()
        eager_in = [t.clone().to(device).requires_grad_(grad) for t in inputs]
        kiln_in = [t.clone().to(device).requires_grad_(grad) for t in inputs]
        with torch.set_grad_enabled(grad):
            expected, actual = f(*eager_in), compiled(*kiln_in)
        for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
            if (a.dtype, a.shape, a.stride()) != (e.dtype, e.shape, e.stride()) \
                    and (a.dtype, a.shape, a.stride()) != _meta_layout(f, eager_in, k):
                return f"{what}: output {k} is {a.dtype} {tuple(a.shape)} {a.stride()}, eager's " \
                       f"{e.dtype} {tuple(e.shape)} {e.stride()}"
            try:
                torch.testing.assert_close(a, e, equal_nan=True, **tol)
            except AssertionError as error:
                if not _as_accurate_as_eager(a, e, f(*[t.detach().double() for t in eager_in])[k], tol):
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
                grad_tol = dict(rtol=tol["rtol"] * 10, atol=tol["atol"] * 10)
                try:
                    torch.testing.assert_close(a, e, equal_nan=True, **grad_tol)
                except AssertionError as error:
                    if not _as_accurate_as_eager(a, e, _double_grads(f, eager_in, weights)[k], grad_tol):
                        return f"{what}: input {k}'s gradient at {rows}x{cols}: " \
                               f"{str(error).strip().splitlines()[0]}"
    return None


class _Fallbacks(logging.Handler):
    """kiln's warnings (a graph run as captured, a frame run eagerly): findings too."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


if __name__ == "__main__":
    backend, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    family = sys.argv[4] if len(sys.argv) > 4 else "basic"
    kiln.config.raise_internal_errors = True  # kiln's own errors fail the program, not fall back
    import conftest  # noqa: F401  (under TRITON_INTERPRET=1: the GPU's bfloat16 rounding, as in the tests)
    fallbacks = _Fallbacks()
    logging.getLogger("kiln").addHandler(fallbacks)
    failures = []
    for seed in range(first, first + count):
        fallbacks.messages.clear()
        try:
            text = check(seed, backend, family)
        except Exception as error:  # a finding, reported with the others
            text = f"seed {seed} ({backend}, {family}) raised {type(error).__name__}: {error}"
        if text is None and fallbacks.messages:
            text = f"seed {seed} ({backend}, {family}) fell back: {fallbacks.messages[0]}"
        if text is not None:
            failures.append(text)
            print(text, flush=True)
    print(f"{count} programs, {len(failures)} failures")
