"""Guard kinds about plain Python objects: type, identity, constants, containers, functions.

None of these import torch. Identity-based guards (``IdMatch``, ``FunctionMatch``) keep
strong references to the objects they compare against, so an id can never be reused by a
different object while the guard lives. Equality on constants is typed: ``1``, ``1.0`` and
``True`` are different constants, because traced code may behave differently on each.
"""

from __future__ import annotations

import builtins
import enum
import math
from dataclasses import dataclass, field
from typing import Any

from kiln.guards._base import CodeContext, Guard, safe_repr, type_name
from kiln.guards._sources import Source

__all__ = [
    "DictKeysMatch",
    "EqualsMatch",
    "FunctionMatch",
    "HasAttr",
    "IdMatch",
    "IsNone",
    "KeyAbsent",
    "LengthMatch",
    "NoAliasing",
    "NoHasAttr",
    "NotNone",
    "ObjectAliasing",
    "SetItemsMatch",
    "TypeMatch",
]


@dataclass(frozen=True, slots=True)
class TypeMatch(Guard):
    """``type(source) is expected`` (exact type, not isinstance)."""

    source: Source
    expected: type
    cost = 1
    establishes_type = True

    def describe(self) -> str:
        return f"type({self.source}) is {type_name(self.expected)}"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        return [f"type({expr}) is {type_ref(ctx, self.expected)}"]

    def explain(self, value: Any) -> str | None:
        if type(value) is self.expected:
            return None
        return (
            f"{self.source} type: expected {type_name(self.expected)}, "
            f"got {type_name(type(value))}"
        )


@dataclass(frozen=True, slots=True)
class IdMatch(Guard):
    """``source is obj``: the very object seen while tracing (kept alive by the guard)."""

    source: Source
    obj: Any = field(compare=False, hash=False)
    obj_id: int = field(init=False)
    cost = 1
    establishes_type = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "obj_id", id(self.obj))

    def describe(self) -> str:
        return f"{self.source} is {safe_repr(self.obj, 40)} (id {self.obj_id:#x})"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        return [f"{expr} is {ctx.const(self.obj, 'obj')}"]

    def explain(self, value: Any) -> str | None:
        if value is self.obj:
            return None
        return (
            f"{self.source} identity: expected {safe_repr(self.obj, 40)} (id {self.obj_id:#x}), "
            f"got {safe_repr(value, 40)} (id {id(value):#x})"
        )


def type_ref(ctx: CodeContext, tp: type) -> str:
    """How generated code names ``tp``: a builtin by its name, anything else as a constant."""
    name = getattr(tp, "__name__", None)
    if getattr(tp, "__module__", None) == "builtins" and getattr(builtins, str(name), None) is tp:
        return str(name)
    return ctx.const(tp, "type")


def _torch_kind(value: Any) -> str | None:
    tp = type(value)
    if tp.__module__ == "torch" and tp.__name__ in ("dtype", "device"):
        return tp.__name__
    return None


def _check_constant(value: Any) -> None:
    if value is None or type(value) in (bool, int, float, str, bytes):
        return
    if type(value) is tuple:
        for item in value:
            _check_constant(item)
        return
    if isinstance(value, enum.Enum) or _torch_kind(value) is not None:
        return
    raise TypeError(
        f"EqualsMatch takes None/bool/int/float/str/bytes, tuples of them, enums, "
        f"torch.dtype or torch.device; got {type_name(type(value))}"
    )


def _typed_equal(value: Any, const: Any) -> bool:
    """The semantics ``EqualsMatch`` emits as code: same exact type and equal value."""
    if const is None or type(const) is bool or isinstance(const, enum.Enum):
        return value is const
    kind = _torch_kind(const)
    if kind == "dtype":
        return value is const
    if type(value) is not type(const):
        return False
    if type(const) is float and math.isnan(const):
        return value != value
    if type(const) is tuple:
        return len(value) == len(const) and all(
            _typed_equal(v, c) for v, c in zip(value, const, strict=True)
        )
    return bool(value == const)


