"""``view``/``_unsafe_view`` and ``reshape`` on symbolic sizes without guards: torch's
``computeStride`` (which decides whether a reshape can be a view, and the strides) over
expressions, part of the rules of ``_fast_meta``.

- ``view``/``_unsafe_view`` (a ``_fast_meta`` rule): the sizes (``-1`` inferred when the
  division is exact) and strides when the view exists for every size the symbols may take.
- ``reshape_plan``: whether a ``reshape`` is a view for every size, a copy for every size
  (checked in each world where some sizes that may be 1 are 1), or depends on a decision
  (torch's own kernel then runs and guards). kiln.symexec and kiln.aotgrad trace a reshape
  with a plan as that view or as torch's contiguous copy.
"""

from __future__ import annotations

import sympy

from kiln.symshapes.bridge._fake_tensor import FakeTensor
from kiln.symshapes.bridge._fast_meta import (
    _ONE,
    _Bail,
    _contiguous_strides,
    _expr,
    _strictly_contiguous,
    _sym,
    _symbolic,
)
from kiln.symshapes.bridge._sym_node import to_torch

__all__ = ["reshape_plan"]


class _NoView(Exception):
    """``computeStride`` decided that there is no view (not a doubt: a definite no)."""


def _view(mode, func, info, args: tuple, kwargs: dict):
    if kwargs or len(args) != 2 or not isinstance(args[0], FakeTensor) or not isinstance(args[1], (list, tuple)):
        return None
    source = args[0]
    if not _symbolic([source]):
        return None
    laid_out = _view_layout(source, args[1], mode)
    if laid_out is None:
        return None
    sizes, strides = laid_out
    storage = source.fake_storage if info.aliases and info.aliases[0] == 0 else None
    return FakeTensor.of_metadata(mode, sizes, strides, source.storage_offset(), source.dtype, source.device, storage)


def _view_layout(source: FakeTensor, sizes, mode) -> tuple[list, list] | None:
    """The sizes (``-1`` inferred) and strides of ``source`` viewed with ``sizes``, when that
    view exists for every size the symbols may take (decided without a guard), else None."""
    env = mode.shape_env
    numel = sympy.Mul(*(_expr(s) for s in source.shape))
    known = _ONE
    inferred = None
    try:
        for i, s in enumerate(sizes):
            if type(s) is int and s == -1:
                if inferred is not None:
                    return None
                inferred = i
            elif type(s) is int and s < 0:
                return None
            else:
                known = known * _expr(s)
    except _Bail:
        return None
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
    if _strictly_contiguous(source, env):
        return sizes, _contiguous_strides(sizes, mode)
    try:
        strides = _view_strides(source, sizes, env)
    except _Bail:
        return None
    return sizes, [_sym(mode, e) for e in strides]


def reshape_plan(fake: FakeTensor, sizes) -> str | None:
    """What ``fake.reshape(sizes)`` is for every size its symbols may take, decided without
    a guard: ``"view"`` (a view for sizes >= 2 is one for sizes of 1 as well), ``"copy"`` (no
    view, checked in every world where some of the sizes that may be 1 are 1: at most 6 such
    symbols), or None when that needs a decision (the caller runs torch's reshape, whose
    computeStride asks about each size being 1 and records guards)."""
    mode = fake.fake_mode
    env = mode.shape_env
    if env is None or not _symbolic([fake]):
        return None
    if _view_layout(fake, sizes, mode) is not None:
        return "view"
    try:
        old_sizes, old_strides = [_expr(v) for v in fake.shape], [_expr(v) for v in fake.stride()]
        new_sizes = [_expr(v) for v in sizes]
    except _Bail:
        return None
    if any(type(v) is int and v < 0 for v in sizes):
        return None  # -1: the copy path would need the inferred size too
    numel_old, numel_new = sympy.Mul(*old_sizes), sympy.Mul(*new_sizes)
    if env.simplify(sympy.expand(numel_old - numel_new)) != 0:
        return None
    symbols = sorted({sym for e in (*old_sizes, *old_strides, *new_sizes) for sym in e.free_symbols
                      if env.may_be_one(sym)}, key=str)
    if len(symbols) > 6:
        return None
    for mask in range(1 << len(symbols)):
        ones = {sym: _ONE for i, sym in enumerate(symbols) if mask >> i & 1}
        try:
            _compute_stride([e.xreplace(ones) for e in old_sizes], [e.xreplace(ones) for e in old_strides],
                            [e.xreplace(ones) for e in new_sizes], env)
        except _NoView:
            continue  # a copy in this world too
        except _Bail:
            return None
        return None  # a view in this world: copy or view depends on the sizes
    return "copy"


def _view_strides(source: FakeTensor, sizes, env) -> list:
    """torch's ``computeStride`` (whether ``source`` can be viewed with ``sizes``, and the
    strides) over expressions: see ``_compute_stride``. Sizes that may be 1 are taken as
    >= 2 (where one is 1 at run time the view still exists, and only that size-1 dim's
    stride may differ); undecided, or no view: ``_Bail``."""
    try:
        return _compute_stride([_expr(v) for v in source.shape], [_expr(v) for v in source.stride()],
                               [_expr(v) for v in sizes], env)
    except _NoView:
        raise _Bail from None


def _compute_stride(old_sizes: list, old_strides: list, new_sizes: list, env) -> list:
    """torch's ``computeStride`` over expressions: the old dims are cut into chunks that are
    contiguous among themselves, each chunk must be covered by whole new dims, and a new
    dim's stride is the product of the later new dims of its chunk times the chunk's
    innermost stride. Each comparison is decided by the value ranges, sizes that may be 1
    taken as >= 2: undecided, ``_Bail``; no view, ``_NoView``."""
    def known(relation) -> bool:
        answer = env.statically_known(relation, size_oblivious=True)
        if answer is None:
            raise _Bail
        return answer

    if not old_sizes:
        return [_ONE] * len(new_sizes)
    if any(known(sympy.Eq(s, 0)) for s in old_sizes):
        raise _Bail  # empty tensors: torch's own rule
    strides = [None] * len(new_sizes)
    view_d = len(new_sizes) - 1
    base = old_strides[-1]
    tensor_numel, view_numel = _ONE, _ONE
    for tensor_d in range(len(old_sizes) - 1, -1, -1):
        tensor_numel = tensor_numel * old_sizes[tensor_d]
        if tensor_d == 0 or (not known(sympy.Eq(old_sizes[tensor_d - 1], 1))
                             and not known(sympy.Eq(old_strides[tensor_d - 1], tensor_numel * base))):
            while view_d >= 0 and (known(sympy.Lt(view_numel, tensor_numel)) or known(sympy.Eq(new_sizes[view_d], 1))):
                strides[view_d] = view_numel * base
                view_numel = view_numel * new_sizes[view_d]
                view_d -= 1
            if not known(sympy.Eq(view_numel, tensor_numel)):
                raise _NoView
            if tensor_d > 0:
                base = old_strides[tensor_d - 1]
                tensor_numel, view_numel = _ONE, _ONE
    if view_d != -1:
        raise _NoView
    return strides
