"""Conversions between real and fake tensors.

``fake_from_real`` builds a FakeTensor with a real tensor's metadata, making the listed
dimensions symbolic (one ShapeEnv symbol each, bound to ``DimSource(name, dim)``) and
expressing strides through those symbols wherever the real stride is the dense product of
inner sizes. ``to_real`` goes back: real tensors with the example (hint) sizes and strides,
for backends that need concrete inputs.

Invariants:
- Substituting the hints into a fake made by ``fake_from_real`` gives exactly the real
  tensor's sizes, strides and storage offset.
- Fakes made from views of one real storage share one FakeStorage.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable

import torch

from kiln.symshapes._sources import DimSource
from kiln.symshapes.bridge._fake_mode import FakeTensorMode
from kiln.symshapes.bridge._fake_tensor import FakeTensor
from kiln.symshapes.bridge._sym_node import to_torch

__all__ = ["fake_from_real", "to_real"]


def fake_from_real(
    mode: FakeTensorMode,
    tensor: torch.Tensor,
    *,
    dynamic_dims: Iterable[int] = (),
    name: str | None = None,
    size_source: Callable[[int], object] | None = None,
    dim_ranges: dict[int, tuple[int | None, int | None]] | None = None,
) -> FakeTensor:
    """A FakeTensor of ``mode`` with ``tensor``'s metadata.

    ``dynamic_dims``: dimensions whose size becomes a symbol (needs ``mode.shape_env``);
    ``name``: the input's name, used as ``DimSource(name, dim)`` for each symbol, and, when
    given, static dimensions are recorded too so that ``produce_guards`` checks them;
    ``size_source``: instead of ``DimSource``, the caller's source object for dimension
    ``dim`` (for example a kiln.guards ``TensorSizeSource``); implies recording as ``name``.
    ``dim_ranges``: ``(min, max)`` (either may be None) of dynamic dimensions with an explicit
    range (``ShapeEnv.create_symbol``'s: such a size of 0 or 1 stays a symbol).
    """
    if isinstance(tensor, FakeTensor):
        return tensor
    dynamic = {d % tensor.dim() for d in dynamic_dims} if tensor.dim() else set()
    env = mode.shape_env
    if dynamic and env is None:
        raise ValueError("dynamic_dims need a FakeTensorMode created with a ShapeEnv")
    with mode.materializing():
        sizes: list = list(tensor.shape)
        strides: list = list(tensor.stride())
        record = name is not None or size_source is not None
        if size_source is None:
            label = name or "<anonymous>"

            def size_source(d: int) -> object:
                return DimSource(label, d)

        if env is not None and (dynamic or record):
            ranges = dim_ranges or {}
            exprs = [
                env.create_symbol(size, size_source(d), dynamic=d in dynamic,
                                  min=ranges.get(d, (None, None))[0] if d in dynamic else None,
                                  max=ranges.get(d, (None, None))[1] if d in dynamic else None)
                if (d in dynamic or record) else size
                for d, size in enumerate(tensor.shape)
            ]
            stride_exprs = _symbolic_strides(tensor, exprs)
            sizes = [to_torch(e, mode.env_view) if not isinstance(e, int) else e for e in exprs]
            strides = [to_torch(e, mode.env_view) if not isinstance(e, int) else e for e in stride_exprs]
        meta = torch.empty_strided(sizes, strides, dtype=tensor.dtype, device="meta")
        if tensor.storage_offset():
            meta = meta.as_strided(sizes, strides, tensor.storage_offset())
    fake = FakeTensor(mode, meta, tensor.device, mode.storage_for(tensor), tensor.requires_grad)
    fake.real_ref = weakref.ref(tensor)
    return fake


def _symbolic_strides(tensor: torch.Tensor, sizes: list) -> list:
    """Strides written in the size symbols where the real stride is the dense product."""
    strides = list(tensor.stride())
    order = sorted(range(tensor.dim()), key=lambda d: (strides[d], tensor.shape[d]))
    out: list = list(strides)
    expected_value, expected_expr = 1, 1
    for d in order:
        if strides[d] == expected_value:
            out[d] = expected_expr
        else:
            expected_value, expected_expr = strides[d], strides[d]
        expected_value *= tensor.shape[d]
        expected_expr = expected_expr * sizes[d]
    return [int(s) if getattr(s, "is_Integer", False) else s for s in out]


def to_real(value, *, device: torch.device | str | None = None, unbacked_hint: int = 2, generator: torch.Generator | None = None):
    """Real example tensors for the FakeTensors in ``value`` (nested lists/tuples/dicts).

    A fake made by ``from_real`` whose original tensor is still alive (and unchanged in
    shape) returns that tensor. Others become new tensors with the hint sizes and strides,
    filled with random normal values (floats) or zeros, on ``device`` (default: the fake's
    device; pass ``device`` when that one is not available, e.g. ``cuda`` without a GPU).
    Unbacked sizes take ``unbacked_hint``.
    """
    if isinstance(value, FakeTensor):
        return _materialize(value, device, unbacked_hint, generator)
    if isinstance(value, (list, tuple)):
        return type(value)(to_real(v, device=device, unbacked_hint=unbacked_hint, generator=generator) for v in value)
    if isinstance(value, dict):
        return {k: to_real(v, device=device, unbacked_hint=unbacked_hint, generator=generator) for k, v in value.items()}
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        env = value.node.env
        return env.size_hint(value.node.expr, fallback=unbacked_hint)
    return value


def _hint(value, unbacked_hint: int) -> int:
    if isinstance(value, torch.SymInt):
        return int(value.node.env.size_hint(value.node.expr, fallback=unbacked_hint))
    return int(value)


def _materialize(fake: FakeTensor, device, unbacked_hint: int, generator) -> torch.Tensor:
    original = fake.real_ref() if fake.real_ref is not None else None
    if original is not None and device is None:
        return original
    sizes = [_hint(s, unbacked_hint) for s in fake.shape]
    strides = [_hint(s, unbacked_hint) for s in fake.stride()]
    offset = _hint(fake.storage_offset(), unbacked_hint)
    target = torch.device(device) if device is not None else fake.device
    with fake.fake_mode.materializing():
        needed = offset + 1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True)) if all(sizes) else 0
        base = torch.empty(max(needed, 0), dtype=fake.dtype, device=target)
        if base.is_floating_point() or base.is_complex():
            base.normal_(generator=generator)
        else:
            base.zero_()
        real = base.as_strided(sizes, strides, offset)
        if fake.requires_grad:
            real.requires_grad_(True)
    return real
