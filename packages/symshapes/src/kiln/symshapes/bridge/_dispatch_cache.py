"""DispatchCache: replay the output metadata of an op seen before with the same input metadata.

For static shapes, what an ATen op produces (output sizes, strides, storage offsets, dtypes,
devices, which outputs alias which inputs) is a function of its inputs' metadata and its
non-tensor arguments. Transformer-like programs repeat the same ops on the same shapes layer
after layer, so the second time round the mode can skip the meta kernel (often a Python
reference implementation) and build the outputs from a cached description.

Invariants:
- A key exists only when every argument is hashable and static: tensors contribute
  (sizes, strides, storage offset, dtype, device) as plain ints; any SymInt, unhashable
  value or non-tensor object without value semantics makes the call uncacheable.
- Replaying an entry yields outputs equal in every metadata field to what running the meta
  kernel gives, including aliasing (a view shares its input's FakeStorage; an in-place
  result is the input object itself).
- Only successful calls are stored; errors always come from the meta kernel itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kiln.symshapes.bridge._fake_tensor import FakeTensor

__all__ = ["DispatchCache", "OutputSpec"]

_SCALARS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout)


@dataclass(slots=True, frozen=True)
class OutputSpec:
    """How to rebuild one output tensor: metadata plus its relation to an input tensor."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype
    device: torch.device
    relation: str  # "fresh", "view" (shares input ``index``'s storage) or "same" (is that input)
    index: int = -1


@dataclass(slots=True)
class DispatchCache:
    """A per-mode (or explicitly shared) map from call metadata to output descriptions."""

    entries: dict[tuple, object] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def key(self, func, args: tuple, kwargs: dict) -> tuple | None:
        """The cache key of a call, or None when the call is not cacheable."""
        parts: list = [func]
        try:
            for value in args:
                if not _describe(value, parts):
                    return None
            for name, value in kwargs.items():
                parts.append(name)
                if not _describe(value, parts):
                    return None
        except _Uncacheable:
            return None
        return tuple(parts)

    def store(self, key: tuple, inputs: list[FakeTensor], out: object) -> None:
        spec = _spec(out, inputs)
        if spec is not _UNCACHEABLE:
            self.entries[key] = spec

    def replay(self, spec: object, inputs: list[FakeTensor], mode) -> object:
        """Outputs for ``spec`` built for this call's ``inputs``."""
        return _build(spec, inputs, mode)


class _Uncacheable(Exception):
    pass


_UNCACHEABLE = object()


def _describe(value, parts: list) -> bool:
    if isinstance(value, torch.Tensor):
        size = tuple(value.shape)
        stride = value.stride()
        offset = value.storage_offset()
        for item in (*size, *stride, offset):
            if type(item) is not int:
                return False
        parts.append((size, stride, offset, value.dtype, value.device))
        return True
    if isinstance(value, (list, tuple)):
        parts.append(len(value))
        return all(_describe(v, parts) for v in value)
    if type(value) in _SCALARS:
        parts.append((type(value), value))
        return True
    return False


def _spec(out, inputs: list[FakeTensor]):
    if isinstance(out, FakeTensor):
        for i, fake in enumerate(inputs):
            if out is fake:
                return OutputSpec(tuple(out.shape), out.stride(), out.storage_offset(), out.dtype, out.device, "same", i)
        relation, index = "fresh", -1
        for i, fake in enumerate(inputs):
            if out.fake_storage is fake.fake_storage:
                relation, index = "view", i
                break
        size, stride, offset = tuple(out.shape), out.stride(), out.storage_offset()
        return OutputSpec(size, stride, offset, out.dtype, out.device, relation, index)
    if isinstance(out, (list, tuple)):
        items = [_spec(o, inputs) for o in out]
        if any(i is _UNCACHEABLE for i in items):
            return _UNCACHEABLE
        return type(out)(items)
    if type(out) in (int, float, bool, type(None)):
        return ("value", out)
    return _UNCACHEABLE


def _build(spec, inputs: list[FakeTensor], mode):
    if isinstance(spec, OutputSpec):
        if spec.relation == "same":
            return inputs[spec.index]
        meta = _meta_tensor(spec)
        storage = inputs[spec.index].fake_storage if spec.relation == "view" else None
        return FakeTensor(mode, meta, spec.device, storage)
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "value":
        return spec[1]
    return type(spec)(_build(s, inputs, mode) for s in spec)


def _meta_tensor(spec: OutputSpec) -> torch.Tensor:
    if spec.offset == 0:
        return torch.empty_strided(spec.size, spec.stride, dtype=spec.dtype, device="meta")
    span = 1 + sum((s - 1) * st for s, st in zip(spec.size, spec.stride, strict=True)) if all(spec.size) else 0
    base = torch.empty(spec.offset + span, dtype=spec.dtype, device="meta")
    return base.as_strided(spec.size, spec.stride, spec.offset)
