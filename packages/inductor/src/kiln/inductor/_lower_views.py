"""Lowering rules for views: no copies, only index remapping.

A value that is a strided window of a buffer (``TensorValue.view``) stays one through
``permute``, ``expand``, ``unsqueeze``, ``squeeze``, ``slice``, ``select``, ``as_strided`` and
the ``view``/``reshape`` calls its strides allow: its new sizes, strides and offset are
computed, so the wrapper can still return it without a copy. Any other value (a pointwise
expression not in memory) gets a loader that maps the new index to the old one; a reshape
of it goes through the flat index (``floor`` and ``Mod`` of the new flat index in the old
sizes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ._ir import TensorValue, contiguous_strides, flat_index, sym
from ._lowering import Fallback, LoweringContext, register

__all__: list[str] = []

aten = torch.ops.aten


def _remap(x: TensorValue, sizes: Sequence[sympy.Expr], old_index: Any,
           strided: tuple[Sequence[sympy.Expr], sympy.Expr] | None = None) -> TensorValue:
    """``x`` seen with ``sizes``: element ``index`` is ``x``'s element ``old_index(index)``;
    ``strided`` (new strides, offset) keeps a window of a buffer a window."""
    sizes = tuple(sizes)
    if x.view is not None and strided is not None:
        return TensorValue.strided(x.view[0], sizes, strided[0], strided[1], x.dtype)
    load = x.loader

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        return load(old_index(index), ops)

    return TensorValue(sizes, x.dtype, loader, None, x.ops_count)


def _dim(d: int, ndim: int) -> int:
    return d + ndim if d < 0 else d


def _out_sizes(node: Any) -> tuple[sympy.Expr, ...]:
    return tuple(sym(s) for s in node.meta["val"].shape)


@register(aten.permute.default)
def _permute(ctx: LoweringContext, node: Any, x: TensorValue, dims: Sequence[int]) -> TensorValue:
    dims = [_dim(d, x.ndim) for d in dims]
    inverse = [dims.index(k) for k in range(x.ndim)]
    strided = None
    if x.view is not None:
        strided = ([x.view[1][d] for d in dims], x.view[2])
    return _remap(x, [x.sizes[d] for d in dims], lambda index: [index[inverse[k]] for k in range(x.ndim)], strided)


@register(aten.t.default)
def _t(ctx: LoweringContext, node: Any, x: TensorValue) -> TensorValue:
    return _permute(ctx, node, x, list(range(x.ndim))[::-1])


@register(aten.transpose.int)
def _transpose(ctx: LoweringContext, node: Any, x: TensorValue, a: int, b: int) -> TensorValue:
    dims = list(range(x.ndim))
    a, b = _dim(a, x.ndim), _dim(b, x.ndim)
    dims[a], dims[b] = dims[b], dims[a]
    return _permute(ctx, node, x, dims)


@register(aten.expand.default)
def _expand(ctx: LoweringContext, node: Any, x: TensorValue, sizes: Sequence[Any], *, implicit: bool = False) -> TensorValue:
    out = _out_sizes(node)
    lead = len(out) - x.ndim
    keep = [x.sizes[k] != 1 or out[lead + k] == 1 for k in range(x.ndim)]
    strided = None
    if x.view is not None:
        strides = [sympy.Integer(0)] * lead + [s if keep[k] else sympy.Integer(0) for k, s in enumerate(x.view[1])]
        strided = (strides, x.view[2])
    return _remap(x, out, lambda index: [index[lead + k] if keep[k] else sympy.Integer(0) for k in range(x.ndim)],
                  strided)


@register(aten.unsqueeze.default)
def _unsqueeze(ctx: LoweringContext, node: Any, x: TensorValue, dim: int) -> TensorValue:
    dim = _dim(dim, x.ndim + 1)
    sizes = list(x.sizes)
    sizes.insert(dim, sympy.Integer(1))
    strided = None
    if x.view is not None:
        strides = list(x.view[1])
        strides.insert(dim, strides[dim] * sizes[dim + 1] if dim < x.ndim else sympy.Integer(1))
        strided = (strides, x.view[2])
    return _remap(x, sizes, lambda index: [*index[:dim], *index[dim + 1:]], strided)


@register(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def _squeeze(ctx: LoweringContext, node: Any, x: TensorValue, dims: Any = None) -> TensorValue:
    if dims is None or x.ndim == 0:
        dims = range(x.ndim)
    elif isinstance(dims, int):
        dims = [dims]
    gone = {_dim(d, x.ndim) for d in dims if x.sizes[_dim(d, x.ndim)] == 1}
    kept = [k for k in range(x.ndim) if k not in gone]
    strided = None
    if x.view is not None:
        strided = ([x.view[1][k] for k in kept], x.view[2])

    def old(index: Sequence[sympy.Expr]) -> list[sympy.Expr]:
        it = iter(index)
        return [sympy.Integer(0) if k in gone else next(it) for k in range(x.ndim)]

    return _remap(x, [x.sizes[k] for k in kept], old, strided)


@register(aten.slice.Tensor)
def _slice(ctx: LoweringContext, node: Any, x: TensorValue, dim: int = 0, start: Any = None, end: Any = None,
           step: int = 1) -> TensorValue:
    dim = _dim(dim, x.ndim)
    start = 0 if start is None else start
    if isinstance(start, int) and start < 0:
        if not isinstance(x.sizes[dim], sympy.Integer):
            raise Fallback("a negative start on a symbolic size")
        start = max(int(x.sizes[dim]) + start, 0)
    begin = sym(start)
    if isinstance(x.sizes[dim], sympy.Integer) and isinstance(begin, sympy.Integer):
        begin = sympy.Integer(min(int(begin), int(x.sizes[dim])))
    sizes = _out_sizes(node)
    strided = None
    if x.view is not None:
        strides = list(x.view[1])
        offset = x.view[2] + begin * strides[dim]
        strides[dim] = strides[dim] * step
        strided = (strides, offset)
    return _remap(x, sizes, lambda index: [*index[:dim], begin + step * index[dim], *index[dim + 1:]], strided)


@register(aten.select.int)
def _select(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, index: Any) -> TensorValue:
    dim = _dim(dim, x.ndim)
    if isinstance(index, int) and index < 0:
        at = x.sizes[dim] + index
    else:
        at = sym(index)
    strided = None
    if x.view is not None:
        strides = list(x.view[1])
        offset = x.view[2] + at * strides.pop(dim)
        strided = (strides, offset)
    return _remap(x, [*x.sizes[:dim], *x.sizes[dim + 1:]], lambda i: [*i[:dim], at, *i[dim:]], strided)


def _view_strides(sizes: Sequence[sympy.Expr], strides: Sequence[sympy.Expr],
                  new: Sequence[sympy.Expr]) -> list[sympy.Expr] | None:
    """Strides for viewing (sizes, strides) as ``new`` without a copy, or None where no view
    exists or the sizes are symbolic (then the value is remapped through the flat index).
    The old dims are cut into runs contiguous among themselves; each run must be covered by
    whole new dims, whose strides count up from the run's innermost stride."""
    if tuple(sizes) == tuple(new):
        return list(strides)
    if not all(isinstance(v, sympy.Integer) for v in (*sizes, *strides, *new)):
        return None
    old_sizes, old_strides, target = [int(v) for v in sizes], [int(v) for v in strides], [int(v) for v in new]
    if not old_sizes:
        return [sympy.Integer(1)] * len(target)
    if 0 in old_sizes:
        return None
    out = [0] * len(target)
    view_d = len(target) - 1
    base = old_strides[-1]
    run_numel = view_numel = 1
    for d in range(len(old_sizes) - 1, -1, -1):
        run_numel *= old_sizes[d]
        run_ends = d == 0 or (old_sizes[d - 1] != 1 and old_strides[d - 1] != run_numel * base)
        if not run_ends:
            continue
        while view_d >= 0 and (view_numel < run_numel or target[view_d] == 1):
            out[view_d] = view_numel * base
            view_numel *= target[view_d]
            view_d -= 1
        if view_numel != run_numel:
            return None
        if d > 0:
            base, run_numel, view_numel = old_strides[d - 1], 1, 1
    return [sympy.Integer(v) for v in out] if view_d == -1 else None