def _emit_typed_equal(ctx: CodeContext, expr: str, const: Any) -> list[str]:
    if const is None or type(const) is bool:
        return [f"{expr} is {const!r}"]
    if isinstance(const, enum.Enum) or _torch_kind(const) == "dtype":
        return [f"{expr} is {ctx.const(const, 'k')}"]
    tp = type(const)
    conds = [f"type({expr}) is {type_ref(ctx, tp)}"]
    if tp is tuple:
        conds.append(f"len({expr}) == {len(const)}")
        for i, item in enumerate(const):
            conds += _emit_typed_equal(ctx, f"{expr}[{i}]", item)
    elif tp is float and math.isnan(const):
        conds.append(f"{expr} != {expr}")
    elif tp is float and math.isinf(const):
        conds.append(f"{expr} == {ctx.const(const, 'k')}")
    elif tp in (int, float, str, bytes):
        conds.append(f"{expr} == {const!r}")
    else:
        conds.append(f"{expr} == {ctx.const(const, 'k')}")
    return conds


@dataclass(frozen=True, slots=True)
class EqualsMatch(Guard):
    """``source`` equals a constant of the same exact type (tuples compared item by item)."""

    source: Source
    value: Any
    # repr of the value, so that constants equal across types (1, 1.0, True) stay distinct
    value_text: str = field(init=False)
    cost = 2
    establishes_type = True

    def __post_init__(self) -> None:
        _check_constant(self.value)
        object.__setattr__(self, "value_text", f"{type_name(type(self.value))}:{self.value!r}")

    def describe(self) -> str:
        return f"{self.source} == {self.value!r}"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        return _emit_typed_equal(ctx, expr, self.value)

    def explain(self, value: Any) -> str | None:
        if _typed_equal(value, self.value):
            return None
        return f"{self.source} == {self.value!r}: expected {self.value!r}, got {safe_repr(value)}"


@dataclass(frozen=True, slots=True)
class IsNone(Guard):
    """``source is None``."""

    source: Source
    cost = 1
    establishes_type = True

    def describe(self) -> str:
        return f"{self.source} is None"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        return [f"{expr} is None"]

    def explain(self, value: Any) -> str | None:
        if value is None:
            return None
        return f"{self.source} is None: expected None, got {safe_repr(value)}"


@dataclass(frozen=True, slots=True)
class NotNone(Guard):
    """``source is not None``."""

    source: Source
    cost = 1

    def describe(self) -> str:
        return f"{self.source} is not None"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        return [f"{expr} is not None"]

    def explain(self, value: Any) -> str | None:
        if value is not None:
            return None
        return f"{self.source} is not None: expected an object, got None"


@dataclass(frozen=True, slots=True)
class LengthMatch(Guard):
    """``len(source) == length`` (pair with a TypeMatch so that ``len`` is safe to call)."""

    source: Source
    length: int
    cost = 2

    def __post_init__(self) -> None:
        if type(self.length) is not int:
            raise TypeError(f"length must be an int, got {type(self.length).__name__}")

    def describe(self) -> str:
        return f"len({self.source}) == {self.length}"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        return [f"len({expr}) == {self.length}"]

    def explain(self, value: Any) -> str | None:
        found = len(value)
        if found == self.length:
            return None
        return f"{self.source} length: expected {self.length}, got {found}"


@dataclass(frozen=True, slots=True)
class DictKeysMatch(Guard):
    """``source.keys()`` are ``keys`` in the same order (what iterating a dict depends on)."""

    source: Source
    keys: tuple[Any, ...]
    cost = 5

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", tuple(self.keys))

    def describe(self) -> str:
        return f"tuple({self.source}.keys()) == {self.keys!r}"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        # a list of the traced key objects: equal keys are then usually identical, which
        # makes the comparison an identity check per key; iterating an exact dict is
        # iterating its keys, without the method call
        keys = ctx.const(list(self.keys), "keys")
        return [f"[*({expr} if type({expr}) is dict else {expr}.keys())] == {keys}"]

    def explain(self, value: Any) -> str | None:
        found = tuple(value.keys())
        if found == self.keys:
            return None
        return f"{self.source} keys: expected {safe_repr(self.keys)}, got {safe_repr(found)}"


@dataclass(frozen=True, slots=True)
class SetItemsMatch(Guard):
    """``source`` (a set or frozenset) iterates over ``items`` in this order: its contents and
    the order iterating it gives, what a trace over a set passed in depends on."""

    source: Source
    items: tuple[Any, ...]
    cost = 5

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))

    def describe(self) -> str:
        return f"tuple({self.source}) == {self.items!r}"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        # types too: ``{1} == {True}``, but a trace may depend on the item's type
        return [f"[*{expr}] == {ctx.const(list(self.items), 'items')}",
                f"[*map(type, {expr})] == {ctx.const([type(v) for v in self.items], 'item_types')}"]

    def explain(self, value: Any) -> str | None:
        found = tuple(value)
        if found == self.items and [type(v) for v in found] == [type(v) for v in self.items]:
            return None
        return f"{self.source} items: expected {safe_repr(self.items)}, got {safe_repr(found)}"


