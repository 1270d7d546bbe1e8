"""The tensor-match guard: a tensor's metadata as traced.

``TensorMatch`` pins the exact Python type (``torch.Tensor``, ``nn.Parameter``, a subclass),
the dispatch key set (after thread-local include/exclude, as dispatch sees it), dtype,
device, layout, requires_grad, the number of dimensions, and per dimension the size and the
stride, each either fixed (an int) or free (None). It records values only, never the tensor.

Two emissions have the same meaning: per tensor Python code, and a batch of all tensor
matches of a guard set checked by one native call (see ``_torch_internals``); a tensor whose
metadata the native checker cannot reproduce is checked in Python. torch is imported only
when a TensorMatch is built or compiled.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kiln.guards import _torch_internals as native
from kiln.guards._base import CodeContext, Guard, type_name
from kiln.guards._sources import Source

__all__ = ["TensorMatch"]


@dataclass(frozen=True, slots=True)
class TensorMatch(Guard):
    """``source`` is a tensor with exactly the traced metadata (free dims may vary)."""

    source: Source
    pytype: type
    dispatch_keys: int
    dtype: Any
    device: Any
    layout: Any
    requires_grad: bool
    sizes: tuple[int | None, ...]
    strides: tuple[int | None, ...]
    cost = 10
    establishes_type = True
    batch_key = "tensor"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sizes", tuple(self.sizes))
        object.__setattr__(self, "strides", tuple(self.strides))
        if len(self.sizes) != len(self.strides):
            raise ValueError("sizes and strides must have one entry per dimension")
        # rendered into generated code: only ints, None and bools get there
        for v in self.sizes + self.strides:
            if v is not None and type(v) is not int:
                raise TypeError(f"sizes and strides are ints or None, got {type(v).__name__}")
        if type(self.requires_grad) is not bool or type(self.dispatch_keys) is not int:
            raise TypeError("requires_grad must be a bool and dispatch_keys an int")

    @classmethod
    def from_tensor(
        cls,
        source: Source,
        tensor: Any,
        *,
        dynamic_sizes: Iterable[int] = (),
        dynamic_strides: Iterable[int] = (),
    ) -> TensorMatch:
        """The guard ``tensor`` satisfies now, with the sizes of dims ``dynamic_sizes`` and
        the strides of dims ``dynamic_strides`` left free."""
        free_sizes, free_strides = set(dynamic_sizes), set(dynamic_strides)
        sizes = tuple(None if d in free_sizes else s for d, s in enumerate(tensor.shape))
        strides = tuple(None if d in free_strides else s for d, s in enumerate(tensor.stride()))
        return cls(source, type(tensor), native.dispatch_keys(tensor), tensor.dtype,
                   tensor.device, tensor.layout, bool(tensor.requires_grad), sizes, strides)

    def admits_same_tensor(self, other: TensorMatch) -> bool:
        """Whether one tensor could pass both this guard and ``other`` (every fact fixed in
        both agrees): two sources whose guards do not are never one object."""
        def dims(a: tuple[int | None, ...], b: tuple[int | None, ...]) -> bool:
            return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b, strict=True))

        return (self.pytype is other.pytype and self.dispatch_keys == other.dispatch_keys
                and self.dtype == other.dtype and self.device == other.device
                and self.layout == other.layout and self.requires_grad == other.requires_grad
                and dims(self.sizes, other.sizes) and dims(self.strides, other.strides))

    def _spec(self) -> tuple[Any, ...]:
        return (self.pytype, self.dispatch_keys, self.dtype, self.device, self.layout,
                self.requires_grad, self.sizes, self.strides)

    def describe(self) -> str:
        dims = ", ".join("?" if s is None else str(s) for s in self.sizes)
        strides = ", ".join("?" if s is None else str(s) for s in self.strides)
        return (f"tensor {self.source}: {type_name(self.pytype)} {self.dtype} on {self.device}, "
                f"size ({dims}), stride ({strides}), requires_grad={self.requires_grad}")

    def emit(self, ctx: CodeContext, e: str) -> list[str]:
        c = ctx.const
        conds = [
            f"type({e}) is {c(self.pytype, 'type')}",
            f"{e}.dtype is {c(self.dtype, 'dtype')}",
            f"{e}.device == {c(self.device, 'device')}",
            f"{e}.layout is {c(self.layout, 'layout')}",
            f"{e}.requires_grad is {self.requires_grad}",
        ]
        if None in self.sizes:
            conds.append(f"{e}.dim() == {len(self.sizes)}")
            conds += [f"{e}.size({d}) == {s}" for d, s in enumerate(self.sizes) if s is not None]
        else:
            conds.append(f"{e}.shape == {self.sizes!r}")
        if None in self.strides:
            conds += [f"{e}.stride({d}) == {s}" for d, s in enumerate(self.strides)
                      if s is not None]
        else:
            conds.append(f"{e}.stride() == {self.strides!r}")
        conds.append(f"{c(native.dispatch_keys, 'dispatch_keys')}({e}) == {self.dispatch_keys}")
        return conds

    @classmethod
    def emit_batch(
        cls, ctx: CodeContext, guards: list[Guard], exprs: list[tuple[str, ...]]
    ) -> list[str] | None:
        """One native call for every tensor match it can reproduce; Python for the rest."""
        batched, rest = [], []
        for guard, (expr,) in zip(guards, exprs, strict=True):
            assert isinstance(guard, TensorMatch)
            ok = ctx.native and native.native_tensor_checker([guard._spec()]) is not None
            (batched if ok else rest).append((guard, expr))
        conds: list[str] = []
        if batched:
            checker = native.native_tensor_checker([g._spec() for g, _ in batched])
            if checker is None:
                rest = batched + rest
            else:
                args = ", ".join(e for _, e in batched)
                batch = f"{ctx.const(checker, 'tensors')}.check({args})"
                if len(batched) > 1:
                    # torch's batched check rejects the same tensor passed twice (tied
                    # weights reached through two sources); only when the batch fails, each
                    # tensor is checked alone, so the hot path stays one call.
                    singles = [native.native_tensor_checker([g._spec()]) for g, _ in batched]
                    each = " and ".join(f"{ctx.const(one, 'tensor')}.check({e})"
                                        for one, (_, e) in zip(singles, batched, strict=True))
                    batch = f"({batch} or ({each}))"
                conds.append(batch)
        for guard, expr in rest:
            conds += guard.emit(ctx, expr)
        return conds

    def explain(self, t: Any) -> str | None:
        src = f"tensor {self.source}"
        if type(t) is not self.pytype:
            return f"{src} type: expected {type_name(self.pytype)}, got {type_name(type(t))}"
        for what, expected, found in (
            ("dtype", self.dtype, t.dtype),
            ("device", self.device, t.device),
            ("layout", self.layout, t.layout),
            ("requires_grad", self.requires_grad, t.requires_grad),
        ):
            if found != expected:
                return f"{src} {what}: expected {expected}, got {found}"
        shape, strides = tuple(t.shape), tuple(t.stride())
        if len(shape) != len(self.sizes):
            return f"{src} ndim: expected {len(self.sizes)}, got {len(shape)}"
        for what, expected_all, found_all in (("size", self.sizes, shape),
                                              ("stride", self.strides, strides)):
            for d, (expected, found) in enumerate(zip(expected_all, found_all, strict=True)):
                if expected is not None and expected != found:
                    return f"{src} {what}({d}): expected {expected}, got {found}"
        keys = native.dispatch_keys(t)
        if keys != self.dispatch_keys:
            return (f"{src} dispatch keys: expected {native.dispatch_key_text(self.dispatch_keys)}"
                    f", got {native.dispatch_key_text(keys)}")
        return None
