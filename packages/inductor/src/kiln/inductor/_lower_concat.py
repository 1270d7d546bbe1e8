"""Lowering rules that place several values side by side: ``cat`` and ``constant_pad_nd``,
as pointwise values (so they fuse into what reads them).

Each element reads every input it may come from at a clamped index (always inside that
input), and a ``where`` on the element's position picks the right one: no load ever leaves
its buffer, whatever the element. Negative padding (cropping) and a cat of more than
``_MAX_INPUTS`` tensors (each element would read them all) are ATen calls.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ._ir import TensorValue, sym
from ._lowering import KERNEL_DTYPES, Fallback, LoweringContext, out_dtype, register, scalar

__all__: list[str] = []

aten = torch.ops.aten
_MAX_INPUTS = 8


@functools.lru_cache(maxsize=4096)
def _clamp(expr: sympy.Expr, size: sympy.Expr) -> sympy.Expr:
    """``expr`` clamped into ``[0, size - 1]``, each bound left out where the assumptions on
    ``expr``'s symbols show it holds. Cached, and built unevaluated after two sign queries:
    sympy's evaluating ``Min``/``Max`` compare their arguments pairwise (3-11 ms a call here,
    78 ms of a transformer block's training-step compile on the H100, profiled), and a model's
    repeated layers ask the same clamps (a 12-layer GPT-2's training step: 76 calls, 5
    distinct)."""
    upper = size - 1
    if expr.is_number and upper.is_number:
        return sympy.Max(sympy.Min(expr, upper), 0)
    fits = (upper - expr).is_nonnegative  # expr <= size - 1 for every value of its symbols
    inner = expr if fits else sympy.Min(expr, upper, evaluate=False)
    if expr.is_nonnegative and (fits or upper.is_nonnegative):
        return inner
    return sympy.Max(inner, 0, evaluate=False)


@register(aten.cat.default)
def _cat(ctx: LoweringContext, node: Any, tensors: Sequence[Any], dim: int = 0) -> TensorValue:
    dtype = out_dtype(node)
    sizes = tuple(sym(s) for s in node.meta["val"].shape)
    ndim = len(sizes)
    # torch skips 1-d empty tensors (legacy); empty pieces along `dim` add nothing
    parts = [t for t in tensors if isinstance(t, TensorValue) and not (t.ndim == 1 and t.sizes[0] == 0)]
    if dtype not in KERNEL_DTYPES or any(not isinstance(t, TensorValue) or t.dtype not in KERNEL_DTYPES
                                         for t in tensors):
        raise Fallback(f"cat of {dtype}")
    if not parts or any(t.ndim != ndim for t in parts):
        raise Fallback("cat of tensors of different ranks")
    dim = dim + ndim if dim < 0 else dim
    parts = [t for t in parts if t.sizes[dim] != 0]
    if len(parts) > _MAX_INPUTS or not parts:
        raise Fallback(f"cat of {len(parts)} tensors")
    starts, start = [], sympy.S.Zero
    for t in parts:
        starts.append(start)
        start = start + t.sizes[dim]

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        at = index[dim]
        result = None
        for k in range(len(parts) - 1, -1, -1):
            t = parts[k]
            own = [*index[:dim], _clamp(at - starts[k], t.sizes[dim]), *index[dim + 1:]]
            value = t.loader(own, ops)
            value = value if t.dtype == dtype else ops.to_dtype(value, dtype)
            if result is None:
                result = value
            else:
                before_next = ops.lt(ops.index_expr(at, torch.int64), ops.index_expr(starts[k + 1], torch.int64))
                result = ops.where(before_next, value, result)
        return result

    return TensorValue(sizes, dtype, loader, None, sum(t.ops_count + 3 for t in parts))


@register(aten.constant_pad_nd.default)
def _constant_pad(ctx: LoweringContext, node: Any, x: TensorValue, pad: Sequence[Any], value: Any = 0) -> TensorValue:
    dtype = out_dtype(node)
    if dtype not in KERNEL_DTYPES or x.dtype not in KERNEL_DTYPES:
        raise Fallback(f"pad of {dtype}")
    pads = [sym(p) for p in pad]
    if any(not isinstance(p, sympy.Integer) or p < 0 for p in pads):
        raise Fallback("negative or symbolic padding")
    sizes = tuple(sym(s) for s in node.meta["val"].shape)
    # pad lists (left, right) pairs from the last dimension backwards
    lefts = {x.ndim - 1 - i: pads[2 * i] for i in range(len(pads) // 2)}
    fill = scalar(value, dtype)
    load = x.loader

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        inside = None
        own = list(index)
        for d, left in lefts.items():
            shifted = index[d] - left
            own[d] = _clamp(shifted, x.sizes[d])
            position = ops.index_expr(shifted, torch.int64)
            ok = ops.logical_and(ops.ge(position, ops.index_expr(sympy.S.Zero, torch.int64)),
                                 ops.lt(position, ops.index_expr(x.sizes[d], torch.int64)))
            inside = ok if inside is None else ops.logical_and(inside, ok)
        element = load(own, ops)
        element = element if x.dtype == dtype else ops.to_dtype(element, dtype)
        if inside is None:
            return element
        return ops.where(inside, element, fill.loader((), ops))

    if any(s == 0 for s in x.sizes):
        raise Fallback("padding an empty tensor")
    return TensorValue(sizes, dtype, loader, None, x.ops_count + 4 * len(lefts))