def _splits(old: Sequence[sympy.Expr], new: Sequence[sympy.Expr]) -> list[tuple[int, int]] | None:
    """For a reshape that only splits dimensions (each old dimension the product of a run of
    consecutive new ones, size-1 dimensions going with the run after them): each old
    dimension's run ``(start, end)`` of new dimensions; None for any other reshape (one
    that merges dimensions, or whose sizes do not provably match)."""
    if not old or len(new) <= len(old):
        return None
    groups: list[tuple[int, int]] = []
    at = 0
    for k, size in enumerate(old):
        start, product = at, sympy.S.One
        while at < len(new) and (at == start or sympy.expand(product - size) != 0):
            product *= new[at]
            at += 1
        if k == len(old) - 1:  # trailing size-1 dimensions go with the last run
            while at < len(new) and new[at] == 1:
                at += 1
        if sympy.expand(product - size) != 0:
            return None
        groups.append((start, at))
    return groups if at == len(new) else None


@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _view(ctx: LoweringContext, node: Any, x: TensorValue, size: Sequence[Any]) -> TensorValue:
    sizes = _out_sizes(node)
    if x.view is not None:
        strides = _view_strides(x.sizes, x.view[1], sizes)
        if strides is not None:
            return TensorValue.strided(x.view[0], sizes, strides, x.view[2], x.dtype)
    groups = _splits(x.sizes, sizes) if x.view is None else None
    if groups is not None and node.users and all(torch.Tag.pointwise in getattr(u.target, "tags", ())
                                                 for u in node.users):
        # each old dimension split into consecutive new ones (a product's (B * T, N) rows read
        # as (B, T, N)) and read only elementwise (a GELU): the old index is the flat index
        # over its group, sums of products, and the value stays fused with its readers; read
        # by views (attention's heads permuted), it is computed into memory once, below, and
        # they are views of it
        return _remap(x, sizes, lambda index: [flat_index(index[a:b], contiguous_strides(sizes[a:b]))
                                               for a, b in groups])
    # not a view of memory as it is laid out: computed (or copied) contiguously first, then
    # viewed; remapping the index through the flat offset instead costs floor and Mod of
    # symbolic sizes in every load, which sympy simplifies slowly and C++ computes slowly
    contiguous = ctx.realize(TensorValue(x.sizes, x.dtype, x.loader, None, x.ops_count))
    return TensorValue.strided(contiguous.view[0], sizes, contiguous_strides(sizes), sympy.S.Zero, x.dtype)


