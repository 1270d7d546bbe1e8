"""ConstantVariable: an immutable Python value known at trace time.

Numbers, strings, bytes, None, Ellipsis, code objects, torch dtypes/devices/layouts/memory
formats, slices and tuples of these. Operations on constants run for real at trace time (they have no
effects), so ``2 * hidden + 1`` or ``"relu".upper()`` cost nothing at run time; the guards
that made the value a constant were installed when it was read from the frame.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import TYPE_CHECKING, Any

from .._unsupported import MissingAttribute, Unsupported
from ._base import VariableTracker

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["ConstantVariable", "FrozenObjectVariable", "frozen_types", "is_constant_value"]

_SCALARS = (int, float, complex, bool, str, bytes, type(None), type(Ellipsis), type(NotImplemented),
            types.CodeType)


def _torch_constant_types() -> tuple[type, ...]:
    import torch

    return (torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size)


def is_constant_value(value: Any) -> bool:
    """Whether ``value`` is immutable all the way down (safe to evaluate on at trace time)."""
    t = type(value)
    if t in _SCALARS:
        return True
    if t is tuple or t is frozenset:
        return all(is_constant_value(v) for v in value)
    if t is slice:
        return all(is_constant_value(v) for v in (value.start, value.stop, value.step))
    return isinstance(value, _torch_constant_types()) or _is_numpy_constant(value)


def _is_numpy_constant(value: Any) -> bool:
    """numpy scalars (``np.float32(1.5)``) and dtypes: immutable."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, (np.number, np.bool_, np.dtype))


@functools.cache
def _symbolic_types() -> tuple[type, ...]:
    import torch

    return (torch.SymInt, torch.SymFloat, torch.SymBool)


def _is_symbolic(value: Any) -> bool:
    if isinstance(value, (tuple, list)):  # torch.Size too
        return any(type(v) in _symbolic_types() for v in value)
    return type(value) in _symbolic_types()


class ConstantVariable(VariableTracker):
    """A Python constant; see the module docstring."""

    __slots__ = ("value",)

    def __init__(self, value: Any, source: Source | None = None) -> None:
        super().__init__(source)
        if _is_symbolic(value):
            # a size or number that depends on tensor data (nonzero, a boolean mask,
            # .item()): a constant would put the symbol in the graph or the replacement code
            raise Unsupported(f"{value} depends on tensor data (a data-dependent size or number) "
                              "and cannot be a trace-time constant")
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.value

    def describe(self) -> str:
        text = repr(self.value)
        if len(text) > 40:
            text = text[:37] + "..."
        return f"constant {text}" + (f" ({self.source})" if self.source is not None else "")

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            from ._errors import traced_error

            raise traced_error(e) from e  # eager's message: "'str' object has no attribute ..."
        if is_constant_value(attr):
            return ConstantVariable(attr)
        if callable(attr):
            return ConstantMethodVariable(self.value, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()} is not a constant")

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        if isinstance(self.value, (tuple, str, bytes, frozenset)):
            return [ConstantVariable(v) for v in self.value]
        try:
            iter(self.value)
        except TypeError as e:  # not iterable: eager's TypeError ("'int' object is not iterable")
            from ._errors import traced_error

            raise traced_error(e) from e
        return super().iterate(tx)

    def truth(self, tx: Translator) -> bool:
        return bool(self.value)


class ConstantMethodVariable(VariableTracker):
    """A method of a constant (``"a,b".split``): called at trace time on constant arguments."""

    __slots__ = ("name", "obj")

    def __init__(self, obj: Any, name: str) -> None:
        super().__init__(None)
        self.obj = obj
        self.name = name

    def describe(self) -> str:
        return f"method {type(self.obj).__name__}.{self.name}"

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        from ._builtins import builtin_rules

        # a method with a rule of its own (``"_".join(parts)`` over a list of constants)
        r = builtin_rules.get(getattr(type(self.obj), self.name, None))
        if r is not None:
            return r(tx, [ConstantVariable(self.obj), *args], kwargs)
        if not all(a.is_constant() for a in [*args, *kwargs.values()]):
            raise Unsupported(f"{self.describe()} called with values unknown at trace time")
        try:
            result = getattr(self.obj, self.name)(*[a.as_constant() for a in args],
                                                  **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as e:  # as eager raises it (``(1, 2).index(3)``, ``"a".join(5)``)
            from ._errors import traced_error

            raise traced_error(e) from e
        from ._wrap import wrap_trace_value

        return wrap_trace_value(result)


@functools.cache
def frozen_types() -> tuple[type, ...]:
    """Types whose instances traced code only reads, made from guarded values (a dataclass's
    fields, a guarded function's signature): tracked as FrozenObjectVariable."""
    import dataclasses
    import inspect

    # (the sentinel a dataclass's __init__ defaults a default_factory field to)
    return (dataclasses.Field, inspect.Signature, inspect.Parameter, types.MappingProxyType,
            type(dataclasses.MISSING), type(inspect.Parameter.empty), type(dataclasses._HAS_DEFAULT_FACTORY))


class FrozenObjectVariable(ConstantVariable):
    """An immutable object computed at trace time from guarded values (the
    ``inspect.Signature`` of a guarded function, a dataclass's fields): a constant whose
    attribute reads, constant-argument method calls and iteration are evaluated on the real
    object, each result again a constant or a frozen object."""

    __slots__ = ()

    def __init__(self, value: Any) -> None:
        super().__init__(value)

    @staticmethod
    def wrap(value: Any) -> VariableTracker:
        return ConstantVariable(value) if is_constant_value(value) else FrozenObjectVariable(value)

    def describe(self) -> str:
        return f"a {type(self.value).__name__} computed at trace time"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        try:
            return self.wrap(getattr(self.value, name))
        except AttributeError as e:
            raise MissingAttribute(f"{self.describe()} has no attribute {name!r}") from e

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if not all(a.is_constant() for a in [*args, *kwargs.values()]):
            raise Unsupported(f"method {name!r} of {self.describe()} called with values unknown at trace time")
        method = getattr(self.value, name)
        try:
            result = method(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as e:
            from ._errors import traced_error

            raise traced_error(e) from e
        return self.wrap(result)

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        return [self.wrap(v) for v in self.value]
