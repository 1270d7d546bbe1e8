"""Lowering rules for reductions, and the normalizations built from them (softmax,
log-softmax, layer norm, variance, logsumexp).

Each reduction is a buffer (``ctx.reduction``); what follows it (a mean's division, a
softmax's exponentials and division) is pointwise over the reduction's result, so the
scheduler can put it in the same kernel, in the same loop over the kept dimensions.
Variance takes two passes over each row (the mean, then the squared deviations), both in
that one kernel: as exact as Welford's update for rows that fit in cache, with no
per-element division.

Half inputs (bfloat16, float16) are reduced in float32 (sums in double, as float32's): a
reduction whose result is the op's (``sum``, ``amax``, ...) is a buffer of the half type,
rounded once when stored; the reductions inside a normalization (a mean, a softmax's max
and sum, a variance) are float32 and so are the steps between them, and only the op's
results are half values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ._ir import TensorValue, contiguous_strides
from ._lower_split import converter, split_count, split_reduce
from ._lowering import (
    KERNEL_DTYPES,
    Fallback,
    LoweringContext,
    broadcast,
    nonzero,
    out_dtype,
    pointwise,
    register,
    retype,
)
from ._ops import HALF_DTYPES, compute_type

__all__: list[str] = []

aten = torch.ops.aten
_FLOAT = frozenset({torch.float32, torch.float64, torch.bfloat16, torch.float16})


def _dims(x: TensorValue, dims: Any) -> list[int]:
    if x.ndim == 0:  # dim 0 or -1 of a 0-d tensor: nothing to reduce
        return []
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(x.ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d + x.ndim if d < 0 else d for d in dims})


def reduce(ctx: LoweringContext, x: TensorValue, dims: Sequence[int], keepdim: bool, reduction_type: str,
           dtype: torch.dtype, online: tuple[str, str] | None = None) -> TensorValue:
    """``reduction_type`` of ``x`` over ``dims`` (sorted, nonnegative), as a buffer of
    ``dtype``; the elements are converted to ``compute_type(dtype)`` first (``argmax``/
    ``argmin``: compared in their own dtype, a half one rounded, giving int64).
    ``online``: see ``_ir.Reduction``."""
    if dtype not in KERNEL_DTYPES or x.dtype not in KERNEL_DTYPES:
        raise Fallback(f"reduction over {x.dtype} to {dtype}")
    reduced = tuple(x.sizes[d] for d in dims)
    if any(s == 0 for s in reduced):
        raise Fallback("a reduction over an empty dimension")
    dims_set = set(dims)
    kept = [d for d in range(x.ndim) if d not in dims_set]
    sizes = tuple(sympy.Integer(1) if d in dims_set else x.sizes[d] for d in range(x.ndim)) if keepdim else \
        tuple(x.sizes[d] for d in kept)
    load = x.loader
    arg = reduction_type in ("argmax", "argmin")
    src = x.dtype if arg else compute_type(dtype)
    splits = None if online is not None else split_count(ctx, x, dims, reduction_type)
    if splits is not None:
        return split_reduce(ctx, x, dims, sizes, keepdim, reduction_type, dtype, splits, converter(x.dtype, src))
    convert = x.dtype != src or src in HALF_DTYPES

    def loader(index: Sequence[sympy.Expr], rindex: Sequence[sympy.Expr], ops: Any) -> Any:
        full: list[sympy.Expr] = [sympy.Integer(0)] * x.ndim
        own = iter(index[d] for d in kept) if keepdim else iter(index)
        for d in kept:
            full[d] = next(own)
        for d, r in zip(dims, rindex, strict=True):
            full[d] = r
        value = load(full, ops)
        return ops.to_dtype(value, src) if convert else value

    return ctx.reduction(sizes, dtype, reduction_type, reduced, loader, src, online)


def _numel(x: TensorValue, dims: Sequence[int]) -> sympy.Expr:
    return sympy.Mul(*(x.sizes[d] for d in dims))


def _scale(value: TensorValue, factor: Any, dtype: torch.dtype) -> TensorValue:
    """``value`` times ``factor`` (a number) or divided by it (a size expression), in
    ``dtype`` (not a half type: constants would be rounded)."""
    load = value.loader
    expr = sympy.sympify(factor)

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        if isinstance(expr, sympy.Number):
            f = ops.constant(float(expr), dtype)
        else:
            f = ops.to_dtype(ops.index_expr(expr, torch.int64), dtype)
        return ops.mul(load(index, ops), f) if isinstance(expr, sympy.Number) else ops.truediv(load(index, ops), f)

    return TensorValue(value.sizes, dtype, loader, None, value.ops_count + 1)


@register(aten.sum.dim_IntList, aten.sum.default)
def _sum(ctx: LoweringContext, node: Any, x: TensorValue, dims: Any = None, keepdim: bool = False, *,
         dtype: Any = None) -> TensorValue:
    return reduce(ctx, x, _dims(x, dims), keepdim, "sum", out_dtype(node))


@register(aten.prod.dim_int, aten.prod.default)
def _prod(ctx: LoweringContext, node: Any, x: TensorValue, dim: Any = None, keepdim: bool = False, *,
          dtype: Any = None) -> TensorValue:
    return reduce(ctx, x, _dims(x, dim), keepdim, "prod", out_dtype(node))


@register(aten.mean.dim, aten.mean.default)
def _mean(ctx: LoweringContext, node: Any, x: TensorValue, dims: Any = None, keepdim: bool = False, *,
          dtype: Any = None) -> TensorValue:
    out = out_dtype(node)
    if out not in _FLOAT:
        raise Fallback("mean of integers")
    d = _dims(x, dims)
    compute = compute_type(out)
    total = reduce(ctx, x, d, keepdim, "sum", compute)
    n = _numel(x, d)
    return retype(_scale(total, 1 / n if isinstance(n, sympy.Integer) else n, compute), out)


@register(aten.amax.default, aten.amin.default)
def _amax(ctx: LoweringContext, node: Any, x: TensorValue, dims: Any = (), keepdim: bool = False) -> TensorValue:
    kind = "max" if node.target is aten.amax.default else "min"
    return reduce(ctx, x, _dims(x, dims), keepdim, kind, out_dtype(node))


@register(aten.max.dim, aten.min.dim)
def _max_dim(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, keepdim: bool = False) -> tuple:
    kind = "max" if node.target is aten.max.dim else "min"
    d = _dims(x, dim)
    return (reduce(ctx, x, d, keepdim, kind, x.dtype), reduce(ctx, x, d, keepdim, "arg" + kind, torch.int64))


@register(aten.argmax.default, aten.argmin.default)
def _argmax(ctx: LoweringContext, node: Any, x: TensorValue, dim: Any = None, keepdim: bool = False) -> TensorValue:
    kind = "argmax" if node.target is aten.argmax.default else "argmin"
    if dim is None:
        if keepdim:
            raise Fallback("argmax over all dims with keepdim")
        flat = _flatten(ctx, x)
        return reduce(ctx, flat, [0], False, kind, torch.int64)
    return reduce(ctx, x, _dims(x, dim), keepdim, kind, torch.int64)


def _flatten(ctx: LoweringContext, x: TensorValue) -> TensorValue:
    """``x`` as one dimension: computed contiguously first unless it is already."""
    if x.view is None or tuple(x.view[1]) != contiguous_strides(x.sizes):
        x = ctx.realize(TensorValue(x.sizes, x.dtype, x.loader, None, x.ops_count))
    name, _, offset = x.view
    return TensorValue.strided(name, (sympy.Mul(*x.sizes),), (sympy.S.One,), offset, x.dtype)


@register(aten.any.dim, aten.any.dims, aten.any.default, aten.all.dim, aten.all.dims, aten.all.default)
def _any(ctx: LoweringContext, node: Any, x: TensorValue, dims: Any = None, keepdim: bool = False) -> TensorValue:
    kind = node.target.overloadpacket.__name__
    if out_dtype(node) != torch.bool:
        raise Fallback(f"{kind} giving {out_dtype(node)}")
    load = x.loader
    as_bool = x if x.dtype == torch.bool else TensorValue(
        x.sizes, torch.bool, lambda i, ops: nonzero(ops, load(i, ops), x.dtype), None, x.ops_count + 1)
    return reduce(ctx, as_bool, _dims(x, dims), keepdim, kind, torch.bool)


def _variance(ctx: LoweringContext, x: TensorValue, dims: list[int], correction: Any, keepdim: bool,
              dtype: torch.dtype) -> tuple[TensorValue, TensorValue]:
    """(variance, mean) over ``dims``: the mean, then the sum of squared deviations from
    it, divided by ``n - correction``."""
    n = _numel(x, dims)
    total = reduce(ctx, x, dims, True, "sum", dtype)
    mean_keep = _scale(total, 1 / n if isinstance(n, sympy.Integer) else n, dtype)
    mean_b = broadcast(mean_keep, x.sizes)
    x_load, m_load = x.loader, mean_b.loader

    def deviation(index: Sequence[sympy.Expr], ops: Any) -> Any:
        v = x_load(index, ops)
        v = v if x.dtype == dtype else ops.to_dtype(v, dtype)
        d = ops.sub(v, m_load(index, ops))
        return ops.mul(d, d)

    # a Triton kernel looping over the range folds the sum and the squares in one pass
    # (Welford's algorithm: ``_ir.Reduction.online``)
    online = ("welford", total.view[0]) if _looped_in_triton(ctx, x, dims) \
        and split_count(ctx, x, dims, "sum") is None else None
    squares = reduce(ctx, TensorValue(x.sizes, dtype, deviation, None, mean_b.ops_count + 3), dims, keepdim, "sum",
                     dtype, online)
    correction = 1 if correction is None else correction
    if float(correction) == int(correction):
        correction = int(correction)
    elif not isinstance(n, sympy.Integer):
        raise Fallback("a fractional correction with a symbolic count")
    divisor = n - correction
    if isinstance(divisor, (sympy.Number, int, float)):
        if float(divisor) <= 0:
            raise Fallback("variance with no degrees of freedom")
        var = _scale(squares, 1 / float(divisor), dtype)
    else:
        var = _scale(squares, divisor, dtype)
    if keepdim:
        return var, mean_keep
    return var, _drop_dims(mean_keep, dims)


def _drop_dims(value: TensorValue, dims: Sequence[int]) -> TensorValue:
    gone = set(dims)
    kept = [d for d in range(value.ndim) if d not in gone]
    load = value.loader

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        full = [sympy.Integer(0)] * value.ndim
        for d, i in zip(kept, index, strict=True):
            full[d] = i
        return load(full, ops)

    return TensorValue(tuple(value.sizes[d] for d in kept), value.dtype, loader, None, value.ops_count)


@register(aten.var.correction, aten.var_mean.correction)
def _var(ctx: LoweringContext, node: Any, x: TensorValue, dims: Any = None, *, correction: Any = None,
         keepdim: bool = False) -> Any:
    dtype = out_dtype(node, 0 if node.target is aten.var_mean.correction else None)
    if dtype not in _FLOAT:
        raise Fallback(f"variance in {dtype}")
    var, mean = _variance(ctx, x, _dims(x, dims), correction, keepdim, compute_type(dtype))
    if node.target is aten.var_mean.correction:
        return retype(var, dtype), retype(mean, out_dtype(node, 1))
    return retype(var, dtype)


@register(aten._softmax.default, aten._log_softmax.default)
def _softmax(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, half_to_float: bool) -> TensorValue:
    out = out_dtype(node)
    if out not in _FLOAT or compute_type(x.dtype) != compute_type(out):
        raise Fallback(f"softmax of {x.dtype} to {out}")
    dtype = compute_type(out)
    d = _dims(x, dim)
    peak_keep = reduce(ctx, x, d, True, "max", dtype)
    peak = broadcast(peak_keep, x.sizes)
    shifted = pointwise(node, lambda ops, a, m: ops.sub(a, m), x, peak, dtype=dtype)
    exps = pointwise(node, lambda ops, a: ops.exp(a), shifted, dtype=dtype)
    softmax = node.target is aten._softmax.default
    # a Triton kernel looping over the row computes the max and the sum in one pass (online
    # softmax: ``_ir.Reduction.online``), then the outputs in a second, recomputing the
    # exponentials; elsewhere, over the innermost dims, the exponentials are stored once (in
    # the kernel's loop over a row, while it is in cache), summed, then divided in place
    # (``_inplace``), instead of computed twice
    online = _looped_in_triton(ctx, x, d) and split_count(ctx, x, d, "max") is None
    if not online and softmax and out == dtype and d == list(range(x.ndim - len(d), x.ndim)):
        exps = ctx.realize(exps)
    total = broadcast(reduce(ctx, exps, d, True, "sum", dtype, ("softmax", peak_keep.view[0]) if online else None),
                      x.sizes)
    if softmax:
        return retype(pointwise(node, lambda ops, e, s: ops.truediv(e, s), exps, total, dtype=dtype), out)
    return retype(pointwise(node, lambda ops, a, s: ops.sub(a, ops.log(s)), shifted, total, dtype=dtype), out)


def _looped_in_triton(ctx: LoweringContext, x: TensorValue, dims: Sequence[int]) -> bool:
    """Whether a reduction of ``x`` over ``dims`` becomes a Triton kernel looping over blocks of
    its range (a range of unknown size, or wider than ``triton_persistent_max``)."""
    if ctx.language != "triton":
        return False
    numel = _numel(x, dims)
    return not isinstance(numel, sympy.Integer) or int(numel) > ctx.policy.triton_persistent_max


@register(aten.logsumexp.default)
def _logsumexp(ctx: LoweringContext, node: Any, x: TensorValue, dims: Any, keepdim: bool = False) -> TensorValue:
    out = out_dtype(node)
    if out not in _FLOAT or x.dtype != out:
        raise Fallback(f"logsumexp of {x.dtype}")
    dtype = compute_type(out)
    d = _dims(x, dims)
    peak_keep = reduce(ctx, x, d, True, "max", dtype)
    peak = broadcast(peak_keep, x.sizes)

    # a row of -inf (or +inf) has peak inf: shift by 0 there, as torch does
    def shift(ops: Any, a: Any, m: Any) -> Any:
        finite = ops.logical_not(ops.isinf(m))
        return ops.exp(ops.sub(a, ops.where(finite, m, ops.constant(0.0, dtype))))

    total = reduce(ctx, pointwise(node, shift, x, peak, dtype=dtype, cost=4), d, True, "sum", dtype)

    def finish(ops: Any, s: Any, m: Any) -> Any:
        finite = ops.logical_not(ops.isinf(m))
        return ops.add(ops.log(s), ops.where(finite, m, ops.constant(0.0, dtype)))

    result = retype(pointwise(node, finish, total, peak_keep, dtype=dtype, cost=4), out)
    return result if keepdim else _drop_dims(result, d)


@register(aten.native_layer_norm.default)
def _layer_norm(ctx: LoweringContext, node: Any, x: TensorValue, shape: Sequence[Any], weight: Any, bias: Any,
                eps: float) -> tuple:
    out = out_dtype(node, 0)
    if out not in _FLOAT or x.dtype != out:
        raise Fallback(f"layer norm of {x.dtype}")
    dtype = compute_type(out)
    axis = x.ndim - len(shape)
    dims = list(range(axis, x.ndim))
    var, mean = _variance(ctx, x, dims, 0, True, dtype)
    rstd = pointwise(node, lambda ops, v: ops.rsqrt(ops.add(v, ops.constant(eps, dtype))), var, dtype=dtype)
    normed = pointwise(node, lambda ops, a, m, r: ops.mul(ops.sub(a, m), r), x, broadcast(mean, x.sizes),
                       broadcast(rstd, x.sizes), dtype=dtype, cost=2)
    if weight is not None:
        normed = pointwise(node, lambda ops, a, w: ops.mul(a, w), normed, weight, dtype=dtype)
    if bias is not None:
        normed = pointwise(node, lambda ops, a, b: ops.add(a, b), normed, bias, dtype=dtype)
    # a half input's mean and rstd are float32 when the weights are (torch's mixed types)
    return retype(normed, out), retype(mean, out_dtype(node, 1)), retype(rstd, out_dtype(node, 2))