@dataclass(frozen=True, slots=True)
class HasAttr(Guard):
    """``hasattr(source, name)``."""

    source: Source
    name: str
    cost = 3

    def __post_init__(self) -> None:
        if type(self.name) is not str:
            raise TypeError(f"attribute name must be a str, got {type(self.name).__name__}")

    def describe(self) -> str:
        return f"hasattr({self.source}, {self.name!r})"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        return [f"hasattr({expr}, {self.name!r})"]

    def explain(self, value: Any) -> str | None:
        if hasattr(value, self.name):
            return None
        return f"{self.source} attribute {self.name!r}: expected present, got missing"


@dataclass(frozen=True, slots=True)
class NoHasAttr(Guard):
    """``not hasattr(source, name)``."""

    source: Source
    name: str
    cost = 3

    def __post_init__(self) -> None:
        if type(self.name) is not str:
            raise TypeError(f"attribute name must be a str, got {type(self.name).__name__}")

    def describe(self) -> str:
        return f"not hasattr({self.source}, {self.name!r})"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        return [f"not hasattr({expr}, {self.name!r})"]

    def explain(self, value: Any) -> str | None:
        if not hasattr(value, self.name):
            return None
        return f"{self.source} attribute {self.name!r}: expected missing, got present"


@dataclass(frozen=True, slots=True)
class KeyAbsent(Guard):
    """``key not in source`` (a mapping: an instance ``__dict__`` without an attribute the
    trace found missing)."""

    source: Source
    key: Any
    cost = 1

    def __post_init__(self) -> None:
        if type(self.key) not in (str, int, bool, bytes) and self.key is not None:
            raise TypeError(f"key must be a literal, got {type(self.key).__name__}")

    def describe(self) -> str:
        return f"{self.key!r} not in {self.source}"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        return [f"{self.key!r} not in {expr}"]

    def explain(self, value: Any) -> str | None:
        if self.key not in value:
            return None
        return f"{self.source}: expected no key {self.key!r}, got one"


@dataclass(frozen=True, slots=True)
class ObjectAliasing(Guard):
    """``first is second``: the trace assumed two sources are one object."""

    first: Source
    second: Source
    cost = 1

    @property
    def sources(self) -> tuple[Source, ...]:
        return (self.first, self.second)

    def describe(self) -> str:
        return f"{self.first} is {self.second}"

    def emit(self, ctx: CodeContext, a: str, b: str) -> list[str]:
        return [f"{a} is {b}"]

    def explain(self, a: Any, b: Any) -> str | None:
        if a is b:
            return None
        return f"{self.first} is {self.second}: expected the same object, got distinct objects"


@dataclass(frozen=True, slots=True)
class NoAliasing(Guard):
    """The values of ``sources`` are pairwise distinct objects (e.g. distinct tensor inputs)."""

    items: tuple[Source, ...]
    cost = 5

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))

    @property
    def sources(self) -> tuple[Source, ...]:
        return self.items

    def describe(self) -> str:
        return "no aliasing among " + ", ".join(map(str, self.items))

    def emit(self, ctx: CodeContext, *exprs: str) -> list[str]:
        if len(exprs) <= 4:
            return [
                f"{a} is not {b}" for i, a in enumerate(exprs) for b in exprs[i + 1 :]
            ]
        ids = ", ".join(f"id({e})" for e in exprs)
        return [f"len({{{ids}}}) == {len(exprs)}"]

    def explain(self, *values: Any) -> str | None:
        for i, a in enumerate(values):
            for j in range(i + 1, len(values)):
                if a is values[j]:
                    return (
                        f"{self.items[i]} and {self.items[j]}: expected distinct objects, "
                        f"got the same object"
                    )
        return None


_NOTHING = object()


