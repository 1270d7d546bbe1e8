"""``operator.itemgetter`` and ``operator.attrgetter`` objects: made in the trace or passed in.

A getter is immutable, so its tracker holds the real object (a constant of the trace: a
frame's getter is guarded by identity) and applies it item by item on trackers: each
``itemgetter`` item is ``operator.getitem`` (on a tensor, indexing: a graph op), each
``attrgetter`` name is ``getattr`` along its dotted path. What the getter reads is guarded as
any other read of the same object.
"""

from __future__ import annotations

import operator
from typing import Any

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._builtins import builtin_rules, rule
from ._constant import ConstantVariable
from ._containers import TupleVariable
from ._errors import traced_error

__all__ = ["GETTER_TYPES", "GetterVariable"]

GETTER_TYPES = (operator.itemgetter, operator.attrgetter)


class GetterVariable(VariableTracker):
    """An ``itemgetter``/``attrgetter`` object; ``real`` is the object itself."""

    __slots__ = ("real",)

    def __init__(self, real: Any, source: Any = None) -> None:
        super().__init__(source)
        self.real = real

    def python_type(self) -> type:
        return type(self.real)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.real

    def describe(self) -> str:
        return repr(self.real)

    def call(self, tx, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if len(args) != 1 or kwargs:  # eager's TypeError for the call's shape
            try:
                self.real(*[None] * len(args), **dict.fromkeys(kwargs))
            except TypeError as e:
                raise traced_error(e) from e
        (obj,) = args
        _, keys = self.real.__reduce__()  # the items or dotted names it was made with
        if type(self.real) is operator.itemgetter:
            getitem = builtin_rules[operator.getitem]
            got = [getitem(tx, [obj, ConstantVariable(k)], {}) for k in keys]
        else:
            got = [_get_path(tx, obj, name) for name in keys]
        return got[0] if len(keys) == 1 else TupleVariable(got)


def _get_path(tx, obj: VariableTracker, dotted: str) -> VariableTracker:
    get = builtin_rules[getattr]
    for name in dotted.split("."):
        obj = get(tx, [obj, ConstantVariable(name)], {})
    return obj


def _make(kind: type):
    def apply(tx, args, kwargs):
        if kwargs or not all(a.is_constant() for a in args):
            raise Unsupported(f"{kind.__name__}() of values unknown at trace time")
        try:
            return GetterVariable(kind(*[a.as_constant() for a in args]))
        except TypeError as e:  # no items, or an attribute name that is no string
            raise traced_error(e) from e

    return apply


for _kind in GETTER_TYPES:
    rule(_kind)(_make(_kind))
