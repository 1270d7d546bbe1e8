"""Lowering rules for reads through loaded indices: ``embedding``, ``index_select``,
``gather`` and advanced indexing (``index.Tensor`` with integer index tensors).

Each reads its index tensor's element, turns it into an index with ``ops.indirect`` (checked
against the indexed size, as eager checks it: the kernel reports the first index out of
range and the wrapper raises eager's error), and reads the source there. The result is a
value like any other: it fuses with the pointwise ops around it (an embedding lookup, the
sum of two embeddings and a layer norm are one kernel). Boolean masks (a data-dependent
number of results) and index tensors of other types run as ATen calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch

from ._ir import TensorValue, sym
from ._lowering import EXPENSIVE, Fallback, LoweringContext, broadcast, broadcast_sizes, register
from ._ops import IndexCheck

__all__ = ["AdvancedIndex", "advanced_index", "checked_sizes", "index_tensor", "wrap_dim"]

aten = torch.ops.aten

_INTEGER_INDEX = frozenset({torch.int64, torch.int32})
# a read through a loaded index (a check, a scattered load) costs what a transcendental
# function does, so a gathered value with several readers (an embedding read by a norm and a
# residual) is gathered once into a buffer instead of in each reader
_OUT_OF_RANGE = IndexCheck("IndexError", "index out of range in self", 0)


def _traced_sizes(node: Any) -> tuple[sympy.Expr, ...]:
    return tuple(sym(s) for s in node.meta["val"].shape)


def index_tensor(index: Any) -> TensorValue:
    if not isinstance(index, TensorValue) or index.dtype not in _INTEGER_INDEX:
        raise Fallback(f"an index of {getattr(index, 'dtype', type(index).__name__)}")
    return index


def wrap_dim(dim: int, ndim: int) -> int:
    """``dim`` counted from the front (a negative one counts from the end)."""
    return dim + ndim if dim < 0 else dim


def checked_sizes(sizes: tuple[sympy.Expr, ...], node: Any) -> tuple[sympy.Expr, ...]:
    """``sizes``, which must be the traced result's (else the node runs as an ATen call)."""
    traced = _traced_sizes(node)
    if traced != sizes:
        raise Fallback(f"sizes {sizes} where the trace has {traced}")
    return sizes


@register(aten.embedding.default)
def _embedding(ctx: LoweringContext, node: Any, weight: TensorValue, indices: Any, padding_idx: int = -1,
               scale_grad_by_freq: bool = False, sparse: bool = False) -> TensorValue:
    """``weight[indices]`` along the first dimension (padding_idx only matters for the gradient)."""
    indices = index_tensor(indices)
    if weight.ndim != 2:
        raise Fallback("embedding of a weight that is not 2-d")
    k = indices.ndim
    sizes = checked_sizes((*indices.sizes, weight.sizes[1]), node)
    rows, load_index, load_weight = weight.sizes[0], indices.loader, weight.loader

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        row = ops.indirect(load_index(index[:k], ops), rows, _OUT_OF_RANGE)
        return load_weight([row, index[k]], ops)

    return TensorValue(sizes, weight.dtype, loader, None, weight.ops_count + indices.ops_count + EXPENSIVE)


@register(aten.index_select.default)
def _index_select(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, index: Any) -> TensorValue:
    index = index_tensor(index)
    if index.ndim > 1:
        raise Fallback("index_select with a multi-dimensional index")
    dim = wrap_dim(dim, max(x.ndim, 1))
    if x.ndim == 0:
        raise Fallback("index_select of a 0-d tensor")
    sizes = list(x.sizes)
    sizes[dim] = index.sizes[0] if index.ndim else sympy.Integer(1)
    sizes = checked_sizes(tuple(sizes), node)
    n, load_index, load_x = x.sizes[dim], index.loader, x.loader
    check = IndexCheck("IndexError", "index out of range in self", dim)

    def loader(idx: Sequence[sympy.Expr], ops: Any) -> Any:
        at = ops.indirect(load_index([idx[dim]] if index.ndim else [], ops), n, check)
        return load_x([*idx[:dim], at, *idx[dim + 1:]], ops)

    return TensorValue(sizes, x.dtype, loader, None, x.ops_count + index.ops_count + EXPENSIVE)