@register(aten.flatten.using_ints)
def _flatten(ctx: LoweringContext, node: Any, x: TensorValue, start_dim: int = 0, end_dim: int = -1) -> TensorValue:
    """A reshape to the traced sizes (torch's decompositions call it, e.g. batch norm's)."""
    return _view(ctx, node, x, _out_sizes(node))


@register(aten.as_strided.default)
def _as_strided(ctx: LoweringContext, node: Any, x: TensorValue, size: Sequence[Any], stride: Sequence[Any],
                storage_offset: Any = None) -> TensorValue:
    base = ctx.storage_base(x)
    if base is None:
        raise Fallback("as_strided of a value not at the start of a buffer")
    name, base_offset = base
    offset = sym(storage_offset) - base_offset if storage_offset is not None else x.view[2]
    return TensorValue.strided(name, [sym(s) for s in size], [sym(s) for s in stride], offset, x.dtype)


@register(aten.sym_size.int)
def _sym_size(ctx: LoweringContext, node: Any, x: TensorValue, dim: int) -> sympy.Expr:
    return x.sizes[_dim(dim, x.ndim)]


@register(aten.sym_numel.default)
def _sym_numel(ctx: LoweringContext, node: Any, x: TensorValue) -> sympy.Expr:
    return sympy.Mul(*x.sizes)


@register(aten.sym_stride.int)
def _sym_stride(ctx: LoweringContext, node: Any, x: TensorValue, dim: int) -> sympy.Expr:
    if x.view is None:
        raise Fallback("the stride of a value not in memory")
    return x.view[1][_dim(dim, x.ndim)]


@register(aten.split_with_sizes.default)
def _split_with_sizes(ctx: LoweringContext, node: Any, x: TensorValue, sizes: Sequence[Any], dim: int = 0) -> tuple:
    dim = _dim(dim, x.ndim)
    pieces, start = [], sympy.S.Zero
    for k, size in enumerate(sizes):
        piece_node = _Piece(node, k)
        pieces.append(_slice(ctx, piece_node, x, dim, start, start + sym(size)))
        start = start + sym(size)
    return tuple(pieces)


@register(aten.split.Tensor, aten.tensor_split.sections, aten.tensor_split.indices)
def _split(ctx: LoweringContext, node: Any, x: TensorValue, size: Any, dim: int = 0) -> tuple:
    """Consecutive pieces along ``dim``, of the traced pieces' sizes."""
    vals = node.meta["val"]
    return _split_with_sizes(ctx, node, x, [v.shape[_dim(dim, x.ndim)] for v in vals], dim)


@register(aten.unbind.int)
def _unbind(ctx: LoweringContext, node: Any, x: TensorValue, dim: int = 0) -> tuple:
    dim = _dim(dim, x.ndim)
    if not isinstance(x.sizes[dim], sympy.Integer):
        raise Fallback("unbind along a symbolic size")
    return tuple(_select(ctx, node, x, dim, k) for k in range(int(x.sizes[dim])))


class _Piece:
    """One output of a multi-output view op, standing in for a node (``meta["val"]``)."""

    def __init__(self, node: Any, item: int) -> None:
        self.meta = {"val": node.meta["val"][item]}


@register(aten.repeat.default)
def _repeat(ctx: LoweringContext, node: Any, x: TensorValue, repeats: Sequence[Any]) -> TensorValue:
    """``x`` tiled ``repeats`` times along each dimension (new leading dimensions first): an
    element of the result reads ``x`` at its index modulo ``x``'s sizes (not a view)."""
    out = _out_sizes(node)
    lead = len(out) - x.ndim
    sizes = x.sizes

    def index_map(index: Sequence[sympy.Expr]) -> list[sympy.Expr]:
        # a dimension of size 0 has no element to read (the loops over the result never run)
        return [sympy.S.Zero if sizes[k] == 1 else index[lead + k] if out[lead + k] == sizes[k] or sizes[k] == 0
                else sympy.Mod(index[lead + k], sizes[k]) for k in range(x.ndim)]

    return _remap(x, out, index_map, None)


@register(aten.flip.default)
def _flip(ctx: LoweringContext, node: Any, x: TensorValue, dims: Sequence[int]) -> TensorValue:
    """``x`` read backwards along ``dims`` (a window with negative strides when ``x`` is one,
    but eager's result is a new tensor: its readers get the remapped index)."""
    flipped = {_dim(d, max(x.ndim, 1)) for d in dims}
    sizes = x.sizes
    return _remap(x, sizes, lambda index: [sizes[k] - 1 - index[k] if k in flipped else index[k]
                                           for k in range(x.ndim)], None)
