"""Rules for ATen ops whose output size or value depends on tensor data.

Each rule answers an op with fresh unbacked symbols instead of running a meta kernel:
``nonzero`` -> ``(u, ndim)`` with ``0 <= u <= numel``; ``masked_select`` -> ``(u,)``;
``.item()`` (``_local_scalar_dense``) -> an unbacked SymInt/SymFloat/SymBool. One line per
op registers it in ``data_dependent_rules``.

Invariant: every symbol a rule creates is unbacked (no hint), so any later decision that
needs its value either is settled by its range or raises GuardOnDataDependentError.
"""

from __future__ import annotations

import torch

from kiln.symshapes.bridge._fake_mode import (
    FakeTensorMode,
    UnsupportedOpError,
    data_dependent_rules,
)
from kiln.symshapes.bridge._fake_tensor import FakeTensor
from kiln.symshapes.bridge._sym_node import KilnSymNode

__all__: list[str] = []


def _env(mode: FakeTensorMode, func):
    if mode.shape_env is None:
        raise UnsupportedOpError(func, "its output depends on tensor data; create the FakeTensorMode with a ShapeEnv")
    return mode.shape_env


def _numel_bound(t: FakeTensor) -> int | None:
    n = t.numel()
    if isinstance(n, int):
        return n
    return None


def _unbacked_size(mode: FakeTensorMode, func, upper: int | None) -> torch.SymInt:
    sym = _env(mode, func).create_unbacked_symbol("int", size_like=True, max=upper)
    return torch.SymInt(KilnSymNode(sym, mode.env_view, int, None))


def _fake(mode: FakeTensorMode, sizes, dtype, device) -> FakeTensor:
    meta = torch.empty(sizes, dtype=dtype, device="meta")
    return FakeTensor(mode, meta, device)


def nonzero(mode, func, args, kwargs):
    """``(n, ndim)`` indices, column-major as torch's kernels lay them out: strides ``(1, n)``."""
    (x,) = args
    n = _unbacked_size(mode, func, _numel_bound(x))
    meta = torch.empty_strided((n, x.dim()), (1, n), dtype=torch.long, device="meta")
    return FakeTensor(mode, meta, x.device)


def masked_select(mode, func, args, kwargs):
    x, mask = args
    with mode:
        shape = torch.broadcast_shapes(x.shape, mask.shape)
    upper = 1
    for s in shape:
        upper = upper * s if isinstance(s, int) and upper is not None else None
    n = _unbacked_size(mode, func, upper)
    return _fake(mode, (n,), x.dtype, x.device)


def local_scalar_dense(mode, func, args, kwargs):
    (x,) = args
    env = _env(mode, func)
    if x.dtype.is_floating_point:
        return torch.SymFloat(KilnSymNode(env.create_unbacked_symbol("float"), mode.env_view, float, None))
    if x.dtype is torch.bool:
        sym = env.create_unbacked_symbol("int", min=0, max=1)
        return torch.SymInt(KilnSymNode(sym, mode.env_view, int, None)) == 1
    return torch.SymInt(KilnSymNode(env.create_unbacked_symbol("int"), mode.env_view, int, None))


def index(mode, func, args, kwargs):
    """Boolean-mask indices become the long indices of their nonzero positions."""
    x, indices = args[0], list(args[1])
    if not any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices):
        return NotImplemented
    expanded = []
    for i in indices:
        if isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8):
            positions = nonzero(mode, func, (i,), {})
            expanded.extend(mode.run_meta(torch.ops.aten.select.int, (positions, 1, d), {}) for d in range(i.dim()))
        else:
            expanded.append(i)
    return mode.run_meta(func, (x, expanded, *args[2:]), kwargs)


data_dependent_rules["nonzero"] = nonzero
data_dependent_rules["index"] = index
data_dependent_rules["masked_select"] = masked_select
data_dependent_rules["_local_scalar_dense"] = local_scalar_dense
