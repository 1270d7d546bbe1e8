"""Split reductions: a reduction of many elements to a few results, for Triton kernels, in two
steps.

A Triton row kernel gives each result (a row) to one program. A reduction to one value (a
loss's ``sum``, a norm, ``x.max()``) is then one program looping over every element: one of
a GPU's streaming multiprocessors doing all the work. Here such a reduction of ``n`` elements
to ``out`` results (``out`` at most ``SPLIT_MAX_OUTPUTS``, ``n`` at least
``SPLIT_MIN_ELEMENTS``) becomes a first reduction of ``splits`` chunks of
``chunk`` consecutive elements each (in the reduced dimensions' row-major order), giving
``out x splits`` partial results kept in the accumulation type (float32 for half types),
then a second reduction of each result's partials: the same fold (a sum of sums, a max of
maxes, ...). The last chunk's lanes past ``n`` hold the fold's identity and read element
``n - 1`` (never out of bounds). ``argmax``/``argmin`` are not split.

A reduction over a tensor's leading dimensions to many results (``out`` at least
``SPLIT_COLUMN_MIN_OUTPUTS``, ``n`` at least ``SPLIT_COLUMN_MIN_ELEMENTS``: the sum over
a batch's rows giving a bias's or a norm weight's gradient) is split too, by rows: a Triton
kernel reads such a sum along its results (neighbouring results, neighbouring elements:
``triton/_kernel._columns``), 64 results per program, so ``out / 64`` programs alone would
leave most of a GPU idle. Its partials are ordered ``(splits, *kept)``, each split's results
side by side, which the second reduction reads the same way; ``splits`` gives about
``SPLIT_COLUMN_PROGRAMS`` programs, each chunk at least ``SPLIT_COLUMN_MIN_CHUNK`` rows.

A dynamic size is judged by its value on the example inputs (as autotuning is): the number
of chunks is then fixed and the chunk, ``ceil(n / splits)``, is an argument of the kernels,
which are right for any ``n`` (the last chunks short or empty). A size no example decides (an
unbacked one) is not split.

C++ kernels reduce in parallel over their own loops and are not split.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from kiln.symshapes import FloorDiv, Mod

from ._ir import TensorValue
from ._lowering import LoweringContext
from ._ops import HALF_DTYPES, compute_type

__all__ = ["split_count", "split_reduce"]

SPLIT_MAX_OUTPUTS = 8  # results of a reduction that is split (each gets ``splits`` programs)
SPLIT_MIN_ELEMENTS = 65536  # elements per result below which one program reduces them
SPLIT_CHUNK = 4096  # elements per program of the first step (at most SPLIT_MAX_CHUNKS programs per result)
SPLIT_MAX_CHUNKS = 1024
SPLIT_COLUMN_MIN_OUTPUTS = 32  # results of a reduction over leading dims that is split by rows
SPLIT_COLUMN_MIN_ELEMENTS = 1024  # rows (elements per result) below which it is not
SPLIT_COLUMN_MIN_CHUNK = 64  # rows per chunk at least
SPLIT_COLUMN_PROGRAMS = 512  # programs of the partial reduction aimed at (of 64 results each)
SPLIT_COLUMN_BLOCK = 64  # results per program (``triton/_kernel.COLUMN_XBLOCK``)


def split_count(ctx: LoweringContext, x: TensorValue, dims: Sequence[int], reduction_type: str) -> int | None:
    """How many chunks a reduction of ``x`` over ``dims`` is split into, or None (not split).
    A symbolic size is judged by its value on the example inputs (``ctx.hint``); the kernels
    are right for every value (a split of a dynamic size counts chunks, not rows)."""
    if ctx.language != "triton" or reduction_type in ("argmax", "argmin") or not dims:
        return None
    n_expr = sympy.Mul(*(x.sizes[d] for d in dims))
    n, out = ctx.hint(n_expr), ctx.hint(sympy.Mul(*(x.sizes[d] for d in range(x.ndim) if d not in set(dims))))
    if n is None or out is None:
        return None
    if _by_rows(x, dims, out):
        if n < SPLIT_COLUMN_MIN_ELEMENTS:
            return None
        blocks = -(-out // SPLIT_COLUMN_BLOCK)
        target = min(-(-SPLIT_COLUMN_PROGRAMS // blocks), n // SPLIT_COLUMN_MIN_CHUNK, SPLIT_MAX_CHUNKS)
        if target < 2:
            return None
    elif out > SPLIT_MAX_OUTPUTS or n < SPLIT_MIN_ELEMENTS:
        return None
    else:
        target = min(SPLIT_MAX_CHUNKS, -(-n // SPLIT_CHUNK))
    if not isinstance(n_expr, sympy.Integer):
        return target
    # a count dividing n where one is near: every chunk full, no lane to mask
    near = [s for s in range(max(2, target // 2), min(SPLIT_MAX_CHUNKS, 2 * target) + 1) if n % s == 0]
    return min(near, key=lambda s: abs(s - target)) if near else target


def _by_rows(x: TensorValue, dims: Sequence[int], out: int) -> bool:
    """Whether a reduction of ``x`` over ``dims`` to ``out`` results (its value on the example
    inputs) is one over its leading dimensions to many results (split by rows: the module
    docstring)."""
    return out >= SPLIT_COLUMN_MIN_OUTPUTS and list(dims) == list(range(len(dims))) and len(dims) < x.ndim


def identity(kind: str, dtype: torch.dtype) -> float | int | bool:
    """The element a ``kind`` fold of ``dtype`` values starts from."""
    if kind in ("sum", "any"):
        return False if dtype == torch.bool else 0
    if kind in ("prod", "all"):
        return True if dtype == torch.bool else 1
    if dtype == torch.bool:
        return kind == "min"
    if dtype.is_floating_point:
        return float("-inf") if kind == "max" else float("inf")
    info = torch.iinfo(dtype)
    return info.min if kind == "max" else info.max


def split_reduce(ctx: LoweringContext, x: TensorValue, dims: Sequence[int], sizes: tuple[sympy.Expr, ...],
                 keepdim: bool, kind: str, dtype: torch.dtype, splits: int,
                 element: Callable[[Any, Any], Any]) -> TensorValue:
    """The ``kind`` reduction of ``x`` over ``dims`` (result ``sizes``, ``keepdim``) in two
    steps (the module docstring); ``element(value, ops)`` converts a loaded element to the
    fold's type."""
    n = sympy.Mul(*(x.sizes[d] for d in dims))
    exact = isinstance(n, sympy.Integer) and int(n) % splits == 0
    chunk = FloorDiv(n + splits - 1, splits)  # ceil(n / splits); a number when n is one
    kept = [d for d in range(x.ndim) if d not in set(dims)]
    rows = _by_rows(x, dims, ctx.hint(sympy.Mul(*(x.sizes[d] for d in kept))) or 0)
    acc = compute_type(dtype)
    start = identity(kind, acc)
    # the stride of each reduced dimension in the reduced range's row-major order
    strides: list[sympy.Expr] = []
    step: sympy.Expr = sympy.Integer(1)
    for d in reversed(dims):
        strides.append(step)
        step = step * x.sizes[d]
    strides.reverse()
    load = x.loader
    dense = _dense_step(x, dims, strides)

    def partial(index: Sequence[sympy.Expr], rindex: Sequence[sympy.Expr], ops: Any) -> Any:
        split, own = (index[0], index[1:]) if rows else (index[-1], index[:-1])
        flat = split * chunk + rindex[0]
        safe = flat if exact else sympy.Min(flat, n - 1)
        full: list[sympy.Expr] = [sympy.Integer(0)] * x.ndim
        for d, i in zip(kept, own, strict=True):
            full[d] = i
        if dense is not None:
            # the reduced dimensions are one run of memory: an affine index (vector loads)
            name, xstrides, offset = x.view
            base = offset + sum((i * st for i, st in zip(full, xstrides, strict=True)), sympy.Integer(0))
            value = element(ops.load(name, base + safe * dense, x.dtype), ops)
        else:
            for d, stride in zip(dims, strides, strict=True):
                full[d] = FloorDiv(safe, stride) if d == dims[0] else Mod(FloorDiv(safe, stride), x.sizes[d])
            value = element(load(full, ops), ops)
        if exact:
            return value
        inside = ops.lt(ops.index_expr(flat, torch.int64), ops.index_expr(n, torch.int64))
        return ops.where(inside, value, ops.constant(start, acc))

    kept_sizes = tuple(x.sizes[d] for d in kept)
    partials = (sympy.Integer(splits), *kept_sizes) if rows else (*kept_sizes, sympy.Integer(splits))
    first = ctx.reduction(partials, acc, kind, (chunk,), partial, acc)
    first_load = first.loader

    def combined(index: Sequence[sympy.Expr], rindex: Sequence[sympy.Expr], ops: Any) -> Any:
        own = [index[d] for d in kept] if keepdim else list(index)
        return first_load([rindex[0], *own] if rows else [*own, rindex[0]], ops)

    return ctx.reduction(sizes, dtype, kind, (sympy.Integer(splits),), combined, acc)


def _dense_step(x: TensorValue, dims: Sequence[int], strides: Sequence[sympy.Expr]) -> sympy.Expr | None:
    """The memory step between consecutive elements of the reduced range of ``x`` when ``x`` is
    a window of a buffer in which the reduced dimensions are one evenly strided run (a
    contiguous tensor's last dimensions: step 1), else None."""
    if x.view is None:
        return None
    xstrides = x.view[1]
    step = xstrides[dims[-1]]
    for d, stride in zip(dims, strides, strict=True):
        if x.sizes[d] != 1 and sympy.simplify(xstrides[d] - step * stride) != 0:
            return None
    return step


def converter(x_dtype: torch.dtype, src: torch.dtype) -> Callable[[Any, Any], Any]:
    """``element`` for ``split_reduce``: a loaded ``x_dtype`` element as ``src``."""
    convert = x_dtype != src or src in HALF_DTYPES
    return (lambda value, ops: ops.to_dtype(value, src)) if convert else (lambda value, ops: value)
