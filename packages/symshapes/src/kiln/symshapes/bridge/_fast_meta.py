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
- ``view``/``_unsafe_view`` of a strictly contiguous tensor to sizes whose product is the
  input's number of elements as an expression (a ``-1`` inferred when the division leaves
  no denominator): contiguous strides, the input's storage offset, and the input's storage
  where the schema says the result aliases it.
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
    """``value`` for a dtype probe: a tensor becomes a 1-element meta tensor of its dtype and
    dims, a symbolic number its example value."""
    if isinstance(value, torch.Tensor):
        return torch.empty((1,) * value.dim(), dtype=value.dtype, device="meta")
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        node = value.node
        if not isinstance(node, KilnSymNode) or node.hint is None:
            raise _Bail
        return node.pytype(node.hint)
    if isinstance(value, (list, tuple)):
        raise _Bail  # tensor lists and size lists: not an elementwise operand
    return value


def _probe_key(value):
    if isinstance(value, torch.Tensor):
        return (value.dtype, value.dim() == 0)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return (type(value), value.node.hint)
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
    try:
        key = (func, tuple(_probe_key(a) for a in args), tuple((k, _probe_key(v)) for k, v in kwargs.items()))
        hash(key)
    except (TypeError, _Bail):
        return None
    probes = mode.fast_probes
    if key in probes:
        return probes[key]
    dtype = None
    try:
        probe_args = tuple(_probe_value(a) for a in args)
        probe_kwargs = {k: _probe_value(v) for k, v in kwargs.items()}
        with no_python_dispatcher():
            out = func(*probe_args, **probe_kwargs)
        if isinstance(out, torch.Tensor) and out.dim() == ndim:
            dtype = out.dtype
    except Exception:  # the meta kernel will raise it properly
        dtype = None
    probes[key] = dtype
    return dtype


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


def _view(mode, func, info, args: tuple, kwargs: dict):
    if kwargs or len(args) != 2 or not isinstance(args[0], FakeTensor) or not isinstance(args[1], (list, tuple)):
        return None
    source, sizes = args
    env = mode.shape_env
    if not _symbolic([source]) or not _strictly_contiguous(source, env):
        return None
    numel = sympy.Mul(*(_expr(s) for s in source.shape))
    known = _ONE
    inferred = None
    for i, s in enumerate(sizes):
        if type(s) is int and s == -1:
            if inferred is not None:
                return None
            inferred = i
        elif type(s) is int and s < 0:
            return None
        else:
            known = known * _expr(s)
    sizes = list(sizes)
    if inferred is not None:
        if known == 0:
            return None
        quotient = env.simplify(numel / known)
        if sympy.fraction(quotient)[1] != 1 or not quotient.is_integer:
            return None
        sizes[inferred] = int(quotient) if quotient.is_Integer else to_torch(quotient, mode.env_view)
    elif sympy.expand(numel - known) != 0 and env.simplify(numel - known) != 0:
        return None
    storage = source.fake_storage if info.aliases and info.aliases[0] == 0 else None
    return FakeTensor.of_metadata(mode, sizes, _contiguous_strides(sizes, mode), source.storage_offset(),
                                  source.dtype, source.device, storage)


_RULES = {"_to_copy": _to_copy, "view": _view, "_unsafe_view": _view}
