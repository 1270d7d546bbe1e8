"""User functions and methods: called by inlining their bytecode into the current trace.

``UserFunctionVariable`` is a real Python function read from the frame (guarded by code,
defaults and closure through its source); ``NestedFunctionVariable`` is a function created
while tracing (``def`` or ``lambda`` inside the traced code), whose defaults and closure
cells are trackers; when it outlives the trace (stored, returned, live at a graph break) the
replacement rebuilds it with ``make_function``, as MAKE_FUNCTION would. Calling either runs the symbolic interpreter on the function's code with
the arguments bound, so its tensor work lands in the same graph. The exception: torch's own
nn.Module functions called on a module tracker (``Module.__call__``, ``__getattr__``, the
containers' methods) are answered by the tracker (``NNModuleVariable.call_torch_function``).
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ._base import VariableTracker
from ._modules import NNModuleVariable

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["NestedFunctionVariable", "UserFunctionVariable", "UserMethodVariable", "make_function"]


class UserFunctionVariable(VariableTracker):
    """A Python function from the frame or a module; see the module docstring."""

    __slots__ = ("fn",)

    def __init__(self, fn: types.FunctionType, source: Source | None = None) -> None:
        super().__init__(source)
        self.fn = fn

    def python_type(self) -> type:
        return types.FunctionType

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.fn

    def describe(self) -> str:
        return f"function {self.fn.__qualname__}"

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if args and isinstance(args[0], NNModuleVariable):  # ``nn.Module.__call__(m, x)``
            modelled = args[0].call_torch_function(tx, self.fn, args[1:], kwargs)
            if modelled is not None:
                return modelled
        return tx.inline_function(self.fn, args, kwargs, fn_source=self.source)

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        from ._constant import ConstantVariable

        if name in ("__name__", "__qualname__", "__module__", "__doc__", "__code__"):
            return ConstantVariable(getattr(self.fn, name))  # the code is part of the guard
        if name in self.fn.__dict__:  # ``__wrapped__`` (functools.wraps) and other function attributes
            from kiln.guards import AttrSource

            return tx.builder.wrap(self.fn.__dict__[name],
                                   AttrSource(self.source, name) if self.source is not None else None)
        return super().get_attr(tx, name)


class UserMethodVariable(VariableTracker):
    """``obj.method`` for a Python method: the function and the tracker of ``obj``
    (``class_source``: where the function sits on ``obj``'s guarded class, when known)."""

    __slots__ = ("class_source", "fn", "obj")

    def __init__(self, fn: types.FunctionType, obj: VariableTracker,
                 source: Source | None = None, class_source: Source | None = None) -> None:
        super().__init__(source)
        self.fn = fn
        self.obj = obj
        self.class_source = class_source

    def python_type(self) -> type:
        return types.MethodType

    def describe(self) -> str:
        return f"method {self.fn.__qualname__}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        if name == "__self__":
            return self.obj
        if name == "__func__":
            return UserFunctionVariable(self.fn)
        return UserFunctionVariable(self.fn).get_attr(tx, name)  # a method reads through

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if isinstance(self.obj, NNModuleVariable):  # torch's own nn.Module methods are modelled
            modelled = self.obj.call_torch_function(tx, self.fn, args, kwargs)
            if modelled is not None:
                return modelled
        return tx.inline_function(self.fn, [self.obj, *args], kwargs, class_source=self.class_source)


class NestedFunctionVariable(VariableTracker):
    """A function made while tracing: its code, name, defaults, annotations (the tracker of
    MAKE_FUNCTION's flat ``(name, value, ...)`` tuple, or None) and closure as trackers."""

    __slots__ = ("annotations", "closure", "code", "defaults", "fn_globals", "kwdefaults", "qualname")

    def __init__(self, code: types.CodeType, qualname: str, fn_globals: dict[str, Any],
                 defaults: tuple[VariableTracker, ...] = (),
                 kwdefaults: dict[str, VariableTracker] | None = None,
                 closure: tuple[Any, ...] = (), annotations: VariableTracker | None = None) -> None:
        super().__init__(None)
        self.code = code
        self.qualname = qualname
        self.fn_globals = fn_globals
        self.defaults = defaults
        self.kwdefaults = kwdefaults or {}
        self.closure = closure  # one cell tracker per free variable
        self.annotations = annotations

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"function {self.qualname} (defined while tracing)"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        from ._constant import ConstantVariable
        from ._containers import TupleVariable

        if name == "__name__":
            return ConstantVariable(self.code.co_name)
        if name == "__code__":
            return ConstantVariable(self.code)
        if name == "__qualname__":
            return ConstantVariable(self.qualname)
        if name == "__module__":
            return ConstantVariable(self.fn_globals.get("__name__"))
        if name == "__defaults__":
            return TupleVariable(list(self.defaults)) if self.defaults else ConstantVariable(None)
        return super().get_attr(tx, name)

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return tx.inline_nested(self, args, kwargs)


def make_function(code: types.CodeType, fn_globals: dict[str, Any], qualname: str,
                  defaults: tuple[Any, ...] | None, kwdefaults: dict[str, Any] | None,
                  annotations: tuple[Any, ...] | None, closure: tuple[Any, ...] | None) -> types.FunctionType:
    """The function MAKE_FUNCTION makes of these parts (``annotations``: its flat
    ``(name, value, ...)`` tuple); the replacement calls it for a function made while tracing."""
    fn = types.FunctionType(code, fn_globals, code.co_name, defaults, closure)
    fn.__qualname__ = qualname
    if kwdefaults is not None:
        fn.__kwdefaults__ = kwdefaults
    if annotations is not None:
        fn.__annotations__ = dict(zip(annotations[::2], annotations[1::2], strict=True))
    return fn
