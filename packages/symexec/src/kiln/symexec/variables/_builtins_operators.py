"""Rules of the operators (``x + y``, ``x += y``, ``-x``, ``not x``, ``x is y``, ``x[k]``,
``k in x``) on trackers, and ``values_equal``, the trace-time answer of ``==`` that ``in``,
``list.index`` and sequence comparisons use.

A binary operator dispatches on its operands: any tensor makes a graph node, numbers the
graph takes stay symbolic, constants fold, containers concatenate, repeat or combine (set
operators, ``dict | dict``, dict views). An in-place operator changes a container whose type
defines it (``l += m``, ``s |= t``, ``d |= e``) and returns the same object; a user class's
own ``__iadd__`` (and kin) is called first, as Python does. ``==`` between values it cannot
decide at trace time (a tensor's, a user ``__eq__``) stops tracing rather than guess.
"""

from __future__ import annotations

import operator
import types
from typing import TYPE_CHECKING, Any

from kiln.guards import IdMatch

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._builtins import Rule, _fold, builtin_rules, rule
from ._constant import ConstantVariable
from ._containers import (
    DictVariable,
    ListVariable,
    RangeVariable,
    SetVariable,
    TupleVariable,
)
from ._errors import raised_error, traced_error
from ._numpy import NumpyArrayVariable, numpy_operator
from ._objects import UserDefinedObjectVariable, call_special_method
from ._symnumber import NUMBER_OPS, SIZE_OPS, SymNumberVariable, compare
from ._tensor import TensorVariable
from ._wrap import wrap_trace_value

if TYPE_CHECKING:
    from .._translator import Translator


__all__ = ["values_equal"]

_BINARY = (operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
           operator.mod, operator.pow, operator.matmul, operator.and_, operator.or_,
           operator.xor, operator.lshift, operator.rshift, operator.eq, operator.ne,
           operator.lt, operator.le, operator.gt, operator.ge)
_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub,
            operator.imul: operator.mul, operator.itruediv: operator.truediv,
            operator.ifloordiv: operator.floordiv, operator.imod: operator.mod,
            operator.ipow: operator.pow, operator.imatmul: operator.matmul,
            operator.iand: operator.and_, operator.ior: operator.or_,
            operator.ixor: operator.xor, operator.ilshift: operator.lshift,
            operator.irshift: operator.rshift}
_UNARY = (operator.neg, operator.pos, operator.invert, abs)


def values_equal(tx: Translator, a: VariableTracker, b: VariableTracker) -> bool:
    """``a == b`` as ``in``, ``list.index/count/remove`` and sequence ``==`` decide it:
    identity first (CPython's PyObject_RichCompareBool), then constants by value. Two other
    values are unequal by identity only where neither has an ``__eq__`` of its own (a
    tensor's compares data, a user class's may say equal): those stop tracing."""
    if a is b:
        return True
    if a.is_constant() and b.is_constant():
        return bool(a.as_constant() == b.as_constant())
    known = _immutable_value(tx, a), _immutable_value(tx, b)
    if _NO_VALUE not in known:
        return bool(known[0] == known[1])
    for v in (a, b):
        eq = getattr(v.python_type(), "__eq__", None)
        # a constant's C-level __eq__ (int, str, tuple, ...) gives NotImplemented to others
        if eq is not object.__eq__ and not (v.is_constant() and isinstance(eq, types.WrapperDescriptorType)):
            raise Unsupported(f"comparing {a.describe()} with {b.describe()} needs the value of "
                              f"{v.describe()} (its type's __eq__)")
    tx.output.assume_distinct(a, b)  # two frame values: guarded as distinct
    return False


_IMMUTABLE_BASES = (str, bytes, int, float, complex, tuple, frozenset)
_NO_VALUE: Any = object()


