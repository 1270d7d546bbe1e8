"""Rules of the builtins that build or read mappings and namespaces: ``dict``, the ``{**m}``
and ``f(**m)`` merges, the ``collections.abc`` views, ``locals``, ``vars`` and ``dir``.

``dict(x)`` and ``d.update(x)`` follow CPython's rule (``dict_update_arg``): a dict gives its
items; any other object with a ``keys`` attribute is a mapping, read as ``x.keys()`` then
``x[k]`` for each key (a user ``Mapping``, a ``UserDict``, an object with only ``keys`` and
``__getitem__``; a dict subclass that keeps dict's ``__iter__`` gives its own items, as
CPython reads its storage); anything else is an iterable of key/value pairs. ``{**m}`` and
``f(**m)`` take mappings only, and ``f(**m)`` rejects a keyword given twice.

``locals()`` (also ``vars()``, ``dir()``) is the frame's namespace as CPython 3.11 and 3.12
build it: one dict per frame, refreshed at each call with the variables bound then, in the
code's order of local, cell and free variables; names unbound since are removed from it.
"""

from __future__ import annotations

import collections.abc
import operator
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._unsupported import MissingAttribute, Unsupported
from ._base import VariableTracker
from ._builtins import _fold, builtin_rules, rule
from ._constant import ConstantVariable
from ._containers import (
    DictVariable,
    IteratorVariable,
    ListVariable,
    RangeVariable,
    SetVariable,
    TupleVariable,
)
from ._dict_views import DictViewVariable, MappingViewVariable
from ._errors import traced_error
from ._tensor import TensorVariable

if TYPE_CHECKING:
    from .._translator import Translator

__all__ = ["frame_locals", "merge_mapping", "update_pairs"]

# trackers of values that have no ``keys`` attribute: iterables of pairs for dict()
_NOT_MAPPINGS = (ListVariable, TupleVariable, IteratorVariable, SetVariable, RangeVariable,
                 DictViewVariable, MappingViewVariable, TensorVariable)


def _dict_key(k: VariableTracker) -> Any:
    if not k.is_constant():
        raise Unsupported(f"a dict key that is {k.describe()}")
    return k.as_constant()


def has_keys(tx: Translator, v: VariableTracker) -> bool:
    """Whether ``v`` has a ``keys`` attribute (what makes CPython read it as a mapping)."""
    if isinstance(v, DictVariable):
        return True
    if isinstance(v, _NOT_MAPPINGS):
        return False
    if v.is_constant():
        return hasattr(v.as_constant(), "keys")
    try:
        v.get_attr(tx, "keys")
    except MissingAttribute:
        return False
    return True


def update_pairs(tx: Translator, src: VariableTracker) -> Iterator[tuple[Any, VariableTracker]]:
    """The (key, value) pairs ``d.update(src)`` / ``dict(src)`` add, one at a time, by
    CPython's rule (see the module docstring); errors are eager's, raised at the pair where
    eager raises them (the pairs before it are already added, as in eager)."""
    if has_keys(tx, src):
        yield from mapping_pairs(tx, src)
        return
    from ._builtins_iteration import make_iterator

    it = make_iterator(tx, src)
    n = 0
    while (item := it.next_item(tx)) is not None:
        if item.is_constant() and not isinstance(item.as_constant(), (tuple, str, bytes, frozenset, range)):
            raise traced_error(TypeError(f"cannot convert dictionary update sequence element #{n} to a sequence"))
        parts = item.iterate(tx)
        if len(parts) != 2:
            raise traced_error(ValueError(
                f"dictionary update sequence element #{n} has length {len(parts)}; 2 is required"))
        yield _dict_key(parts[0]), parts[1]
        n += 1


