"""Output metadata of common ops on symbolic sizes without torch's Python reference kernels.

torch's C++ meta kernels for elementwise ops (TensorIterator) and for ``view`` (computeStride)
take plain ints, so with symbolic sizes the Python dispatcher sends those ops through
``torch._refs``/``torch._prims``: 1 to 3 ms a call, most of what a symbolic capture costs
over a static one. Where the result follows from the inputs' metadata without deciding
anything about a size, the rules here build the output fake directly; torch's own fake
tensors take the same kind of shortcut for binary ops (``make_fast_binary_impl``). Every
other call returns None and runs through its meta kernel as before, which then also records
whatever guards or errors the general case needs.

A rule applies only when (each is checked, none guarded):
- some tensor operand has a symbolic size (a static call's C++ meta kernel is fast and exact);
- pointwise ops (``torch.Tag.pointwise``, functional, no alias): every tensor operand is
  contiguous in the strict sense (each stride equal, as an expression, to the product of the
  later sizes), broadcasting needs no decision (in each dim every size other than a constant
  1 is the same expression), one operand already has the output's sizes and every operand's
  device is the output's (or it is a 0-dim CPU tensor). The result is contiguous, as
  TensorIterator makes it for contiguous operands. Its dtype is what the op's C++ meta kernel
  gives on 1-element tensors of the same dtypes and dims with the same other arguments
  (symbolic numbers at their example values): type promotion does not depend on sizes;
- ``_to_copy`` of a strictly contiguous tensor, layout and memory format not changed to
  anything else: the same sizes and strides, storage offset 0, a new storage;
- ``view``/``_unsafe_view``, through torch's computeStride over expressions
  (``_fast_reshape``, which also plans ``reshape``); views (``unsqueeze``, ``transpose``,
  ``permute``, ``expand``, ``slice``, ``select``), matrix products, ``native_layer_norm``,
  ``_softmax``, reductions, ``cat`` and ``embedding`` under the same conditions: no size
  decision needed.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy
import torch

from kiln.symshapes.bridge._fake_tensor import FakeTensor
from kiln.symshapes.bridge._sym_node import KilnSymNode, to_torch
from kiln.symshapes.bridge._torch_internals import no_python_dispatcher

__all__ = ["fast_rule"]

_CPU = torch.device("cpu")
_ONE = sympy.Integer(1)
_ZERO = sympy.Integer(0)
# pointwise ops whose output layout is not TensorIterator's but a clone's of their
# (broadcast) first operand: rules A and B of ``_elementwise_strides`` hold for them too
_NOT_ITERATOR = frozenset({"clone", "masked_fill"})
_KEEPS_LAYOUT = (None, torch.preserve_format, torch.contiguous_format)


class _Bail(Exception):
    """The call is not one these rules answer: run the meta kernel."""


def fast_rule(info) -> Callable | None:
    """The rule for an op (by its ``_OpInfo``), or None."""
    if info.name in _RULES:
        return _RULES[info.name]
    if info.pointwise and not any(info.writes) and all(a is None for a in info.aliases):
        return _pointwise
    return None


# ------------------------------------------------------------------ expressions
def _expr(value) -> sympy.Basic:
    if type(value) is int:
        return sympy.Integer(value)
    node = getattr(value, "node", None)
    if not isinstance(node, KilnSymNode):
        raise _Bail
    return node.expr


def _same(a, b, env) -> bool:
    """Whether two sizes are equal as expressions (no guard)."""
    if a is b:
        return True
    ea, eb = _expr(a), _expr(b)
    return ea == eb or env.simplify(ea) == env.simplify(eb)


def _symbolic(fakes) -> bool:
    return any(type(v) is not int for f in fakes for v in f.shape)


def _strictly_contiguous(fake: FakeTensor, env) -> bool:
    expected = _ONE
    for size, stride in zip(reversed(fake.shape), reversed(fake.stride()), strict=True):
        actual = _expr(stride)
        if actual != expected and env.simplify(actual) != env.simplify(expected):
            return False
        expected = expected * _expr(size)
    return True


def _contiguous_strides(sizes, mode) -> list:
    strides, product = [], _ONE
    for size in reversed(sizes):
        strides.append(int(product) if product.is_Integer else to_torch(product, mode.env_view))
        product = product * _expr(size)
    return strides[::-1]


def _probe_value(value):
    """``value`` for a probe: a tensor becomes a 1-element meta tensor of its dtype and dims
    (empty where it is), a symbolic number its example value, a list of tensors a list of
    those."""
    if isinstance(value, torch.Tensor):
        return torch.empty(_probe_shape(value), dtype=value.dtype, device="meta")
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        node = value.node
        if not isinstance(node, KilnSymNode) or node.hint is None:
            raise _Bail
        return node.pytype(node.hint)
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, torch.Tensor) for v in value):
            return [_probe_value(v) for v in value]
        if all(type(v) is int for v in value):
            return value  # dims
        raise _Bail  # symbolic size lists: the rule's own business, not the probe's
    return value


def _probe_shape(t: torch.Tensor) -> tuple:
    """1 for each dim, 0 where the size is 0 (torch's cat skips 1-d empty tensors)."""
    return tuple(0 if type(s) is int and s == 0 else 1 for s in t.shape)


def _probe_key(value):
    if isinstance(value, torch.Tensor):
        return (value.dtype, _probe_shape(value))
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return (type(value), value.node.hint)
    if isinstance(value, (list, tuple)):
        return tuple(_probe_key(v) for v in value)
    return (type(value), value)


# ------------------------------------------------------------------ rules
def _pointwise(mode, func, info, args: tuple, kwargs: dict):
    env = mode.shape_env
    fakes = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    if not fakes or not all(isinstance(f, FakeTensor) for f in fakes) or not _symbolic(fakes):
        return None
    device = next((f.device for f in fakes if f.device.type != "cpu"), fakes[0].device)
    if any(f.device != device and not (f.dim() == 0 and f.device == _CPU) for f in fakes):
        return None
    shape = _broadcast(fakes, env)
    if shape is None:
        return None
    layout = kwargs.get("memory_format")
    if layout is torch.contiguous_format:
        strides = _contiguous_strides(shape, mode)
    elif layout not in (None, torch.preserve_format):
        return None
    else:
        strides = _elementwise_strides(fakes, shape, mode, reorder=info.name not in _NOT_ITERATOR)
    if strides is None:
        return None
    dtype = _probe_dtype(mode, func, args, kwargs, len(shape))
    if dtype is None:
        return None
    return FakeTensor.of_metadata(mode, shape, strides, 0, dtype, device)


def _broadcast(fakes, env) -> list | None:
    """The broadcast sizes, when every dim's sizes other than a constant 1 are one expression."""
    ndim = max(f.dim() for f in fakes)
    shape = []
    for d in range(ndim):
        size = None
        for f in fakes:
            i = d - ndim + f.dim()
            if i < 0:
                continue
            s = f.shape[i]
            if type(s) is int and s == 1:
                continue
            if type(s) is int and s == 0:
                return None  # empty tensors: torch's own kernels
            if size is None:
                size = s
            elif not _same(size, s, env):
                return None
        shape.append(1 if size is None else size)
    return shape


def _has_shape(fake: FakeTensor, shape: list, env) -> bool:
    return fake.dim() == len(shape) and all(_same(a, b, env) for a, b in zip(fake.shape, shape, strict=True))


def _elementwise_strides(fakes, shape: list, mode, *, reorder: bool) -> list | None:
    """The strides TensorIterator gives the output:
    - every operand strictly contiguous: contiguous (its dims in order; ties between
      strides only come from size-1 dims, and TensorIterator breaks them keeping the order);
    - no broadcasting and every operand with the same strides, dense: those strides
      (TensorIterator's fast setup for non-overlapping dense operands);
    - otherwise (with ``reorder``) TensorIterator's own ordering of the dims by the
      operands' strides (``_iterator_order``).
    Where a size that may be 1 is 1 at run time, torch may order that dim elsewhere; the
    results differ only in that size-1 dim's stride, which addresses nothing (the same
    answer torch's Python reference kernels give for a size treated size-obliviously)."""
    env = mode.shape_env
    if all(_strictly_contiguous(f, env) for f in fakes):
        full = next((f for f in fakes if _has_shape(f, shape, env)), None)
        return list(full.stride()) if full is not None else _contiguous_strides(shape, mode)
    first = fakes[0]
    if all(_has_shape(f, shape, env) for f in fakes) and _dense(first, env):
        strides = first.stride()
        if all(all(_same(a, b, env) for a, b in zip(f.stride(), strides, strict=True)) for f in fakes[1:]):
            return list(strides)
    if not reorder:
        return None
    try:
        order = _iterator_order(fakes, shape, env)
    except _Bail:
        return None
    sizes = [_expr(s) for s in shape]
    strides, product = [None] * len(shape), _ONE
    for d in order:
        strides[d] = int(product) if product.is_Integer else to_torch(product, mode.env_view)
        product = product * sizes[d]
    return strides


def _iterator_order(fakes, shape: list, env) -> list[int]:
    """The dims fastest first, as TensorIterator's ``reorder_dimensions`` sorts them: an
    insertion sort from the last dim to the first, where for each pair the first operand
    whose strides for both dims are nonzero decides (smaller stride first; equal strides:
    the smaller size first, else the next operand); a broadcast dim has stride 0. Each
    comparison must be decided by the value ranges with sizes that may be 1 taken as >= 2
    (else ``_Bail``)."""
    ndim = len(shape)
    sizes = [_expr(s) for s in shape]
    rows = []
    for f in fakes:
        offset = ndim - f.dim()
        row = [_ZERO] * offset
        for i, (size, stride) in enumerate(zip(f.shape, f.stride(), strict=True)):
            out = shape[offset + i]
            broadcast = type(size) is int and size == 1 and not (type(out) is int and out == 1)
            row.append(_ZERO if broadcast else _expr(stride))
        rows.append(row)

    def known(relation) -> bool:
        answer = env.statically_known(relation, size_oblivious=True)
        if answer is None:
            raise _Bail
        return answer

    def should_swap(d0: int, d1: int) -> int:
        for row in rows:
            a, b = row[d0], row[d1]
            if known(sympy.Eq(a, 0)) or known(sympy.Eq(b, 0)):
                continue
            if known(sympy.Lt(a, b)):
                return -1
            if known(sympy.Gt(a, b)):
                return 1
            if known(sympy.Gt(sizes[d0], sizes[d1])):
                return 1
        return 0

    order = list(range(ndim - 1, -1, -1))
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            comparison = should_swap(order[d0], order[d1])
            if comparison > 0:
                order[d0], order[d1] = order[d1], order[d0]
                d1 = d0
            elif comparison < 0:
                break
    return order


def _dense(fake: FakeTensor, env) -> bool:
    """Whether the dims, in some order, have strides 1, size, size * size, ... (as
    expressions, so for every value of the symbols); dims of constant size 1 aside."""
    dims = [d for d, s in enumerate(fake.shape) if not (type(s) is int and s == 1)]
    strides = [_expr(s) for s in fake.stride()]
    expected = _ONE
    while dims:
        matches = [d for d in dims if strides[d] == expected or env.simplify(strides[d]) == env.simplify(expected)]
        if len(matches) != 1:
            return False
        dims.remove(matches[0])
        expected = expected * _expr(fake.shape[matches[0]])
    return True


def _probe_dtype(mode, func, args: tuple, kwargs: dict, ndim: int) -> torch.dtype | None:
    out = _probe(mode, func, args, kwargs)
    if isinstance(out, torch.Tensor) and out.dim() == ndim:
        return out.dtype
    return None


def _probe(mode, func, args: tuple, kwargs: dict):
    """What torch's C++ meta kernel returns for this call on 1-element tensors of the same
    dtypes and dims (None when it refuses), cached per op, argument kinds and default dtype
    (in the mode's DispatchCache, shared between captures): the dtypes of an op's outputs do
    not depend on sizes."""
    try:
        key = (func, torch.get_default_dtype(), tuple(_probe_key(a) for a in args),
               tuple((k, _probe_key(v)) for k, v in kwargs.items()))
        hash(key)
    except (TypeError, _Bail):
        return None
    probes = mode.fast_probes
    if key in probes:
        return probes[key]
    out = None
    try:
        probe_args = tuple(_probe_value(a) for a in args)
        probe_kwargs = {k: _probe_value(v) for k, v in kwargs.items()}
        with no_python_dispatcher():
            out = func(*probe_args, **probe_kwargs)
    except Exception:  # the meta kernel will raise it properly
        out = None
    probes[key] = out
    return out


def _to_copy(mode, func, info, args: tuple, kwargs: dict):
    if len(args) != 1 or not isinstance(args[0], FakeTensor):
        return None
    source = args[0]
    if not _symbolic([source]) or not _strictly_contiguous(source, mode.shape_env):
        return None
    if kwargs.get("memory_format") not in _KEEPS_LAYOUT or kwargs.get("layout") not in (None, torch.strided):
        return None
    if not set(kwargs) <= {"dtype", "layout", "device", "pin_memory", "non_blocking", "memory_format"}:
        return None
    dtype = kwargs.get("dtype") or source.dtype
    device = kwargs.get("device")
    device = source.device if device is None else torch.device(device)
    return FakeTensor.of_metadata(mode, list(source.shape), list(source.stride()), 0, dtype, device)


# ------------------------------------------------------------------ views
def _dim(d: int, ndim: int) -> int:
    if type(d) is not int or not -max(ndim, 1) <= d < max(ndim, 1):
        raise _Bail
    return d + ndim if d < 0 else d


def _as_view(mode, source: FakeTensor, sizes, strides, offset, info):
    storage = source.fake_storage if info.aliases and info.aliases[0] == 0 else None
    return FakeTensor.of_metadata(mode, list(sizes), list(strides), offset, source.dtype, source.device, storage)


def _sym(mode, expr: sympy.Basic):
    return int(expr) if expr.is_Integer else to_torch(expr, mode.env_view)


def _view_rule(fn):
    """A view op's rule: ``fn(mode, source, *rest)`` returns (sizes, strides, offset)."""

    def rule(mode, func, info, args: tuple, kwargs: dict):
        if not args or not isinstance(args[0], FakeTensor) or not _symbolic([args[0]]):
            return None
        try:
            sizes, strides, offset = fn(mode, args[0], *args[1:], **kwargs)
        except (_Bail, TypeError):
            return None
        return _as_view(mode, args[0], sizes, strides, offset, info)

    return rule


@_view_rule
def _unsqueeze(mode, x, dim):
    ndim = x.dim()
    dim = _dim(dim, ndim + 1)
    sizes, strides = list(x.shape), list(x.stride())
    # torch's inferUnsqueezeGeometry: the new dim's stride is size * stride of the dim it
    # precedes, 1 at the end
    stride = 1 if dim >= ndim else _sym(mode, _expr(sizes[dim]) * _expr(strides[dim]))
    sizes.insert(dim, 1)
    strides.insert(dim, stride)
    return sizes, strides, x.storage_offset()


@_view_rule
def _transpose(mode, x, d0, d1):
    if x.dim() == 0:
        raise _Bail
    d0, d1 = _dim(d0, x.dim()), _dim(d1, x.dim())
    sizes, strides = list(x.shape), list(x.stride())
    sizes[d0], sizes[d1] = sizes[d1], sizes[d0]
    strides[d0], strides[d1] = strides[d1], strides[d0]
    return sizes, strides, x.storage_offset()


@_view_rule
def _permute(mode, x, dims):
    order = [_dim(d, x.dim()) for d in dims]
    if sorted(order) != list(range(x.dim())):
        raise _Bail
    return [x.shape[d] for d in order], [x.stride()[d] for d in order], x.storage_offset()


@_view_rule
def _expand(mode, x, sizes, implicit=False):
    env = mode.shape_env
    sizes = list(sizes)
    lead = len(sizes) - x.dim()
    if lead < 0:
        raise _Bail
    out_sizes, out_strides = [], []
    for i, target in enumerate(sizes):
        if i < lead:
            if type(target) is int and target < 0:
                raise _Bail
            out_sizes.append(target)
            out_strides.append(0)
            continue
        size, stride = x.shape[i - lead], x.stride()[i - lead]
        if (type(target) is int and target == -1) or _same(target, size, env):
            out_sizes.append(size)
            out_strides.append(stride)
        elif type(size) is int and size == 1 and not (type(target) is int and target < 0):
            # a dim of 1 repeats; where a symbolic target is 1 at run time torch keeps the
            # old stride of that size-1 dim instead of 0 (it addresses nothing)
            out_sizes.append(target)
            out_strides.append(0)
        else:
            raise _Bail  # torch checks that the sizes agree
    return out_sizes, out_strides, x.storage_offset()


_MAX_END = 2**62


@_view_rule
def _slice(mode, x, dim=0, start=None, end=None, step=1):
    env = mode.shape_env
    dim = _dim(dim, x.dim())
    size, stride = x.shape[dim], x.stride()[dim]
    if type(step) is not int or step < 1:
        raise _Bail
    start = 0 if start is None else start
    end = _MAX_END if end is None else end
    if type(size) is int:
        if type(start) is not int or type(end) is not int:
            raise _Bail
        start, end, _ = slice(start, end).indices(size)
        length = max(0, (end - start + step - 1) // step)
        new_size, offset_expr = length, sympy.Integer(start)
    else:
        # only bounds decided without a guard: 0 <= start <= end <= size
        if type(start) is not int or start < 0:
            raise _Bail
        s = _expr(size)
        e = s if type(end) is int and end >= _MAX_END else _expr(end)
        if step != 1 or env.statically_known(sympy.Le(e, s)) is not True \
                or env.statically_known(sympy.Le(start, e)) is not True:
            raise _Bail
        new_size, offset_expr = _sym(mode, e - start), sympy.Integer(start)
    out_sizes, out_strides = list(x.shape), list(x.stride())
    out_sizes[dim] = new_size
    out_strides[dim] = _sym(mode, _expr(stride) * step)
    offset = _sym(mode, _expr(x.storage_offset()) + offset_expr * _expr(stride))
    return out_sizes, out_strides, offset


@_view_rule
def _select(mode, x, dim, index):
    env = mode.shape_env
    dim = _dim(dim, x.dim())
    size, stride = x.shape[dim], x.stride()[dim]
    if type(index) is not int:
        raise _Bail
    if type(size) is int:
        if not -size <= index < size:
            raise _Bail  # torch raises
        index = index + size if index < 0 else index
    elif index < 0 or env.statically_known(sympy.Lt(index, _expr(size))) is not True:
        raise _Bail
    out_sizes, out_strides = list(x.shape), list(x.stride())
    del out_sizes[dim], out_strides[dim]
    offset = _sym(mode, _expr(x.storage_offset()) + index * _expr(stride))
    return out_sizes, out_strides, offset


# ------------------------------------------------------------------ matrix products
def _matrix_rule(fn):
    """``fn(env, *args)`` returns the output sizes of a product whose output is a new
    contiguous tensor of the operands' common dtype and device (torch allocates it so)."""

    def rule(mode, func, info, args: tuple, kwargs: dict):
        fakes = [a for a in args if isinstance(a, torch.Tensor)]
        if kwargs.keys() - {"beta", "alpha"} or not fakes or not all(isinstance(f, FakeTensor) for f in fakes):
            return None
        if not _symbolic(fakes) or len({f.dtype for f in fakes}) != 1 or len({f.device for f in fakes}) != 1:
            return None
        try:
            sizes = fn(mode.shape_env, *args, **kwargs)
        except (_Bail, TypeError):
            return None
        return FakeTensor.of_metadata(mode, sizes, _contiguous_strides(sizes, mode), 0, fakes[0].dtype,
                                      fakes[0].device)

    return rule


def _check(condition: bool) -> None:
    if not condition:
        raise _Bail


def _mm_sizes(env, a, b):
    _check(a.dim() == 2 and b.dim() == 2 and _same(a.shape[1], b.shape[0], env))
    return [a.shape[0], b.shape[1]]


def _bmm_sizes(env, a, b):
    _check(a.dim() == 3 and b.dim() == 3 and _same(a.shape[0], b.shape[0], env) and _same(a.shape[2], b.shape[1], env))
    return [a.shape[0], a.shape[1], b.shape[2]]


def _addmm_sizes(env, bias, a, b, beta=1, alpha=1):
    sizes = _mm_sizes(env, a, b)
    _check(bias.dim() <= 2)  # and it broadcasts to the product's sizes without a decision
    for size, out in zip(reversed(bias.shape), reversed(sizes), strict=False):
        _check((type(size) is int and size == 1) or _same(size, out, env))
    return sizes


# ------------------------------------------------------------------ other ops
def _contiguous_like(mode, x: FakeTensor, sizes, dtype) -> FakeTensor:
    return FakeTensor.of_metadata(mode, list(sizes), _contiguous_strides(sizes, mode), 0, dtype, x.device)


def _layer_norm(mode, func, info, args: tuple, kwargs: dict):
    """``native_layer_norm(x, normalized_shape, weight, bias, eps)`` of a contiguous ``x``:
    the output like ``x``, mean and rstd of ``x``'s leading sizes with 1s for the
    normalized dims; dtypes from the probe."""
    if kwargs or len(args) != 5 or not isinstance(args[0], FakeTensor):
        return None
    x, shape, weight, bias, _ = args
    env = mode.shape_env
    if not _symbolic([x]) or not _strictly_contiguous(x, env) or not isinstance(shape, (list, tuple)):
        return None
    axis = x.dim() - len(shape)
    if axis < 0 or not all(_same(a, b, env) for a, b in zip(x.shape[axis:], shape, strict=True)):
        return None
    for p in (weight, bias):
        if p is not None and (not isinstance(p, FakeTensor) or p.device != x.device
                              or not _has_shape(p, list(shape), env)):
            return None
    probe = _probe(mode, func, (x, [1] * len(shape), *args[2:]), kwargs)
    if not isinstance(probe, tuple) or len(probe) != 3:
        return None
    stats = list(x.shape[:axis]) + [1] * len(shape)
    return (FakeTensor.of_metadata(mode, list(x.shape), list(x.stride()), 0, probe[0].dtype, x.device),
            _contiguous_like(mode, x, stats, probe[1].dtype), _contiguous_like(mode, x, stats, probe[2].dtype))


def _softmax(mode, func, info, args: tuple, kwargs: dict):
    """``_softmax``/``_log_softmax(x, dim, half_to_float)`` of a contiguous ``x``."""
    if kwargs or len(args) != 3 or not isinstance(args[0], FakeTensor):
        return None
    x = args[0]
    if not _symbolic([x]) or not _strictly_contiguous(x, mode.shape_env):
        return None
    try:
        _dim(args[1], x.dim())
    except _Bail:
        return None
    dtype = _probe_dtype(mode, func, args, kwargs, x.dim())
    if dtype is None:
        return None
    return FakeTensor.of_metadata(mode, list(x.shape), list(x.stride()), 0, dtype, x.device)


def _reduction(mode, func, info, args: tuple, kwargs: dict):
    """``sum``/``mean``/``amax``/``amin`` over dims of a contiguous ``x``: the kept dims in
    order (1s where ``keepdim``), contiguous; dtype from the probe."""
    if not args or not isinstance(args[0], FakeTensor) or kwargs.keys() - {"dim", "keepdim", "dtype"}:
        return None
    x = args[0]
    if not _symbolic([x]) or not _strictly_contiguous(x, mode.shape_env):
        return None
    bound = dict(zip(("dim", "keepdim", "dtype"), args[1:], strict=False)) | kwargs
    dims = bound.get("dim")
    if len(args) > 4 or not isinstance(dims, (list, tuple, type(None))):
        return None
    keepdim = bool(bound.get("keepdim", False))
    try:
        reduced = set(range(x.dim())) if not dims else {_dim(d, x.dim()) for d in dims}
    except _Bail:
        return None
    sizes = [1 if d in reduced else size for d, size in enumerate(x.shape) if keepdim or d not in reduced]
    dtype = _probe_dtype(mode, func, args, kwargs, len(sizes))
    if dtype is None:
        return None
    return _contiguous_like(mode, x, sizes, dtype)


def _cat(mode, func, info, args: tuple, kwargs: dict):
    """``cat`` of contiguous tensors of one device whose sizes agree (as expressions) off
    ``dim``: contiguous, the sizes along ``dim`` summed; dtype from the probe."""
    if kwargs or not args or not isinstance(args[0], (list, tuple)) or not args[0]:
        return None
    dim = args[1] if len(args) > 1 else 0
    env = mode.shape_env
    if not all(isinstance(t, FakeTensor) for t in args[0]) or not _symbolic(args[0]):
        return None
    # torch skips 1-d empty tensors (its legacy rule) but for type promotion
    tensors = [t for t in args[0] if not (t.dim() == 1 and type(t.shape[0]) is int and t.shape[0] == 0)]
    if not tensors or len({t.device for t in args[0]}) != 1:
        return None
    first = tensors[0]
    if len({t.dim() for t in tensors}) != 1 or first.dim() == 0:
        return None
    try:
        dim = _dim(dim, first.dim())
    except _Bail:
        return None
    for t in tensors:
        if not _strictly_contiguous(t, env) and not _suggests_contiguous(t, env):
            return None
        if not all(_same(a, b, env) for d, (a, b) in enumerate(zip(t.shape, first.shape, strict=True)) if d != dim):
            return None
    dtype = _probe_dtype(mode, func, args, kwargs, first.dim())
    if dtype is None:
        return None
    sizes = list(first.shape)
    sizes[dim] = _sym(mode, sympy.Add(*(_expr(t.shape[dim]) for t in tensors)))
    return _contiguous_like(mode, first, sizes, dtype)


def _suggests_contiguous(t: FakeTensor, env) -> bool:
    """Whether torch's ``suggest_memory_format`` of ``t`` is certainly the contiguous format:
    it suggests channels-last only for 4-d/5-d tensors whose strides look channels-last
    (c10's heuristic, mirrored with comparisons decided by the value ranges, sizes that
    may be 1 taken as >= 2; undecided: False)."""
    if t.dim() not in (4, 5):
        return True
    order = [1, 3, 2, 0] if t.dim() == 4 else [1, 4, 3, 2, 0]
    sizes, strides = [_expr(v) for v in t.shape], [_expr(v) for v in t.stride()]

    def known(relation):
        answer = env.statically_known(relation, size_oblivious=True)
        if answer is None:
            raise _Bail
        return answer

    try:
        minimum = _ZERO
        if known(sympy.Eq(strides[1], 0)):
            return True
        for d in order:
            if known(sympy.Eq(sizes[d], 0)) or known(sympy.Lt(strides[d], minimum)):
                return True
            if d == 0 and known(sympy.Eq(minimum, strides[1])):
                return True
            minimum = strides[d] * sizes[d] if known(sympy.Gt(sizes[d], 1)) else strides[d]
        return False  # channels-last strides
    except _Bail:
        return False


def _embedding(mode, func, info, args: tuple, kwargs: dict):
    """``embedding(weight, indices, ...)``: indices' sizes and the weight's row size,
    contiguous, in the weight's dtype."""
    if kwargs or len(args) < 2 or not all(isinstance(a, FakeTensor) for a in args[:2]):
        return None
    weight, indices = args[:2]
    if weight.dim() != 2 or indices.dtype not in (torch.int32, torch.int64) or weight.device != indices.device:
        return None
    if not _symbolic([weight, indices]):
        return None
    return _contiguous_like(mode, weight, [*indices.shape, weight.shape[1]], weight.dtype)


_RULES = {
    "_to_copy": _to_copy,
    "unsqueeze": _unsqueeze, "transpose": _transpose, "permute": _permute, "expand": _expand,
    "slice": _slice, "select": _select,
    "mm": _matrix_rule(_mm_sizes), "bmm": _matrix_rule(_bmm_sizes), "addmm": _matrix_rule(_addmm_sizes),
    "native_layer_norm": _layer_norm, "_softmax": _softmax, "_log_softmax": _softmax,
    "sum": _reduction, "mean": _reduction, "amax": _reduction, "amin": _reduction,
    "cat": _cat, "embedding": _embedding,
}

from kiln.symshapes.bridge._fast_reshape import _view  # noqa: E402  (uses the helpers above)

_RULES.update({"view": _view, "_unsafe_view": _view})