@dataclass(frozen=True, slots=True)
class FunctionMatch(Guard):
    """The same function as traced: the same code object, the very same default values
    (positional and keyword-only) and the very same closure cell contents. A cell not
    assigned yet (or deleted) is a state of its own: ``closure`` holds ``EMPTY_CELL`` for it,
    and the guard holds only while that cell is still empty."""

    source: Source
    code: Any
    defaults: tuple[Any, ...] | None = field(compare=False, hash=False)
    kwdefaults: dict[str, Any] | None = field(compare=False, hash=False)
    closure: tuple[Any, ...] | None = field(compare=False, hash=False)
    identity_key: tuple[Any, ...] = field(init=False)
    cost = 4

    def __post_init__(self) -> None:
        def ids(values: Any) -> Any:
            return None if values is None else tuple(id(v) for v in values)

        kw = None if self.kwdefaults is None else tuple(self.kwdefaults.items())
        key = (ids(self.defaults), None if kw is None else tuple((k, id(v)) for k, v in kw),
               ids(self.closure))
        object.__setattr__(self, "identity_key", key)

    @classmethod
    def from_function(cls, source: Source, fn: Any) -> FunctionMatch:
        """The guard that ``fn`` (a Python function) satisfies now."""
        closure = cell_values(fn.__closure__)
        kw = fn.__kwdefaults__
        return cls(source, fn.__code__, fn.__defaults__, None if kw is None else dict(kw),
                   closure)

    def describe(self) -> str:
        name = getattr(self.code, "co_name", "?")
        return f"{self.source} is function {name} with the traced defaults and closure"

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        conds = [f"{expr}.__code__ is {ctx.const(self.code, 'code')}"]
        conds.append(self._emit_seq(ctx, f"{expr}.__defaults__", self.defaults, ""))
        if self.kwdefaults is None:
            conds.append(f"{expr}.__kwdefaults__ is None")
        else:
            t = ctx.temp()
            parts = [f"({t} := {expr}.__kwdefaults__) is not None",
                     f"len({t}) == {len(self.kwdefaults)}"]
            parts += [f"{t}[{k!r}] is {ctx.const(v, 'kw')}" for k, v in self.kwdefaults.items()]
            conds.append(" and ".join(parts))
        conds.append(self._emit_seq(ctx, f"{expr}.__closure__", self.closure, ".cell_contents"))
        return conds

    @staticmethod
    def _emit_seq(ctx: CodeContext, expr: str, items: Any, suffix: str) -> str:
        if items is None:
            return f"{expr} is None"
        t = ctx.temp()
        parts = [f"({t} := {expr}) is not None", f"len({t}) == {len(items)}"]
        for i, v in enumerate(items):
            if v is EMPTY_CELL:  # reading an empty cell's contents raises: test the cell
                parts.append(f"{ctx.const(cell_is_empty, 'empty')}({t}[{i}])")
            else:
                parts.append(f"{t}[{i}]{suffix} is {ctx.const(v, 'd')}")
        return " and ".join(parts)

    def explain(self, fn: Any) -> str | None:
        src = self.source
        code = getattr(fn, "__code__", _NOTHING)
        if code is not self.code:
            return (f"{src} code: expected {safe_repr(self.code, 60)}, "
                    f"got {safe_repr(None if code is _NOTHING else code, 60)}")
        if not _same_items(fn.__defaults__, self.defaults):
            return (f"{src} defaults: expected {safe_repr(self.defaults)}, "
                    f"got {safe_repr(fn.__defaults__)}")
        kw = fn.__kwdefaults__
        expected_kw = self.kwdefaults
        if (kw is None) != (expected_kw is None) or (
            kw is not None and (len(kw) != len(expected_kw)
                                or any(kw[k] is not v for k, v in expected_kw.items()))
        ):
            return f"{src} keyword defaults: expected {safe_repr(expected_kw)}, got {safe_repr(kw)}"
        found = cell_values(fn.__closure__)
        if not _same_items(found, self.closure):
            return f"{src} closure: expected {safe_repr(self.closure)}, got {safe_repr(found)}"
        return None


class _EmptyCell:
    """The contents recorded for a closure cell that holds nothing."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<empty cell>"


EMPTY_CELL = _EmptyCell()


def cell_is_empty(cell: Any) -> bool:
    """Whether the closure cell ``cell`` holds nothing (not assigned yet, or deleted)."""
    try:
        _ = cell.cell_contents
    except ValueError:
        return True
    return False


def cell_values(cells: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    """The contents of each cell of a ``__closure__``, ``EMPTY_CELL`` for an empty one."""
    if cells is None:
        return None
    return tuple(EMPTY_CELL if cell_is_empty(c) else c.cell_contents for c in cells)


def _same_items(found: Any, expected: tuple[Any, ...] | None) -> bool:
    if found is None or expected is None:
        return found is None and expected is None
    return len(found) == len(expected) and all(
        a is b for a, b in zip(found, expected, strict=True)
    )