def _immutable_value(tx: Translator, v: VariableTracker) -> Any:
    """The value ``==`` compares for ``v``, where it is known at trace time and cannot change:
    a constant, or a frame object whose ``__eq__`` is an immutable builtin base's (a
    ``str``-valued Enum member), pinned by an identity guard. Otherwise ``_NO_VALUE``."""
    if v.is_constant():
        return v.as_constant()
    if isinstance(v, UserDefinedObjectVariable) and v.source is not None:
        eq = type(v.obj).__eq__
        if any(eq is base.__eq__ for base in _IMMUTABLE_BASES):
            tx.output.guards.add(IdMatch(v.source, v.obj))
            return v.obj
    return _NO_VALUE


# -- operators ---------------------------------------------------------------------------------

def _binary(fn: Any) -> Rule:
    def apply(tx: Translator, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
        a, b = args
        if isinstance(a, NumpyArrayVariable) or isinstance(b, NumpyArrayVariable):
            return numpy_operator(tx, fn, args)  # numpy's operator, as torch ops
        if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
            return tx.output.call_function(fn, [a, b], {})
        if fn in NUMBER_OPS and _number_arithmetic(a, b):
            return tx.output.number_op(fn, [a, b])
        if fn in (operator.add, operator.eq, operator.ne) and (_holds_symbolic(a) or _holds_symbolic(b)):
            # sizes of a dynamic tensor in a tuple (``(-1,) + x.shape[1:]``): built item by
            # item, never folded (folding would specialize every size in it)
            sa, sb = _as_sequence(a), _as_sequence(b)
            if sa is not None and sb is not None:
                if fn is operator.add and isinstance(sa, TupleVariable) and isinstance(sb, TupleVariable):
                    import torch

                    size = sa.tuple_type is torch.Size
                    return TupleVariable(sa.items + sb.items, tuple_type=torch.Size if size else tuple)
                return _container_binary(tx, fn, sa, sb)
        if _symbolic(a) or _symbolic(b):
            if fn in SIZE_OPS and _number_arithmetic(a, b):
                return tx.output.number_op(fn, [a, b])
            if fn in _ORDER and _number_arithmetic(a, b):
                if _unbacked(a) or _unbacked(b):  # data-dependent: a bool the graph computes
                    return compare(tx.output, fn, a, b)
                # a size relation: decided on the symbols, the ShapeEnv keeps it as a guard
                return ConstantVariable(bool(fn(_symbolic_value(a), _symbolic_value(b))))
        if a.is_constant() and b.is_constant():
            return _fold(fn, args, kwargs)
        return _container_binary(tx, fn, a, b)

    return apply


def _symbolic(v: VariableTracker) -> bool:
    return isinstance(v, SymNumberVariable) and v.symbolic


def _unbacked(v: VariableTracker) -> bool:
    return isinstance(v, SymNumberVariable) and v.unbacked


def _holds_symbolic(v: VariableTracker) -> bool:
    if isinstance(v, (TupleVariable, ListVariable)):
        return any(_symbolic(i) or _holds_symbolic(i) for i in v.items)
    return False


def _as_sequence(v: VariableTracker) -> VariableTracker | None:
    """``v`` as a TupleVariable/ListVariable (a constant tuple or list item by item)."""
    if isinstance(v, (TupleVariable, ListVariable)):
        return v
    import torch

    if type(v) is ConstantVariable and type(v.as_constant()) in (tuple, list, torch.Size):
        items = [ConstantVariable(i) for i in v.as_constant()]
        if type(v.as_constant()) is torch.Size:
            return TupleVariable(items, tuple_type=torch.Size)
        return TupleVariable(items) if type(v.as_constant()) is tuple else ListVariable(items)
    return None


def _is_size(v: TupleVariable) -> bool:
    import torch

    return v.tuple_type is torch.Size


def _symbolic_value(v: VariableTracker) -> Any:
    return v.example if _symbolic(v) else v.as_constant()


def _number_arithmetic(a: VariableTracker, b: VariableTracker) -> bool:
    """A graph-input number with another, or with an int/float known at trace time."""
    def number(v: VariableTracker) -> bool:
        return isinstance(v, SymNumberVariable) or (
            type(v) is ConstantVariable and type(v.as_constant()) in (int, float))

    return (isinstance(a, SymNumberVariable) or isinstance(b, SymNumberVariable)) and number(a) and number(b)


def _container_binary(tx: Translator, fn: Any, a: VariableTracker, b: VariableTracker) -> VariableTracker:
    from ._dict_views import DictViewVariable

    seq = (TupleVariable, ListVariable)
    if isinstance(a, DictViewVariable) or isinstance(b, DictViewVariable):
        return _view_binary(tx, fn, a, b)
    if fn is operator.add and (isinstance(a, TupleVariable) or isinstance(b, TupleVariable)):
        a, b = _as_sequence(a) or a, _as_sequence(b) or b  # ``() + t``, ``t + (None,)``
    if fn in _SET_OPS and (isinstance(a, SetVariable) or isinstance(b, SetVariable)):
        from ._sets import as_set

        a, b = (as_set(tx, v) if isinstance(v, SetVariable) or (
            v.is_constant() and isinstance(v.as_constant(), (set, frozenset))) else v for v in (a, b))
    if fn is operator.add and isinstance(a, TupleVariable) and isinstance(b, TupleVariable) and \
            (_is_size(a) or _is_size(b)):  # torch.Size + tuple, either way round: a torch.Size
        import torch

        return TupleVariable(a.items + b.items, tuple_type=torch.Size)
    if fn is operator.add and isinstance(a, seq) and type(a) is type(b):
        return type(a)(a.items + b.items)
    if fn is operator.mul and isinstance(a, seq) and b.is_constant() and _is_index(b.as_constant()):
        return type(a)(a.items * b.as_constant())
    if fn is operator.mul and isinstance(b, seq) and a.is_constant() and _is_index(a.as_constant()):
        return type(b)(b.items * a.as_constant())
    if fn in _SET_OPS and isinstance(a, SetVariable) and isinstance(b, SetVariable):
        return a.combine(fn, b)
    if fn in _ORDER and isinstance(a, SetVariable) and isinstance(b, SetVariable) \
            and a.real is not None and b.real is not None:
        return ConstantVariable(fn(a.real, b.real))  # subset / superset tests of constants
    if fn is operator.or_ and isinstance(a, DictVariable) and isinstance(b, DictVariable) \
            and a.python_type() is dict and b.python_type() is dict:
        merged = builtin_rules[dict](tx, [a], {})  # dict.__or__: a plain copy of a, then b's items
        merged.call_method(tx, "update", [b], {})
        return merged
    if fn in (operator.eq, operator.ne) and (isinstance(a, seq) or isinstance(b, seq)):
        a, b = _as_sequence(a) or a, _as_sequence(b) or b  # ``x.size()[1:] != torch.Size([])``
        if isinstance(a, seq) and isinstance(b, seq) and isinstance(a, ListVariable) != isinstance(b, ListVariable):
            return ConstantVariable(fn is operator.ne)  # a list never equals a tuple
    if fn in (operator.eq, operator.ne) and isinstance(a, seq) and isinstance(b, seq):
        same = len(a.items) == len(b.items) and all(
            _compare(tx, x, y) for x, y in zip(a.items, b.items, strict=True))
        return ConstantVariable(same if fn is operator.eq else not same)
    if fn in (operator.eq, operator.ne) and not (a.is_constant() and b.is_constant()):
        # two objects of different kinds (or non-constants): Python falls back to identity
        same = values_equal(tx, a, b)
        return ConstantVariable(same if fn is operator.eq else not same)
    samples = _sample(a), _sample(b)
    if _NO_SAMPLE not in samples:
        # builtin values the operator does not take (``[1] + (2,)``, ``[1] * 1.5``): the same
        # operator on stand-ins of their types raises eager's TypeError
        raise raised_error(lambda: fn(*samples))
    raise Unsupported(f"{fn.__name__} of {a.describe()} and {b.describe()}")


_NO_SAMPLE: Any = object()


def _real_set_like(tx: Translator, v: VariableTracker) -> Any:
    """A real value standing for ``v`` in a set operation with a dict view: the view of a
    dict of the same constant keys (and values), a set of constants as eager built it, a
    constant; else _NO_SAMPLE."""
    from ._dict_views import DictViewVariable

    if isinstance(v, DictViewVariable):
        keys = v.dict.key_list()
        if v.kind == "keys":
            return dict.fromkeys(keys).keys()
        values = [v.dict.value_of(tx, k) for k in keys]
        if not all(x.is_constant() for x in values):
            return _NO_SAMPLE
        return getattr(dict(zip(keys, [x.as_constant() for x in values], strict=True)), v.kind)()
    if isinstance(v, SetVariable):
        return _NO_SAMPLE if v.real is None else v.real
    return v.as_constant() if v.is_constant() else _NO_SAMPLE


def _sample(v: VariableTracker) -> Any:
    """``v``'s value when it is a constant, an empty value of its type when that is a builtin
    container, else _NO_SAMPLE."""
    if isinstance(v, (ConstantVariable, RangeVariable)):
        return v.as_constant()
    if isinstance(v, (ListVariable, TupleVariable, DictVariable, SetVariable)) and \
            v.python_type() in (list, tuple, dict, set, frozenset):
        return v.python_type()()
    return _NO_SAMPLE


def _is_index(value: Any) -> bool:
    return hasattr(type(value), "__index__")


_SET_OPS = (operator.or_, operator.and_, operator.sub, operator.xor)
_ORDER = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)


