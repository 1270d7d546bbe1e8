"""Lowering rules for writes at loaded places: ``scatter`` (its src, value and reduce forms),
``scatter_add``, ``scatter_reduce``, ``index_add`` and ``index_put`` (with and without
accumulation; ``_unsafe_index_put`` too, which the gradient of advanced indexing uses).

Each op is functional: its result is a new buffer (``ctx.fresh``) holding ``self``'s
elements, then a scatter step (``_ir.Scatter``) over the index's range writes each source
element at its place in that buffer, or combines it with what is there. The steps run the
range in order, so where two indices meet the later one wins (as eager's serial loops give
it) or both are combined. Indices are checked as eager checks them (scatter and index_add:
``0 <= i < size``; index_put: negative ones count from the end); a kernel that finds one out
of range writes element 0 of its own new buffer instead, and the wrapper raises eager's error
right after that kernel, before anything reads the buffer.

``scatter_reduce`` without ``include_self`` first writes the fold's identity at every place
the index names, so those elements fold the scattered values only; its mean is a sum and a
count, divided where an element was written. Boolean masks (a data-dependent number of
places) and index tensors of other types run as ATen calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ._ir import TensorValue
from ._lower_indexing import advanced_index, checked_sizes, index_tensor, wrap_dim
from ._lowering import Fallback, LoweringContext, broadcast, converted, out_dtype, register, scalar
from ._ops import HALF_DTYPES, IndexCheck, compute_type

aten = torch.ops.aten

__all__: list[str] = []

_OUT_OF_BOUNDS = "index {index} is out of bounds for dimension {dim} with size {size}"
# scatter_reduce's names for the folds a Scatter step knows
_FOLDS = {"sum": "sum", "add": "sum", "prod": "prod", "multiply": "prod", "amax": "max", "amin": "min"}


def _identity(mode: str, dtype: torch.dtype) -> float | int | bool:
    """The element a ``mode`` fold starts from."""
    if mode in ("sum", "prod"):
        return 0 if mode == "sum" else 1
    if dtype == torch.bool:
        return mode == "min"
    if dtype.is_floating_point:
        return -float("inf") if mode == "max" else float("inf")
    info = torch.iinfo(dtype)
    return info.min if mode == "max" else info.max


def _source(src: Any, dtype: torch.dtype) -> TensorValue:
    """``src`` (a value of ``dtype`` or a number) as a value computing in ``dtype``'s compute type."""
    if isinstance(src, TensorValue):
        if src.dtype != dtype:
            raise Fallback(f"a {src.dtype} source for a {dtype} tensor")
        return src
    return scalar(src, compute_type(dtype))


def _along(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, index: Any, src: Any, mode: str | None,
           include_self: bool = True) -> TensorValue:
    """``scatter``'s family: ``out[i][index[i][j]] (op)= src[i][j]`` (for ``dim`` 1), over the
    index's range (``src`` at least as large in every dimension: the trace checked it)."""
    index = index_tensor(index)
    dtype = out_dtype(node)
    if dtype != x.dtype:
        raise Fallback(f"a {dtype} result of a {x.dtype} tensor")
    if x.ndim == 0 or index.ndim != x.ndim:
        raise Fallback("scatter into a 0-d tensor or with an index of another rank")
    dim = wrap_dim(dim, x.ndim)
    value = _source(src, dtype)
    n, load_index, load_src = x.sizes[dim], index.loader, value.loader
    check = IndexCheck("RuntimeError", _OUT_OF_BOUNDS, dim)
    compute = compute_type(dtype)

    def target(idx: Sequence[sympy.Expr], ops: Any) -> list[Any]:
        at = ops.indirect(load_index(idx, ops), n, check)
        return [*idx[:dim], at, *idx[dim + 1:]]

    def loader(idx: Sequence[sympy.Expr], ops: Any) -> Any:
        return ops.to_dtype(load_src(idx if value.ndim else [], ops), compute)

    return _scatter(ctx, node, x, index.sizes, loader, target, mode, include_self)


def _scatter(ctx: LoweringContext, node: Any, x: TensorValue, sizes: Sequence[sympy.Expr], loader: Any, target: Any,
             mode: str | None, include_self: bool) -> TensorValue:
    """``x``'s elements in a new buffer, then written or folded (``mode``) at ``target``."""
    checked_sizes(x.sizes, node)  # before the new buffer exists: a Fallback leaves nothing behind
    result_dtype = x.dtype
    if result_dtype in HALF_DTYPES and mode in ("sum", "prod"):
        # folded in float32, rounded once at the end: eager's CPU scatter_add and CUDA
        # index_put (accumulating) fold in float32 too; a half buffer would round every step
        # (a bfloat16 sum of 36 values 0.07 off, 10 of its ulps)
        x = converted(x, torch.float32)
    if ctx.language != "cpp":
        _check_triton(x.dtype, mode)
    dest = ctx.fresh(x)
    dtype, compute = x.dtype, compute_type(x.dtype)
    if mode is not None and not include_self:
        start = _identity(mode, dtype)

        def identity(idx: Sequence[sympy.Expr], ops: Any) -> Any:
            return ops.constant(start, compute)

        ctx.scatter(dest, sizes, identity, target, None)
    ctx.scatter(dest, sizes, loader, target, mode)
    return converted(dest, result_dtype)



