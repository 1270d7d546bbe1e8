"""Rules for ATen ops whose output size or value depends on tensor data.

Each rule answers an op with fresh unbacked symbols instead of running a meta kernel:
``nonzero`` -> ``(u, ndim)`` with ``0 <= u <= numel``; ``masked_select`` -> ``(u,)``;
``.item()`` (``_local_scalar_dense``) -> an unbacked SymInt/SymFloat/SymBool; ``unique``
(``_unique2``, ``unique_consecutive`` without ``dim``) -> ``u`` values (and counts), with
``0 <= u <= numel``; ``repeat_interleave`` of a tensor of repeats with no ``output_size`` ->
``(u,)``; ``bincount`` -> ``(u,)`` with ``u >= minlength``. One line per op registers it in
``data_dependent_rules``; a rule returns NotImplemented for the overloads it leaves to the
meta kernel (a ``dim``, a given ``output_size``).

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
from kiln.symshapes.bridge._torch_internals import op_schema

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


def _unique_outputs(mode, func, x, return_inverse: bool, return_counts: bool):
    """``(values, inverse, counts)`` as ``_unique2`` and ``unique_consecutive`` give them: the
    inverse has ``x``'s shape, and a result not asked for is an empty long tensor."""
    n = _unbacked_size(mode, func, _numel_bound(x))
    values = _fake(mode, (n,), x.dtype, x.device)
    inverse = _fake(mode, x.shape if return_inverse else (0,), torch.long, x.device)
    counts = _fake(mode, (n,) if return_counts else (0,), torch.long, x.device)
    return values, inverse, counts


def unique2(mode, func, args, kwargs):
    bound = _bind(func, args, kwargs)
    return _unique_outputs(mode, func, bound["self"], bound["return_inverse"], bound["return_counts"])


def unique_consecutive(mode, func, args, kwargs):
    bound = _bind(func, args, kwargs)
    if bound["dim"] is not None:
        return NotImplemented
    return _unique_outputs(mode, func, bound["self"], bound["return_inverse"], bound["return_counts"])


def repeat_interleave(mode, func, args, kwargs):
    """``repeat_interleave(repeats)`` (the overload the others decompose to) -> ``(u,)``."""
    bound = _bind(func, args, kwargs)
    if func is not torch.ops.aten.repeat_interleave.Tensor or bound["output_size"] is not None:
        return NotImplemented
    repeats = bound["repeats"]
    return _fake(mode, (_unbacked_size(mode, func, None),), repeats.dtype, repeats.device)


# bincount's result dtype: counts are int64; weights give float32 for float32, else float64
_BINCOUNT_WEIGHTS = {None: torch.long, torch.float32: torch.float32, torch.float64: torch.float64}


def bincount(mode, func, args, kwargs):
    """``(u,)`` bins with ``u >= minlength`` (one more than the largest value, at least)."""
    bound = _bind(func, args, kwargs)
    x, weights, minlength = bound["self"], bound["weights"], bound["minlength"]
    dtype = _BINCOUNT_WEIGHTS.get(None if weights is None else weights.dtype)
    if dtype is None or not isinstance(minlength, int):
        raise UnsupportedOpError(func, "only counts, float32 or float64 weights and an int minlength are modelled")
    sym = _env(mode, func).create_unbacked_symbol("int", size_like=True, min=max(minlength, 0))
    n = torch.SymInt(KilnSymNode(sym, mode.env_view, int, None))
    return _fake(mode, (n,), dtype, x.device)


def _bind(func, args, kwargs) -> dict:
    """The op's arguments by schema name, defaults filled in."""
    bound = {}
    for i, arg in enumerate(op_schema(func).arguments):
        if i < len(args):
            bound[arg.name] = args[i]
        elif arg.name in kwargs:
            bound[arg.name] = kwargs[arg.name]
        else:
            bound[arg.name] = arg.default_value if arg.has_default_value() else None
    return bound


data_dependent_rules["nonzero"] = nonzero
data_dependent_rules["index"] = index
data_dependent_rules["masked_select"] = masked_select
data_dependent_rules["_local_scalar_dense"] = local_scalar_dense
data_dependent_rules["_unique2"] = unique2
data_dependent_rules["unique_consecutive"] = unique_consecutive
data_dependent_rules["repeat_interleave"] = repeat_interleave
data_dependent_rules["bincount"] = bincount
