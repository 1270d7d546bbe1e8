"""Errors eager raises, raised in the trace with eager's type and message.

When traced code does something eager Python rejects (a method a container lacks, a wrong
number of arguments, a missing key), the trace raises a TracedException carrying the
exception eager raises: a ``try``/``except`` of the traced code catches it as eager code
would (same type, same ``args``); uncaught, the frame breaks or falls back and the real call
raises it. The exception is learnt from CPython itself, by making the same call on stand-in
values where the error does not depend on the values (``call_error``, ``raised_error``).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from .._unsupported import MissingAttribute, TracedException, Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable

__all__ = ["INF", "call_error", "empty_of", "raised_error", "traced_error"]


def traced_error(e: BaseException) -> TracedException:
    """The TracedException for a real exception ``e`` (same type and arguments, so a
    handler of the traced code sees what eager code would); AttributeError stays a
    MissingAttribute."""
    from ._objects import ExceptionVariable

    if isinstance(e, Unsupported):  # kiln's own limit is never the user's exception
        raise e
    args = [ConstantVariable(a) if _plain(a) else ConstantVariable(repr(a)) for a in e.args]
    exc = ExceptionVariable(type(e), args)
    if isinstance(e, AttributeError):
        return MissingAttribute(str(e), exc)
    return TracedException(f"{type(e).__name__}: {e}", type(e), exc)


def _plain(value: Any) -> bool:
    return value is None or type(value) in (bool, int, float, str, bytes) or (
        type(value) is tuple and all(_plain(v) for v in value))


INF = 1 << 30
# (fewest, most positional arguments, keywords accepted: a set, or None for any) of the
# methods modelled here; a call outside this is an error eager raises (``call_error``).
_ARITY: dict[str, tuple[int, int, frozenset[str] | None]] = {
    "append": (1, 1, frozenset()), "extend": (1, 1, frozenset()), "insert": (2, 2, frozenset()),
    "pop": (0, 2, frozenset()), "clear": (0, 0, frozenset()), "reverse": (0, 0, frozenset()),
    "sort": (0, 0, frozenset({"key", "reverse"})), "index": (1, 3, frozenset()),
    "count": (1, 1, frozenset()), "remove": (1, 1, frozenset()), "copy": (0, 0, frozenset()),
    "get": (1, 2, frozenset()), "keys": (0, 0, frozenset()), "values": (0, 0, frozenset()),
    "items": (0, 0, frozenset()), "setdefault": (1, 2, frozenset()), "update": (0, 1, None),
    "popitem": (0, 0, frozenset()), "add": (1, 1, frozenset()), "discard": (1, 1, frozenset()),
    "union": (0, INF, frozenset()), "intersection": (0, INF, frozenset()),
    "difference": (0, INF, frozenset()), "symmetric_difference": (1, 1, frozenset()),
    "issubset": (1, 1, frozenset()), "issuperset": (1, 1, frozenset()), "isdisjoint": (1, 1, frozenset()),
    "__getitem__": (1, 1, frozenset()), "__setitem__": (2, 2, frozenset()), "__delitem__": (1, 1, frozenset()),
    "__contains__": (1, 1, frozenset()), "__len__": (0, 0, frozenset()), "__iter__": (0, 0, frozenset()),
    "__reversed__": (0, 0, frozenset()),
}
# per type, where one differs from the table: set.pop() and set.update(*others)
_ARITY_OF_TYPE = {(set, "pop"): (0, 0, frozenset()), (set, "update"): (0, INF, frozenset()),
                  (dict, "pop"): (1, 2, frozenset()), (list, "pop"): (0, 1, frozenset())}


def call_error(tp: type, name: str, args: list[VariableTracker],
               kwargs: dict[str, VariableTracker]) -> Unsupported | None:
    """The error eager raises for ``obj.name(*args, **kwargs)`` on a ``tp`` (a builtin
    container type) when the call is wrong whatever the values are: a method ``tp`` does not
    have, or a number of arguments or keywords it does not take. The exception is the one
    CPython raises for the same call on an empty ``tp`` with ``None`` arguments (the check of
    the call comes before anything looks at the values). None when the call is well formed."""
    fresh = empty_of(tp)
    if not hasattr(fresh, name):
        return raised_error(lambda: getattr(fresh, name))
    low, high, keywords = _ARITY_OF_TYPE.get((tp, name)) or _ARITY.get(name, (0, INF, None))
    if low <= len(args) <= high and (keywords is None or set(kwargs) <= keywords):
        return None
    return raised_error(lambda: getattr(fresh, name)(*[None] * len(args), **dict.fromkeys(kwargs)))


def empty_of(tp: type) -> Any:
    """An empty value of the builtin container type ``tp`` (a stand-in to ask CPython)."""
    return tp({}) if tp is types.MappingProxyType else tp()


def raised_error(call: Callable[[], Any]) -> Unsupported:
    try:
        call()
    except Exception as e:
        return traced_error(e)
    return Unsupported("a call kiln thought eager rejects did not raise")