def _view_binary(tx: Translator, fn: Any, a: VariableTracker, b: VariableTracker) -> VariableTracker:
    """An operator with a dict view (its dict as it is now): set operators of keys and
    items views take any iterable and give a set; comparisons compare them as sets; values
    views compare by identity (Python gives them no set behaviour)."""
    from ._dict_views import DictViewVariable

    def set_like(v: VariableTracker) -> bool:
        return (isinstance(v, DictViewVariable) and v.kind != "values") or isinstance(v, SetVariable) \
            or (v.is_constant() and isinstance(v.as_constant(), (set, frozenset)))

    def as_set(v: VariableTracker) -> SetVariable:
        return v if isinstance(v, SetVariable) else SetVariable(v.iterate(tx))

    view = a if isinstance(a, DictViewVariable) else b
    real_a, real_b = _real_set_like(tx, a), _real_set_like(tx, b)
    if view.kind != "values" and real_a is not _NO_SAMPLE and real_b is not _NO_SAMPLE:
        # every item a constant: the operator on real stand-ins (a dict_keys of the same keys,
        # the set with eager's layout) gives eager's result, and its order
        try:
            return wrap_trace_value(fn(real_a, real_b))
        except Exception as e:
            raise traced_error(e) from e
    if view.kind != "values" and fn in _SET_OPS:
        if not set_like(a) and not set_like(b):
            raise Unsupported(f"{fn.__name__} of {a.describe()} and {b.describe()}")
        result = as_set(a).combine(fn, as_set(b))
        result.frozen = False  # a view's set operators give a set
        return result
    if fn in _ORDER and set_like(a) and set_like(b):
        x, y = as_set(a), as_set(b)
        if not all(i.is_constant() for i in [*x.items, *y.items]):
            raise Unsupported(f"comparing {a.describe()} and {b.describe()}, which hold values unknown at trace time")
        return ConstantVariable(fn(frozenset(i.as_constant() for i in x.items),
                                   frozenset(i.as_constant() for i in y.items)))
    if fn in (operator.eq, operator.ne):
        return ConstantVariable((a is b) == (fn is operator.eq))
    if fn in _ORDER or fn in _SET_OPS:
        raise raised_error(lambda: fn(getattr({}, view.kind)(), ()))
    raise Unsupported(f"{fn.__name__} of {a.describe()} and {b.describe()}")


