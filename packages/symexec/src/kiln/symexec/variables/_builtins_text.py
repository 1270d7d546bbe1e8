"""Rules that make text from values known at trace time: ``str``/``repr``, ``str.join``,
``str.format`` and ``%``-formatting of a string.

Text is folded at trace time, so every value formatted must be known there: a constant (a
size of a static shape is one), or a tuple, list or dict whose items are (read item by item,
each read guarded as usual). A value known only when the graph runs (a tensor, a graph-input
number) is Unsupported: a clean graph break, never a string of the trace's example.
F-strings need no rule: ``FORMAT_VALUE``/``BUILD_STRING`` fold constants in ``_opcodes``.
"""

from __future__ import annotations

import operator
from typing import Any

from .._unsupported import Unsupported
from . import _builtins_operators  # noqa: F401  (its ``%`` rule is the one wrapped below)
from ._base import VariableTracker
from ._builtins import _fold, builtin_rules, rule
from ._constant import ConstantVariable
from ._containers import DictVariable, ListVariable, TupleVariable

__all__ = ["format_object", "known_value", "object_text"]


def known_value(tx, v: VariableTracker) -> Any:
    """The Python value of ``v`` when the trace knows all of it (a constant, or a tuple, list
    or dict of such values); Unsupported otherwise."""
    if v.is_constant():
        return v.as_constant()
    if isinstance(v, TupleVariable) and v.tuple_type is tuple:
        return tuple(known_value(tx, i) for i in v.items)
    if isinstance(v, ListVariable):
        return [known_value(tx, i) for i in v.items]
    if isinstance(v, DictVariable) and v.python_type() is dict:
        return {k: known_value(tx, v.value_of(tx, k)) for k in v.key_list()}
    raise Unsupported(f"text made from {v.describe()}, whose value is known only at run time")


def _fold_known(fn: Any, tx, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
    values = [ConstantVariable(known_value(tx, a)) for a in args]
    named = {k: ConstantVariable(known_value(tx, v)) for k, v in kwargs.items()}
    return _fold(fn, values, named)


def _text(fn: Any):
    def apply(tx, args, kwargs):
        return _fold_known(fn, tx, args, kwargs)

    return apply


def object_text(tx, v: VariableTracker, fn: Any) -> VariableTracker | None:
    """``str(v)`` / ``repr(v)`` (``fn``) of a user object whose class defines ``__str__`` or
    ``__repr__`` in Python: that method inlined (``str`` falls back to ``__repr__`` as
    ``object.__str__`` does); its result must be text known at trace time. None when ``v``
    is no such object."""
    from ._objects import call_special_method, lookup_class_attribute, user_special_method

    if user_special_method(v, "__repr__") is None and user_special_method(v, "__str__") is None:
        return None
    name = "__repr__"
    if fn is str and lookup_class_attribute(v.python_type(), "__str__") is not object.__str__:
        name = "__str__"
    result = call_special_method(tx, v, name, [])
    if result is None or not (result.is_constant() and type(result.as_constant()) is str):
        raise Unsupported(f"{name} of {v.describe()} gave no text known at trace time")
    return result


def format_object(tx, v: VariableTracker, conversion: int) -> VariableTracker:
    """``f"{v}"`` / ``f"{v!s}"`` / ``f"{v!r}"`` (``conversion`` 0, 1, 2) without a format
    spec, for a user object: its text by ``object_text`` (``format(v, "")`` is ``str(v)``
    when the class keeps ``object.__format__``); ``v`` itself when that does not apply."""
    from ._objects import lookup_class_attribute, user_special_method

    if conversion not in (0, 1, 2) or user_special_method(v, "__format__") is not None:
        return v
    if conversion == 0 and lookup_class_attribute(v.python_type(), "__format__") is not object.__format__:
        return v
    made = object_text(tx, v, repr if conversion == 2 else str)
    return v if made is None else made


def _text_of_object(fn: Any):
    fold = _text(fn)

    def apply(tx, args, kwargs):
        if len(args) == 1 and not kwargs:
            made = object_text(tx, args[0], fn)
            if made is not None:
                return made
        return fold(tx, args, kwargs)

    return apply


rule(str)(_text_of_object(str))
rule(repr)(_text_of_object(repr))
rule(str.format)(_text(str.format))


@rule(str.join)
def _join(tx, args, kwargs):
    sep, iterable = args
    if not (sep.is_constant() and isinstance(sep.as_constant(), str)):
        raise Unsupported(f"str.join on {sep.describe()}")
    if iterable.is_constant():
        return _fold(str.join, args, kwargs)
    from ._builtins_iteration import make_iterator

    items = make_iterator(tx, iterable).iterate(tx)  # a generator's items, traced in order
    return _fold(str.join, [sep, ConstantVariable([known_value(tx, i) for i in items])], {})


_modulo = builtin_rules[operator.mod]


@rule(operator.mod)
def _percent(tx, args, kwargs):
    """``"%d_%s" % values``: folded when the left side is a string, else ``%`` as before."""
    text = args[0]
    # the type asked first: ``as_constant`` of a graph-input number (``t % 3``) would fix it
    if isinstance(text, ConstantVariable) and isinstance(text.as_constant(), (str, bytes)):
        return _fold_known(operator.mod, tx, args, kwargs)
    return _modulo(tx, args, kwargs)
