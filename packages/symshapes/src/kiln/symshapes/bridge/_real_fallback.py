"""The real-kernel fallback: output metadata of an ATen op with no meta kernel, found by
running its real kernel on zeros.

``geqrf``, ``histogram``, ``_histogramdd_bin_edges`` and a few other ATen ops have neither a
Meta kernel nor a fake implementation in torch. Where every input is static (plain int
sizes, strides and offsets, no symbolic number among the arguments), the sizes, strides and
dtypes of their results follow from the inputs' metadata alone, so running the op's real
kernel once on zero-filled tensors of the same metadata tells them; torch's FakeTensorMode
does the same (``run_fallback_kernel``). The values computed are thrown away: only the
metadata of the results becomes fake tensors.

What is never run this way (the caller keeps its ``UnsupportedOpError``, a graph break
around the op): an op whose output sizes depend on the data (tagged
``dynamic_output_shape``: ``linalg_lstsq``'s residuals, ``_ctc_loss``'s alphas), or whose
result is a value computed from the data (``data_dependent_output``: ``equal``,
``allclose``; and any op returning something other than tensors), random ops (they would
consume the generator's state at trace time), ops that write or alias an input (in-place,
``out=``, views: a zero tensor's metadata change cannot be mirrored on the fake), ops outside
torch's own namespaces (a user's custom op may do anything), symbolic inputs, and devices
the machine cannot run. A result over an input's memory makes it give up too.
"""

from __future__ import annotations

import torch

from kiln.symshapes.bridge._fake_tensor import FakeTensor
from kiln.symshapes.bridge._torch_internals import op_schema

__all__ = ["run_real_fallback"]

# torch's own operator namespaces: their kernels only compute (torch's ``can_run_unsafe_fallback``)
_NAMESPACES = frozenset({"aten", "prims"})
_REFUSED_TAGS = frozenset({
    torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output, torch.Tag.inplace_view,
    torch.Tag.nondeterministic_seeded,
})


def run_real_fallback(mode, func, info, args: tuple, kwargs: dict):
    """Fake results of ``func(*args, **kwargs)`` (fake or real tensors among the arguments)
    from its real kernel run on zeros of the same metadata, or None where that could give
    metadata the data would change (see the module docstring)."""
    if not _may_run(func, info):
        return None
    inputs: list[torch.Tensor] = []
    try:
        with mode.materializing(), torch.no_grad():
            real_args = _zeros_for(args, inputs)
            real_kwargs = {k: _zeros_for(v, inputs) for k, v in kwargs.items()}
            out = func(*real_args, **real_kwargs)
    except Exception:  # a symbolic argument, a device not here, a kernel refusing zeros
        return None
    storages = {t.untyped_storage().data_ptr() for t in inputs if t.numel()}
    results = out if isinstance(out, (tuple, list)) else (out,)
    flat = [t for r in results for t in (r if isinstance(r, (tuple, list)) else (r,))]
    if not all(isinstance(t, torch.Tensor) and t.layout == torch.strided for t in flat):
        return None
    if any(t.numel() and t.untyped_storage().data_ptr() in storages for t in flat):
        return None

    def fake(t: torch.Tensor) -> FakeTensor:
        return FakeTensor.of_metadata(mode, list(t.shape), list(t.stride()), t.storage_offset(), t.dtype, t.device)

    if isinstance(out, torch.Tensor):
        return fake(out)
    return type(out)([fake(r) if isinstance(r, torch.Tensor) else type(r)(fake(t) for t in r) for r in out])


class _Symbolic(Exception):
    """An argument holds a symbolic size or number: the fallback does not apply."""


def _may_run(func, info) -> bool:
    if func.namespace not in _NAMESPACES or _REFUSED_TAGS.intersection(func.tags):
        return False
    if any(a is not None for a in info.aliases) or any(info.writes) or info.mutates_metadata:
        return False
    returns = op_schema(func).returns
    return bool(returns) and all(str(r.type) in ("Tensor", "Tensor[]", "List[Tensor]") for r in returns)


def _zeros_for(value, inputs: list[torch.Tensor]):
    """``value`` with each fake tensor replaced by zeros of its metadata (into ``inputs``)."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise _Symbolic
    if isinstance(value, torch.Tensor):
        if not isinstance(value, FakeTensor):
            inputs.append(value)
            return value
        sizes, strides, offset = value.shape, value.stride(), value.storage_offset()
        if not all(type(s) is int for s in (*sizes, *strides, offset)):
            raise _Symbolic
        if not all(sizes):
            zeros = torch.empty_strided(tuple(sizes), tuple(strides), dtype=value.dtype, device=value.device)
        else:
            extent = offset + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True)) + 1
            base = torch.zeros(extent, dtype=value.dtype, device=value.device)
            zeros = base.as_strided(tuple(sizes), tuple(strides), offset)
        inputs.append(zeros)
        return zeros
    if isinstance(value, (list, tuple)):
        return type(value)(_zeros_for(v, inputs) for v in value)
    return value