@register(aten.gather.default)
def _gather(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, index: Any,
            sparse_grad: bool = False) -> TensorValue:
    """``out[i][j] = x[i][index[i][j]]`` (for ``dim`` 1): the index's sizes, each at most the
    source's in the other dimensions (eager checks that; the trace has it)."""
    index = index_tensor(index)
    if index.ndim != x.ndim or x.ndim == 0:
        raise Fallback("gather with an index of another rank")
    dim = wrap_dim(dim, x.ndim)
    sizes = checked_sizes(index.sizes, node)
    n, load_index, load_x = x.sizes[dim], index.loader, x.loader
    check = IndexCheck("RuntimeError", "index {index} is out of bounds for dimension {dim} with size {size}", dim)

    def loader(idx: Sequence[sympy.Expr], ops: Any) -> Any:
        at = ops.indirect(load_index(idx, ops), n, check)
        return load_x([*idx[:dim], at, *idx[dim + 1:]], ops)

    return TensorValue(sizes, x.dtype, loader, None, x.ops_count + index.ops_count + EXPENSIVE)


@dataclass(frozen=True, slots=True)
class AdvancedIndex:
    """Where advanced indexing (``x[indices]``, integer index tensors, None for a whole
    dimension) reads or writes: ``sizes`` of the result, and ``coordinates(index, ops)``,
    the element of ``x`` for an index of the result (loaded indices checked, negative ones
    counting from the end). The indexed dimensions are replaced by the indices' broadcast
    sizes, in place when they are adjacent, else in front."""

    sizes: tuple[sympy.Expr, ...]
    coordinates: Callable[[Sequence[sympy.Expr], Any], list[Any]]
    cost: int


def advanced_index(x_sizes: Sequence[sympy.Expr], indices: Sequence[Any]) -> AdvancedIndex:
    given = [(d, index_tensor(t)) for d, t in enumerate(indices) if t is not None]
    if not given or len(indices) > len(x_sizes):
        raise Fallback("index without index tensors")
    dims = [d for d, _ in given]
    shape = broadcast_sizes(*(t.sizes for _, t in given))
    loaders = [broadcast(t, shape).loader for _, t in given]
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    rest = [d for d in range(len(x_sizes)) if d not in dims]
    at = dims[0] if adjacent else 0  # where the broadcast dimensions go in the result
    before = [d for d in rest if d < at] if adjacent else []
    after = [d for d in rest if d not in before]
    sizes = (*(x_sizes[d] for d in before), *shape, *(x_sizes[d] for d in after))
    # eager numbers an index tensor by its place among the index tensors, not by the dimension
    checks = [IndexCheck("IndexError", "index {index} is out of bounds for dimension {dim} with size {size}", k,
                         negative=True) for k in range(len(dims))]
    k = len(shape)

    def coordinates(idx: Sequence[sympy.Expr], ops: Any) -> list[Any]:
        lead, point, tail = idx[:len(before)], idx[len(before):len(before) + k], idx[len(before) + k:]
        full: list[Any] = [None] * len(x_sizes)
        for d, v in zip(before, lead, strict=True):
            full[d] = v
        for d, v in zip(after, tail, strict=True):
            full[d] = v
        for d, load, check in zip(dims, loaders, checks, strict=True):
            full[d] = ops.indirect(load(point, ops), x_sizes[d], check)
        return full

    cost = sum(t.ops_count for _, t in given) + EXPENSIVE * len(given)
    return AdvancedIndex(sizes, coordinates, cost)


@register(aten.index.Tensor)
def _index(ctx: LoweringContext, node: Any, x: TensorValue, indices: Sequence[Any]) -> TensorValue:
    """Advanced indexing with integer tensors (``advanced_index``)."""
    where = advanced_index(x.sizes, indices)
    sizes = checked_sizes(where.sizes, node)
    load_x, coordinates = x.loader, where.coordinates

    def loader(idx: Sequence[sympy.Expr], ops: Any) -> Any:
        return load_x(coordinates(idx, ops), ops)

    return TensorValue(sizes, x.dtype, loader, None, x.ops_count + where.cost)
