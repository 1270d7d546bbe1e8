"""DispatchCache: replay the output metadata of an op seen before with the same input metadata.

What an ATen op produces (output sizes, strides, storage offsets, dtypes, devices, which
outputs alias which inputs) is a function of its inputs' metadata and its non-tensor
arguments. Transformer-like programs repeat the same ops on the same shapes layer
after layer, so the second time round the mode can skip the meta kernel (often a Python
reference implementation) and build the outputs from a cached description.

Invariants:
- A key exists only when every argument is hashable: tensors contribute (sizes, strides,
  storage offset, dtype, device, which earlier argument shares their storage), each size an int or, for kiln SymInts, its sympy
  expression; an unhashable value or an object without value semantics makes the call
  uncacheable. Symbolic entries are only meaningful within one ShapeEnv: a key that holds a
  symbolic size holds the mode's ShapeEnv too. A key with concrete sizes only holds None in
  its place, and its entry is stored only if its outputs are concrete as well (no unbacked
  size), so one cache can serve modes with different ShapeEnvs (a compiler that makes a
  ShapeEnv per capture shares what every capture computes alike). Replaying a symbolic entry
  records nothing new, which is sound because the first call already recorded, in that same
  ShapeEnv, every guard the result depends on (knowledge only grows).
- Replaying an entry yields outputs equal in every metadata field to what running the meta
  kernel gives, including aliasing (a view shares its input's FakeStorage; an in-place
  result is the input object itself).
- Only successful calls are stored; errors always come from the meta kernel itself.
- The only global state an output's metadata depends on, the default dtype, is in the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
import torch

from kiln.symshapes.bridge._fake_tensor import FakeTensor
from kiln.symshapes.bridge._sym_node import KilnSymNode, to_torch

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
    # the first output's own sizes, strides and offset (torch SymInts of this entry's
    # ShapeEnv) when some are symbolic: a replay reuses them instead of making new ones
    symbolic: tuple | None = field(default=None, compare=False)


@dataclass(slots=True)
class DispatchCache:
    """A per-mode (or explicitly shared) map from call metadata to output descriptions."""

    entries: dict[tuple, object] = field(default_factory=dict)
    # ``_fast_meta``'s probes: torch's C++ meta kernel on 1-element tensors (no ShapeEnv)
    probes: dict[tuple, object] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def key(self, func, args: tuple, kwargs: dict, shape_env: object = None) -> tuple | None:
        """The cache key of a call, or None when the call is not cacheable."""
        # Factories without a dtype argument follow the global default dtype.
        parts: list = [func, None, torch.get_default_dtype()]
        storages: dict[object, int] = {}
        try:
            for value in args:
                if not _describe(value, parts, storages):
                    return None
            for name, value in kwargs.items():
                parts.append(name)
                if not _describe(value, parts, storages):
                    return None
        except _Uncacheable:
            return None
        if shape_env is not None and _symbolic(parts):
            parts[1] = shape_env
        return tuple(parts)

    def store(self, key: tuple, inputs: list[FakeTensor], out: object) -> None:
        spec = _spec(out, inputs)
        if spec is _UNCACHEABLE:
            return
        if key[1] is None and not _concrete(spec):
            return  # a shared entry must not name the symbols of one ShapeEnv (unbacked sizes)
        self.entries[key] = spec

    def replay(self, spec: object, inputs: list[FakeTensor], mode) -> object:
        """Outputs for ``spec`` built for this call's ``inputs``."""
        return _build(spec, inputs, mode)


class _Uncacheable(Exception):
    pass


_UNCACHEABLE = object()


def _static(value):
    """An int as is, a kiln SymInt/SymFloat/SymBool as its simplified expression, else raise."""
    if type(value) is int:
        return value
    node = getattr(value, "node", None)
    if isinstance(node, KilnSymNode):
        expr = node.env.simplify(node.expr)
        return int(expr) if expr.is_Integer else expr
    raise _Uncacheable


def _describe(value, parts: list, storages: dict[object, int]) -> bool:
    if isinstance(value, torch.Tensor):
        size = tuple(_static(v) for v in value.shape)
        stride = tuple(_static(v) for v in value.stride())
        # Which earlier argument this one shares storage with (-1: none): outputs that
        # alias an input are replayed onto the same argument position.
        storage = getattr(value, "fake_storage", None)
        shared = storages.setdefault(storage, len(storages)) if storage is not None else -1
        parts.append((size, stride, _static(value.storage_offset()), value.dtype, value.device, shared))
        return True
    if isinstance(value, (list, tuple)):
        parts.append(len(value))
        return all(_describe(v, parts, storages) for v in value)
    if type(value) in _SCALARS:
        parts.append((type(value), value))
        return True
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        parts.append((type(value), _static(value)))
        return True
    return False


def _symbolic(value) -> bool:
    """Whether a key part holds a sympy expression (a size that is not a plain int)."""
    if isinstance(value, (tuple, list)):
        return any(_symbolic(v) for v in value)
    return isinstance(value, sympy.Basic)


def _concrete(spec) -> bool:
    if isinstance(spec, OutputSpec):
        return all(type(v) is int for v in (*spec.size, *spec.stride, spec.offset))
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "value":
        return True
    return all(_concrete(s) for s in spec)


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
        try:
            size = tuple(_static(v) for v in out.shape)
            stride = tuple(_static(v) for v in out.stride())
            offset = _static(out.storage_offset())
        except _Uncacheable:
            return _UNCACHEABLE
        symbolic = None
        if not all(type(v) is int for v in (*size, *stride, offset)):
            symbolic = (tuple(out.shape), out.stride(), out.storage_offset())
        return OutputSpec(size, stride, offset, out.dtype, out.device, relation, index, symbolic)
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
        storage = inputs[spec.index].fake_storage if spec.relation == "view" else None
        size, stride, offset = _torch_metadata(spec, mode)
        return FakeTensor.of_metadata(mode, size, stride, offset, spec.dtype, spec.device, storage)
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "value":
        return spec[1]
    return type(spec)(_build(s, inputs, mode) for s in spec)


def _torch_metadata(spec: OutputSpec, mode) -> tuple:
    if spec.symbolic is not None:
        return spec.symbolic
    size = [v if type(v) is int else to_torch(v, mode.env_view) for v in spec.size]
    stride = [v if type(v) is int else to_torch(v, mode.env_view) for v in spec.stride]
    offset = spec.offset if type(spec.offset) is int else to_torch(spec.offset, mode.env_view)
    return size, stride, offset
