"""Python modules, classes and other user objects read from the frame.

Attribute reads on these go back to the real object and wrap what they find with a source
one step longer (``AttrSource``), so every value the trace relies on is guarded. Modules of
trusted libraries (torch, math, operator, ...) are the exception: their attributes are
treated as fixed, which keeps guards on ``torch.relu`` and friends off the hot path.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._base import VariableTracker

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = [
    "NewObjectVariable",
    "PythonModuleVariable",
    "SuperVariable",
    "UserDefinedClassVariable",
    "UserDefinedObjectVariable",
    "is_trusted_module",
]

_TRUSTED_ROOTS = frozenset({"torch", "math", "operator", "builtins", "functools", "itertools",
                            "collections", "typing", "numbers", "enum", "dataclasses"})


def is_trusted_module(module: types.ModuleType) -> bool:
    """Whether ``module``'s attributes are treated as fixed (no guards on them)."""
    return module.__name__.split(".")[0] in _TRUSTED_ROOTS


def lookup_class_attribute(cls: type, name: str, start: int = 0) -> Any:
    """``name`` in the ``__dict__`` of ``cls.__mro__[start:]`` (first found), or MISSING."""
    for klass in cls.__mro__[start:]:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return MISSING


MISSING: Any = object()


def bind_class_attribute(tx: Translator, owner: VariableTracker, attr: Any,
                         source: Any = None) -> VariableTracker:
    """What ``owner.name`` gives when the class attribute ``attr`` answers it: a bound
    method, a property's value (its getter inlined), a static or class method, or the
    attribute itself (wrapped through ``source`` when there is one)."""
    from ._functions import UserMethodVariable

    if isinstance(attr, types.FunctionType):
        return UserMethodVariable(attr, owner)
    if isinstance(attr, property) and isinstance(attr.fget, types.FunctionType):
        return tx.inline_function(attr.fget, [owner], {})
    if isinstance(attr, staticmethod):
        return tx.builder.wrap(attr.__func__, None)
    if isinstance(attr, classmethod):
        return UserMethodVariable(attr.__func__, UserDefinedClassVariable(owner.python_type()))
    return tx.builder.wrap(attr, source)


def _missing(what: str, name: str) -> Unsupported:
    return Unsupported(f"{what} has no attribute {name!r}")


class PythonModuleVariable(VariableTracker):
    """A Python module (``torch``, ``F``, a user module)."""

    __slots__ = ("module",)

    def __init__(self, module: types.ModuleType, source: Source | None = None) -> None:
        super().__init__(source)
        self.module = module

    def python_type(self) -> type:
        return types.ModuleType

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.module

    def describe(self) -> str:
        return f"module {self.module.__name__}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        try:
            value = getattr(self.module, name)
        except AttributeError:
            raise _missing(self.describe(), name) from None
        from kiln.guards import AttrSource

        trusted = is_trusted_module(self.module) or self.source is None
        source = None if trusted else AttrSource(self.source, name)
        return tx.builder.wrap(value, source)


class UserDefinedClassVariable(VariableTracker):
    """A class (``MyConfig``, ``torch.Tensor``)."""

    __slots__ = ("cls",)

    def __init__(self, cls: type, source: Source | None = None) -> None:
        super().__init__(source)
        self.cls = cls

    def python_type(self) -> type:
        return type(self.cls)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.cls

    def describe(self) -> str:
        return f"class {self.cls.__qualname__}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        try:
            value = getattr(self.cls, name)
        except AttributeError:
            raise _missing(self.describe(), name) from None
        from kiln.guards import AttrSource

        source = AttrSource(self.source, name) if self.source is not None else None
        return tx.builder.wrap(value, source)

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return tx.construct(self.cls, args, kwargs)