# what tl.atomic_add adds (bool and the small integers have no atomic add; bfloat16's is
# Hopper-only on GPUs and missing in triton's interpreter)
_ATOMIC_ADD = (torch.float32, torch.float64, torch.float16, torch.int32, torch.int64)


def _check_triton(dtype: torch.dtype, mode: str | None) -> None:
    """Raise Fallback where a Triton kernel cannot do a scatter as eager's CUDA kernels do
    (``triton._scatter``): a store, or an atomic sum of a type atomics add; and nothing under
    deterministic algorithms (Triton's stores and atomics land in any order)."""
    if torch.are_deterministic_algorithms_enabled():
        raise Fallback("a scatter in a Triton kernel under torch.use_deterministic_algorithms (stores and "
                       "atomic adds land in any order)")
    if mode not in (None, "sum"):
        raise Fallback(f"a scatter folding by {mode} in a Triton kernel (atomics: sums only)")
    if mode == "sum" and dtype not in _ATOMIC_ADD:
        raise Fallback(f"an atomic add of {dtype} in a Triton kernel")


@register(aten.scatter.src, aten.scatter.value)
def _scatter_plain(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, index: Any, src: Any) -> TensorValue:
    return _along(ctx, node, x, dim, index, src, None)


@register(aten.scatter.reduce, aten.scatter.value_reduce)
def _scatter_reduce_old(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, index: Any, src: Any, *,
                        reduce: str) -> TensorValue:
    if reduce not in ("add", "multiply"):
        raise Fallback(f"scatter reduce={reduce!r}")
    return _along(ctx, node, x, dim, index, src, _FOLDS[reduce])


@register(aten.scatter_add.default)
def _scatter_add(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, index: Any, src: Any) -> TensorValue:
    return _along(ctx, node, x, dim, index, src, "sum")


@register(aten.scatter_reduce.two)
def _scatter_reduce(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, index: Any, src: Any, reduce: str,
                    *, include_self: bool = True) -> TensorValue:
    if reduce in _FOLDS:
        return _along(ctx, node, x, dim, index, src, _FOLDS[reduce], include_self)
    if reduce != "mean" or not x.dtype.is_floating_point:
        raise Fallback(f"scatter_reduce reduce={reduce!r} of {x.dtype}")
    # the mean: a sum and a count (in the tensor's dtype, as eager counts) of what each
    # element folded, its own value included or not, divided where it folded anything
    total = _along(ctx, node, x, dim, index, src, "sum", include_self)
    compute = compute_type(x.dtype)
    start = TensorValue(x.sizes, x.dtype, scalar(1 if include_self else 0, compute).loader)
    count = _along(ctx, node, start, dim, index, 1, "sum")

    def loader(idx: Sequence[sympy.Expr], ops: Any) -> Any:
        s, c = total.loader(idx, ops), count.loader(idx, ops)
        none = ops.eq(c, ops.constant(0, compute))
        return ops.where(none, s, ops.truediv(s, ops.where(none, ops.constant(1, compute), c)))

    return TensorValue(x.sizes, x.dtype, loader, None, 4)


@register(aten.index_add.default)
def _index_add(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, index: Any, source: Any, *,
               alpha: Any = 1) -> TensorValue:
    """``out[..., index[i], ...] += alpha * source[..., i, ...]`` along ``dim``."""
    index = index_tensor(index)
    dtype = out_dtype(node)
    if index.ndim > 1 or x.ndim == 0 or not isinstance(source, TensorValue) or source.ndim != x.ndim:
        raise Fallback("index_add of a 0-d tensor, or with an index or source of another rank")
    dim = wrap_dim(dim, x.ndim)
    value = _source(source, dtype)
    compute = compute_type(dtype)
    n, load_index, load_src = x.sizes[dim], index.loader, value.loader
    check = IndexCheck("RuntimeError", _OUT_OF_BOUNDS, dim)
    scale = None if alpha == 1 else scalar(alpha, compute).loader

    def target(idx: Sequence[sympy.Expr], ops: Any) -> list[Any]:
        at = ops.indirect(load_index([idx[dim]] if index.ndim else [], ops), n, check)
        return [*idx[:dim], at, *idx[dim + 1:]]

    def loader(idx: Sequence[sympy.Expr], ops: Any) -> Any:
        v = ops.to_dtype(load_src(idx, ops), compute)
        return v if scale is None else ops.mul(v, scale([], ops))

    return _scatter(ctx, node, x, value.sizes, loader, target, "sum", True)


@register(aten.index_put.default, aten._unsafe_index_put.default)
def _index_put(ctx: LoweringContext, node: Any, x: TensorValue, indices: Sequence[Any], values: Any,
               accumulate: bool = False) -> TensorValue:
    """``x[indices] = values`` (``+=`` when accumulating) with integer index tensors."""
    dtype = out_dtype(node)
    where = advanced_index(x.sizes, indices)
    value = broadcast(_source(values, dtype), where.sizes)
    compute = compute_type(dtype)
    load = value.loader

    def loader(idx: Sequence[sympy.Expr], ops: Any) -> Any:
        return ops.to_dtype(load(idx, ops), compute)

    return _scatter(ctx, node, x, where.sizes, loader, where.coordinates, "sum" if accumulate else None, True)