def _compare(tx: Translator, a: VariableTracker, b: VariableTracker) -> bool:
    result = builtin_rules[operator.eq](tx, [a, b], {})
    return result.truth(tx)


for _fn in _BINARY:
    builtin_rules[_fn] = _binary(_fn)


def _inplace(fn: Any, plain: Any) -> Rule:
    def apply(tx: Translator, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
        a, b = args
        if isinstance(a, NumpyArrayVariable) or isinstance(b, NumpyArrayVariable):
            return numpy_operator(tx, fn, args)  # ``a += 1`` changes the array, like eager
        if isinstance(a, TensorVariable):
            return tx.output.call_function(fn, [a, b], {})  # mutates the tensor, like eager
        changed = _container_inplace(tx, plain, a, b)
        if changed is not None:
            return changed  # the same object, changed (``l *= 2``, ``s |= t``, ``d |= e``)
        # a class's own __iadd__ (and kin) first, as Python does; NotImplemented falls back
        result = call_special_method(tx, a, f"__{fn.__name__}__", [b])
        if result is not None and not (result.is_constant() and result.as_constant() is NotImplemented):
            return result
        return builtin_rules[plain](tx, args, kwargs)

    return apply


def _container_inplace(tx: Translator, plain: Any, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    """``a op= b`` for the containers whose type defines the in-place operator (list ``+=``
    ``*=``; set ``|= &= -= ^=``; dict ``|=``): ``a`` itself changed, or None when its type has
    no such operator (Python then computes ``a op b``)."""
    if isinstance(a, ListVariable) and plain is operator.add:
        a.call_method(tx, "extend", [b], {})
        return a
    if isinstance(a, ListVariable) and plain is operator.mul and b.is_constant() \
            and type(b.as_constant()) in (int, bool):
        a.call_method(tx, "__setitem__", [ConstantVariable(slice(None)), ListVariable(a.items * b.as_constant())], {})
        return a
    if isinstance(a, SetVariable) and a.source is not None and not a.frozen and plain in _SET_OPS:
        raise Unsupported(f"changing {a.describe()} (a set passed in)")
    if isinstance(a, SetVariable) and not a.frozen and plain in _SET_OPS and isinstance(b, SetVariable):
        changed = a.combine(plain, b, inplace=True)
        a.items, a.real = changed.items, changed.real
        return a
    if isinstance(a, DictVariable) and plain is operator.or_ and isinstance(b, DictVariable) and not _is_proxy(a):
        a.call_method(tx, "update", [b], {})
        return a
    return None


for _fn, _plain in _INPLACE.items():
    builtin_rules[_fn] = _inplace(_fn, _plain)


def _unary(fn: Any) -> Rule:
    def apply(tx: Translator, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
        (a,) = args
        if isinstance(a, NumpyArrayVariable):
            return numpy_operator(tx, fn, args)
        if isinstance(a, TensorVariable):
            return tx.output.call_function(fn, [a], {})
        if fn in NUMBER_OPS and isinstance(a, SymNumberVariable):
            return tx.output.number_op(fn, [a])
        return _fold(fn, args, kwargs)

    return apply


for _fn in _UNARY:
    builtin_rules[_fn] = _unary(_fn)


@rule(operator.not_)
def _not(tx, args, kwargs):
    return ConstantVariable(not args[0].truth(tx))


@rule(operator.truth, bool)
def _truth(tx, args, kwargs):
    if not args:
        return ConstantVariable(False)
    return ConstantVariable(args[0].truth(tx))


@rule(operator.is_, operator.is_not)
def _is(tx, args, kwargs):
    a, b = args
    if a is b:
        return ConstantVariable(True)  # one tracker is one object (a view, a list, ...)
    for x, y in ((a, b), (b, a)):
        # a number the graph takes is never the same object as a constant of another type;
        # answered without its value (which would specialize it)
        if isinstance(x, SymNumberVariable) and not isinstance(y, SymNumberVariable) \
                and y.is_constant() and type(y.as_constant()) is not x.python_type():
            return ConstantVariable(False)
    if a.is_constant() and b.is_constant():
        same = a.as_constant() is b.as_constant()
    else:
        same = False
        tx.output.assume_distinct(a, b)  # two frame values: guarded as distinct
    return ConstantVariable(same)


def _is_not(tx, args, kwargs):
    return ConstantVariable(not _is(tx, args, kwargs).as_constant())


builtin_rules[operator.is_not] = _is_not


@rule(operator.getitem)
def _getitem(tx, args, kwargs):
    obj, key = args
    if isinstance(obj, NumpyArrayVariable):
        return numpy_operator(tx, operator.getitem, args)
    if isinstance(obj, TensorVariable):
        return tx.output.call_function(operator.getitem, [obj, key], {})
    if obj.is_constant() and key.is_constant() and not _holds_symbolic(obj) \
            and not isinstance(obj, (TupleVariable, ListVariable)):
        return _fold(operator.getitem, args, kwargs)
    # a tuple or list: its item's own tracker (a function in a table of them, ``OPS[k][1]``,
    # keeps its source; folded, it would be a value made at trace time, which cannot be tracked)
    return obj.call_method(tx, "__getitem__", [key], {})


@rule(operator.setitem)
def _setitem(tx, args, kwargs):
    obj, key, value = args
    if isinstance(obj, NumpyArrayVariable):
        return numpy_operator(tx, operator.setitem, args)
    if isinstance(obj, TensorVariable):
        tx.output.call_function(operator.setitem, [obj, key, value], {})
        return ConstantVariable(None)
    if isinstance(obj, (ConstantVariable, RangeVariable, TupleVariable)) or _is_proxy(obj):  # immutable: eager's TypeError
        k = key.as_constant() if key.is_constant() else None  # the message depends on the key's type
        raise raised_error(lambda: operator.setitem(_immutable_sample(obj), k, None))
    return obj.call_method(tx, "__setitem__", [key, value], {})


def _immutable_sample(obj: VariableTracker) -> Any:
    # the value itself, or a tuple of its length, or an empty mappingproxy (what a store into
    # it is checked on)
    if _is_proxy(obj):
        return types.MappingProxyType({})
    return (None,) * len(obj.items) if isinstance(obj, TupleVariable) else obj.as_constant()


def _is_proxy(obj: VariableTracker) -> bool:
    return isinstance(obj, DictVariable) and obj.python_type() is types.MappingProxyType


@rule(operator.delitem)
def _delitem(tx, args, kwargs):
    obj, key = args
    if isinstance(obj, (ConstantVariable, RangeVariable, TupleVariable)) or _is_proxy(obj):
        k = key.as_constant() if key.is_constant() else None
        raise raised_error(lambda: operator.delitem(_immutable_sample(obj), k))
    return obj.call_method(tx, "__delitem__", [key], {})


@rule(operator.contains)
def _contains(tx, args, kwargs):
    from ._dict_views import DictViewVariable
    from ._environ import EnvironVariable

    container, item = args
    if isinstance(container, (DictVariable, SetVariable, EnvironVariable, DictViewVariable)):
        return container.call_method(tx, "__contains__", [item], {})
    found = call_special_method(tx, container, "__contains__", [item])
    if found is not None:
        return ConstantVariable(found.truth(tx))
    if container.is_constant() and item.is_constant():
        return _fold(operator.contains, args, kwargs)
    return ConstantVariable(any(values_equal(tx, v, item) for v in container.iterate(tx)))