class UserDefinedObjectVariable(VariableTracker):
    """An instance of a user class; attribute reads are guarded through its source."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.obj = obj

    def python_type(self) -> type:
        return type(self.obj)

    def describe(self) -> str:
        what = f"{type(self.obj).__qualname__} object"
        return f"{what} {self.source}" if self.source is not None else f"a {what}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        return tx.builder.read_attribute(tx, self, self.obj, name)

    def store_attr(self, tx: Translator, name: str, value: VariableTracker) -> None:
        if is_data_descriptor(lookup_class_attribute(type(self.obj), name)):
            raise Unsupported(f"assigning {name!r} of {self.describe()} runs a descriptor (property)")
        tx.output.store_attribute(self, name, value)

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        result = _call_method(tx, self, type(self.obj), args, kwargs)
        return result if result is not None else super().call(tx, args, kwargs)


def is_data_descriptor(attr: Any) -> bool:
    """Whether a class attribute takes precedence over the instance dict (property, slot)."""
    tp = type(attr)
    return hasattr(tp, "__set__") or hasattr(tp, "__delete__")


def _call_method(tx: Translator, owner: VariableTracker, cls: type, args: list[VariableTracker],
                 kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    call = lookup_class_attribute(cls, "__call__")
    if isinstance(call, types.FunctionType):
        from ._functions import UserMethodVariable

        return UserMethodVariable(call, owner).call(tx, args, kwargs)
    return None


class NewObjectVariable(VariableTracker):
    """An instance of a plain Python class created while tracing (``Point(x, y)``).

    Its attributes live here as trackers; if the object outlives the trace (returned, or
    stored into a frame object), the replacement code builds it: ``object.__new__(cls)``
    plus its final ``__dict__``.
    """

    __slots__ = ("attrs", "cls")

    def __init__(self, cls: type) -> None:
        super().__init__(None)
        self.cls = cls
        self.attrs: dict[str, VariableTracker] = {}

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"a new {self.cls.__qualname__} object"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        if name in self.attrs:
            return self.attrs[name]
        attr = lookup_class_attribute(self.cls, name)
        if attr is MISSING:
            raise _missing(self.describe(), name)
        return bind_class_attribute(tx, self, attr)

    def store_attr(self, tx: Translator, name: str, value: VariableTracker, *, force: bool = False) -> None:
        if not force and self.cls.__setattr__ is not object.__setattr__:
            raise Unsupported(f"assigning {name!r} of {self.describe()}, whose class defines __setattr__")
        if is_data_descriptor(lookup_class_attribute(self.cls, name)):
            raise Unsupported(f"assigning {name!r} of {self.describe()} runs a descriptor")
        self.attrs[name] = value

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        result = _call_method(tx, self, self.cls, args, kwargs)
        return result if result is not None else super().call(tx, args, kwargs)


def new_object(cls: type, attrs: dict[str, Any]) -> Any:
    """Build an object the way a traced constructor left it (used by replacement code)."""
    obj = object.__new__(cls)
    obj.__dict__.update(attrs)
    return obj


def can_construct(cls: type) -> bool:
    """Whether ``cls(...)`` can be traced: a plain Python class built by ``object.__new__``."""
    import torch

    return (type(cls) is type and cls.__new__ is object.__new__ and "__slots__" not in cls.__dict__
            and not issubclass(cls, (BaseException, torch.nn.Module, torch.Tensor)))


class SuperVariable(VariableTracker):
    """``super()`` / ``super(cls, obj)``: attribute lookup starting after ``cls`` in the MRO."""

    __slots__ = ("cls", "obj")

    def __init__(self, cls: type, obj: VariableTracker) -> None:
        super().__init__(None)
        self.cls = cls
        self.obj = obj

    def describe(self) -> str:
        return f"super({self.cls.__qualname__}, {self.obj.describe()})"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        mro = self.obj.python_type().__mro__
        start = mro.index(self.cls) + 1 if self.cls in mro else len(mro)
        attr = lookup_class_attribute(self.obj.python_type(), name, start)
        if attr is MISSING:
            raise _missing(self.describe(), name)
        if isinstance(attr, types.WrapperDescriptorType):  # object.__init__ and friends
            raise Unsupported(f"calling {name} of a builtin base class through super()")
        return bind_class_attribute(tx, self.obj, attr)
