"""Set methods beyond membership and mutation: ``union``, ``intersection``, ``difference``,
``symmetric_difference`` (and their ``*_update`` forms), ``isdisjoint``, ``issubset``,
``issuperset``, on set trackers (``_containers.SetVariable``), and sets passed in.

Each method takes any iterables, as CPython's do; an argument that is not a set is made a
set first (its items in order). The results come from ``SetVariable.combine``, so a set of
constants keeps the layout eager's set would have (its iteration order is eager's).
A set or frozenset read from the frame is guarded on its items in their iteration order
(``SetItemsMatch``): another content, or the same content in another order, recompiles.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._base import VariableTracker
from ._constant import ConstantVariable
from ._containers import SetVariable

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["SET_METHODS", "as_set", "set_method", "wrap_frame_set"]

_OPS: dict[str, Any] = {"union": operator.or_, "intersection": operator.and_,
                        "difference": operator.sub, "symmetric_difference": operator.xor}
_UPDATES = {f"{name}_update": op for name, op in _OPS.items() if name != "union"}
_TESTS = ("isdisjoint", "issubset", "issuperset")
SET_METHODS = frozenset([*_OPS, *_UPDATES, *_TESTS])


def as_set(tx: Translator, v: VariableTracker) -> SetVariable:
    """``v`` as a set tracker: itself, a constant set with its layout, or ``set(v)``."""
    if isinstance(v, SetVariable):
        return v
    if v.is_constant() and isinstance(v.as_constant(), (set, frozenset)):
        real = v.as_constant()
        return SetVariable([ConstantVariable(i) for i in real], frozen=type(real) is frozenset, real=real)
    made = SetVariable([])
    made.update_from(tx, v)
    return made


def set_method(tx: Translator, s: SetVariable, name: str, args: list[VariableTracker]) -> VariableTracker:
    """``s.name(*args)`` for a name of ``SET_METHODS``."""
    if name in _OPS:
        result = s
        for other in args:
            result = result.combine(_OPS[name], as_set(tx, other))
        if result is s:  # ``s.union()``: a copy
            return SetVariable(list(s.items), frozen=s.frozen, real=None if s.real is None else s.real.copy())
        return result
    if name in _UPDATES:
        for other in args:
            changed = s.combine(_UPDATES[name], as_set(tx, other), inplace=True)
            s.items, s.real = changed.items, changed.real
        return ConstantVariable(None)
    other = as_set(tx, args[0])
    keys: Callable[[SetVariable], set[Any]] = lambda x: {x._key(i) for i in x.items}  # noqa: E731
    mine, theirs = keys(s), keys(other)
    test = {"isdisjoint": mine.isdisjoint, "issubset": mine.issubset, "issuperset": mine.issuperset}[name]
    return ConstantVariable(test(theirs))


def wrap_frame_set(builder: Any, value: set[Any] | frozenset[Any], source: Source) -> SetVariable:
    """The tracker of a set or frozenset read from the frame: its type and items, in their
    iteration order, guarded; its items wrapped as constants (so, hashable constants only)."""
    from kiln.guards import SetItemsMatch, TypeMatch

    from .._unsupported import Unsupported
    # (types whose equal values are one value: the guard compares items with ``==``)
    if not all(v is None or type(v) in (int, str, bytes) for v in value):
        raise Unsupported(f"set {source} holds values kiln cannot guard on")
    builder._guard(TypeMatch(source, type(value)))
    builder._guard(SetItemsMatch(source, tuple(value)))
    tracker = SetVariable([ConstantVariable(v) for v in value], frozen=type(value) is frozenset,
                          real=value.copy())
    tracker.source = source
    return tracker