def mapping_pairs(tx: Translator, src: VariableTracker) -> list[tuple[Any, VariableTracker]]:
    """The items of a mapping as CPython's dict merge reads them: a dict's own (or a dict
    subclass's that keeps dict's ``__iter__``), else ``src.keys()`` then ``src[k]``."""
    from ._objects import NewObjectVariable, UserDefinedObjectVariable

    if isinstance(src, DictVariable):
        return [(k, src.value_of(tx, k)) for k in src.key_list()]
    tp = src.python_type()
    if issubclass(tp, dict) and tp.__iter__ is dict.__iter__:
        if isinstance(src, NewObjectVariable) and src.items is not None:
            return mapping_pairs(tx, src.items)
        if isinstance(src, UserDefinedObjectVariable):
            return mapping_pairs(tx, src.dict_contents(tx))
    keys = src.call_method(tx, "keys", [], {}).iterate(tx)
    getitem = builtin_rules[operator.getitem]
    return [(_dict_key(k), getitem(tx, [src, k], {})) for k in keys]


def merge_mapping(tx: Translator, target: DictVariable, other: VariableTracker,
                  callee: VariableTracker | None) -> None:
    """``{**other}`` into ``target`` (``callee`` None), or the ``**other`` of a call of
    ``callee`` (keywords: strings, each given once)."""
    if not has_keys(tx, other):
        name = other.python_type().__name__
        if callee is None:
            raise traced_error(TypeError(f"'{name}' object is not a mapping"))
        raise traced_error(TypeError(f"{_function_str(callee)} argument after ** must be a mapping, not {name}"))
    for k, v in mapping_pairs(tx, other):
        if callee is not None:
            if type(k) is not str:
                raise traced_error(TypeError("keywords must be strings"))
            if k in target.items:
                raise traced_error(TypeError(f"{_function_str(callee)} got multiple values for keyword argument '{k}'"))
        target.call_method(tx, "__setitem__", [ConstantVariable(k), v], {})


def _function_str(callee: VariableTracker) -> str:
    # how CPython names a callee in a call's error messages
    fn = callee.as_constant() if callee.is_constant() else None
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if qualname is None:
        return f"{callee.python_type().__name__} object"
    module = getattr(fn, "__module__", None)
    return f"{qualname}()" if module in (None, "builtins") else f"{module}.{qualname}()"


@rule(dict)
def _dict(tx, args, kwargs):
    d = DictVariable({})
    for k, v in update_pairs(tx, args[0]) if args else ():
        d.items[k] = v
    d.items.update(kwargs)
    return d


def _abc_view(view_type: type) -> Any:
    def apply(tx, args, kwargs):
        return MappingViewVariable(args[0], view_type)

    return apply


for _view in (collections.abc.KeysView, collections.abc.ValuesView, collections.abc.ItemsView):
    builtin_rules[_view] = _abc_view(_view)


# -- frame namespaces --------------------------------------------------------------------------

def frame_locals(tx: Translator) -> DictVariable:
    """The frame's ``locals()`` dict, refreshed (see the module docstring)."""
    code = tx.code
    names = [*code.co_varnames, *(n for n in code.co_cellvars if n not in code.co_varnames),
             *code.co_freevars]
    names += [n for n in tx.locals if n not in names]
    if tx.locals_dict is None:
        tx.locals_dict = DictVariable({})
    items = tx.locals_dict.items
    for name in names:
        value = _bound_value(tx, name)
        if value is None:
            items.pop(name, None)
        else:
            items[name] = value
    return tx.locals_dict


def _bound_value(tx: Translator, name: str) -> VariableTracker | None:
    if name in tx.locals:
        value = tx.locals[name] = tx.realize(tx.locals[name])
        return value
    cell = tx.cells.get(name)
    if cell is None or cell.contents is None:
        return None
    cell.contents = tx.realize(cell.contents)
    return cell.contents


@rule(locals)
def _locals(tx, args, kwargs):
    return frame_locals(tx)


@rule(vars)
def _vars(tx, args, kwargs):
    if not args:
        return frame_locals(tx)
    (obj,) = args
    if isinstance(obj, ConstantVariable):
        return _fold(vars, args, kwargs)
    try:
        return obj.get_attr(tx, "__dict__")
    except MissingAttribute:
        raise traced_error(TypeError("vars() argument must have __dict__ attribute")) from None


@rule(dir)
def _dir(tx, args, kwargs):
    if not args:
        return ListVariable([ConstantVariable(k) for k in sorted(frame_locals(tx).items)])
    if args[0].is_constant():
        return _fold(dir, args, kwargs)
    raise Unsupported(f"dir() of {args[0].describe()}")
