"""BuiltinVariable: Python builtins and ``operator``/``math`` functions, one rule each.

``builtin_rules`` maps a function to the rule that models it on trackers. A rule folds
constants at trace time, turns tensor operands into graph nodes, and works on containers
item by item. Binary operators (``x + y`` reaches here as ``operator.add``) dispatch on the
operand kinds: any tensor makes a node; all constants fold; containers concatenate or repeat.
A function without a rule folds when every argument is a constant and is Unsupported
otherwise; builtins that read or change the calling frame or the outside world (``eval``,
``globals()``, ``input``, ``open``) never fold.

A call eager rejects raises, in the trace, eager's exception (``_errors``): a call of the
wrong shape (argument count, keywords; checked against the function's signature before its
rule runs), and each rule's errors of wrong types or values. Iteration builtins are in
``_builtins_iteration``, mappings and frame namespaces (``dict``, ``locals``, ``vars``) in
``_builtins_mapping``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import operator
import types
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kiln.guards import IdMatch

from .._unsupported import MissingAttribute, Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable, FrozenObjectVariable, is_constant_value
from ._containers import (
    DictVariable,
    ListVariable,
    RangeVariable,
    SetVariable,
    TupleVariable,
    constant_args,
)
from ._errors import INF, raised_error, traced_error
from ._objects import UserDefinedObjectVariable, call_special_method
from ._symnumber import NUMBER_OPS, SymNumberVariable
from ._tensor import TensorVariable
from ._wrap import wrap_trace_value

if TYPE_CHECKING:
    from .._translator import Translator

__all__ = ["BuiltinVariable", "builtin_rules", "is_builtin_function", "values_equal"]

Rule = Callable[["Translator", list[VariableTracker], dict[str, VariableTracker]], VariableTracker]
builtin_rules: dict[Any, Rule] = {}

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


def rule(*fns: Any) -> Callable[[Rule], Rule]:
    """Register the decorated function as the rule of each of ``fns``."""

    def register(r: Rule) -> Rule:
        for fn in fns:
            builtin_rules[fn] = r
        return r

    return register


def _all_constant(args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> bool:
    return all(a.is_constant() for a in args) and all(v.is_constant() for v in kwargs.values())


def _fold(fn: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
    try:
        result = fn(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
    except Exception as e:
        # The same error happens in eager: a try/except of the traced code may catch it;
        # uncaught, the frame falls back and eager raises it for real.
        raise traced_error(e) from e
    return wrap_trace_value(result)


# Builtins with no signature to read: (fewest, most positional arguments, keywords taken:
# a tuple, or None for any).
_SHAPES: dict[Any, tuple[int, int, tuple[str, ...] | None]] = {
    range: (1, 3, ()), dict: (0, 1, None), set: (0, 1, ()), frozenset: (0, 1, ()),
    zip: (0, INF, ("strict",)), map: (2, INF, ()), filter: (2, 2, ()), max: (1, INF, ("key", "default")),
    min: (1, INF, ("key", "default")), getattr: (2, 3, ()), super: (0, 2, ()), slice: (1, 3, ()),
    iter: (1, 2, ()), next: (1, 2, ()), vars: (0, 1, ()), dir: (0, 1, ()), bool: (0, 1, ()),
    type: (1, 3, ()), int: (0, 2, ("base",)), str: (0, 3, ("object", "encoding", "errors")),
}


@functools.cache
def _shape(fn: Any) -> tuple[int, int, tuple[str, ...] | None, inspect.Signature | None] | None:
    """How ``fn`` may be called: (fewest, most positional arguments, keywords taken or None
    for any, the signature to bind when counting is not enough); None when unknown."""
    if fn in _SHAPES:
        return (*_SHAPES[fn], None)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    kinds = inspect.Parameter
    positional = [p for p in sig.parameters.values() if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    low = sum(1 for p in positional if p.default is p.empty)
    high = INF if any(p.kind is kinds.VAR_POSITIONAL for p in sig.parameters.values()) else len(positional)
    names = None if any(p.kind is kinds.VAR_KEYWORD for p in sig.parameters.values()) else tuple(
        p.name for p in sig.parameters.values() if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY))
    return low, high, names, sig


def call_shape_error(fn: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> Unsupported | None:
    """The TypeError eager raises for calling ``fn`` with this many arguments and these
    keywords, whatever their values (None when the call is well formed or ``fn``'s shape is
    unknown). The message is CPython's: ``fn`` is called with ``None`` in place of each
    argument, which its argument parsing rejects before anything runs."""
    shape = _shape(fn)
    if shape is None:
        return None
    low, high, names, sig = shape
    if low <= len(args) <= high and (names is None or all(k in names for k in kwargs)) \
            and not (fn is type and len(args) == 2):
        return None
    if sig is not None:
        try:
            sig.bind(*args, **kwargs)  # a positional argument given by keyword
            return None
        except TypeError:
            pass
    return raised_error(lambda: fn(*[None] * len(args), **dict.fromkeys(kwargs)))


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


class BuiltinVariable(VariableTracker):
    """A builtin or ``operator``/``math`` function; calls go through ``builtin_rules``."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any, source: Any = None) -> None:
        super().__init__(source)
        self.fn = fn

    def python_type(self) -> type:
        return type(self.fn)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.fn

    def describe(self) -> str:
        return f"builtin {getattr(self.fn, '__name__', self.fn)}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        try:
            value = getattr(self.fn, name)
        except AttributeError as e:
            raise traced_error(e) from e
        return ConstantVariable(value) if is_constant_value(value) else tx.builder.wrap(value, None)

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        r = builtin_rules.get(self.fn)
        if r is not None:
            error = call_shape_error(self.fn, args, kwargs)
            if error is not None:
                raise error
            return r(tx, args, kwargs)
        if _all_constant(args, kwargs) and self.fn not in _NEVER_FOLDED:
            return _fold(self.fn, args, kwargs)
        raise Unsupported(f"{self.describe()} with {', '.join(a.describe() for a in args)}")


# What a call of these does depends on the calling frame or changes the world outside the
# trace: folded at trace time they would answer for kiln's own frame, or happen once.
_NEVER_FOLDED = frozenset({globals, eval, exec, input, open, breakpoint, __import__, help, id})


# -- operators ---------------------------------------------------------------------------------

def _binary(fn: Any) -> Rule:
    def apply(tx: Translator, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
        a, b = args
        if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
            return tx.output.call_function(fn, [a, b], {})
        if fn in NUMBER_OPS and _number_arithmetic(a, b):
            return tx.output.number_op(fn, [a, b])
        if a.is_constant() and b.is_constant():
            return _fold(fn, args, kwargs)
        return _container_binary(tx, fn, a, b)

    return apply


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
    if fn is operator.add and isinstance(a, seq) and type(a) is type(b):
        return type(a)(a.items + b.items)
    if fn is operator.mul and isinstance(a, seq) and b.is_constant() and _is_index(b.as_constant()):
        return type(a)(a.items * b.as_constant())
    if fn is operator.mul and isinstance(b, seq) and a.is_constant() and _is_index(a.as_constant()):
        return type(b)(b.items * a.as_constant())
    if fn in _SET_OPS and isinstance(a, SetVariable) and isinstance(b, SetVariable):
        return a.combine(fn, b)
    if fn is operator.or_ and isinstance(a, DictVariable) and isinstance(b, DictVariable) \
            and a.python_type() is dict and b.python_type() is dict:
        merged = builtin_rules[dict](tx, [a], {})  # dict.__or__: a plain copy of a, then b's items
        merged.call_method(tx, "update", [b], {})
        return merged
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
    if isinstance(obj, TensorVariable):
        return tx.output.call_function(operator.getitem, [obj, key], {})
    if obj.is_constant() and key.is_constant():
        return _fold(operator.getitem, args, kwargs)
    return obj.call_method(tx, "__getitem__", [key], {})


@rule(operator.setitem)
def _setitem(tx, args, kwargs):
    obj, key, value = args
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


# -- builtins ----------------------------------------------------------------------------------

@rule(len)
def _len(tx, args, kwargs):
    from ._dict_views import DictViewVariable

    (obj,) = args
    if isinstance(obj, TensorVariable):
        if not obj.fake.dim():
            raise traced_error(TypeError("len() of a 0-d tensor"))
        return ConstantVariable(obj.fake.shape[0])
    if isinstance(obj, (DictVariable, SetVariable, DictViewVariable, TupleVariable, ListVariable)):
        return obj.call_method(tx, "__len__", [], {})
    if obj.is_constant():
        return _fold(len, args, kwargs)
    n = call_special_method(tx, obj, "__len__", [])
    if n is not None:
        return n
    try:
        tp = obj.python_type()
    except Unsupported:
        tp = None
    if tp is not None and not hasattr(tp, "__len__"):
        raise traced_error(TypeError(f"object of type '{tp.__name__}' has no len()"))
    return ConstantVariable(len(obj.iterate(tx)))


@rule(isinstance)
def _isinstance(tx, args, kwargs):
    obj, classes = args
    cls = classes.as_constant()
    try:
        return ConstantVariable(_issubclass_of(obj.python_type(), cls))
    except TypeError:
        # not a class or a tuple of classes: the TypeError eager gives for this second argument
        raise raised_error(lambda: isinstance(None, cls)) from None


def _issubclass_of(tp: type, cls: Any) -> bool:
    if isinstance(cls, tuple):
        return any(_issubclass_of(tp, c) for c in cls)
    return issubclass(tp, cls)


@rule(issubclass)
def _issubclass(tx, args, kwargs):
    return _fold(issubclass, args, kwargs)


@rule(type)
def _type(tx, args, kwargs):
    if len(args) != 1:
        raise Unsupported("type() with three arguments (creating a class)")
    from ._objects import UserDefinedClassVariable

    tp = args[0].python_type()
    if is_constant_value(tp):
        return ConstantVariable(tp)
    if tp in builtin_rules:  # dict, list, set, ...: calling it is the builtin's rule
        return BuiltinVariable(tp)
    return UserDefinedClassVariable(tp)


@rule(range)
def _range(tx, args, kwargs):
    bounds = constant_args("range()", args)
    try:
        return RangeVariable(range(*bounds))
    except (TypeError, ValueError) as e:  # range(1.5), range(0, 5, 0)
        raise traced_error(e) from e


def _make_sequence(kind: type) -> Rule:
    def apply(tx, args, kwargs):
        if kind is tuple and args and type(args[0]) is TupleVariable and args[0].tuple_type is tuple:
            return args[0]  # tuple(t) is t
        items = args[0].iterate(tx) if args else []
        return TupleVariable(items) if kind is tuple else ListVariable(items)

    return apply


builtin_rules[tuple] = _make_sequence(tuple)
builtin_rules[list] = _make_sequence(list)


@rule(set)
def _set(tx, args, kwargs):
    made = SetVariable([])
    if args:
        made.update_from(tx, args[0])  # a set's table merged as eager merges it
    return made


@rule(frozenset)
def _frozenset(tx, args, kwargs):
    if args and ((isinstance(args[0], SetVariable) and args[0].frozen)
                 or (args[0].is_constant() and type(args[0].as_constant()) is frozenset)):
        return args[0]  # frozenset(f) is f
    made = _set(tx, args, kwargs)
    return SetVariable(made.items, frozen=True, real=None if made.real is None else frozenset(made.real))


def _reduce_minmax(fn: Any) -> Rule:
    def apply(tx, args, kwargs):
        if "default" in kwargs and len(args) > 1:
            raise raised_error(lambda: fn(None, None, default=None))
        items = args[0].iterate(tx) if len(args) == 1 else list(args)
        if not items:
            if "default" in kwargs:
                return kwargs["default"]
            raise raised_error(lambda: fn([]))
        key = kwargs.get("key")
        if key is not None and not (key.is_constant() and key.as_constant() is None):
            if _all_constant(items, {"key": key}):
                return _fold(lambda *a: fn(*a, key=key.as_constant()), [TupleVariable(items)], {})
            raise Unsupported(f"{fn.__name__}() with a key function on traced values")
        if all(i.is_constant() for i in items):
            return _fold(lambda *a: fn(a), items, {})
        if any(isinstance(i, TensorVariable) for i in items):
            import torch

            pick = torch.maximum if fn is max else torch.minimum
            acc = items[0]
            for item in items[1:]:
                if isinstance(acc, TensorVariable) and isinstance(item, TensorVariable):
                    acc = tx.output.call_function(pick, [acc, item], {})
                else:
                    raise Unsupported(f"{fn.__name__}() of a tensor and a non-tensor")
            return acc
        raise Unsupported(f"{fn.__name__}() of {', '.join(i.describe() for i in items)}")

    return apply


builtin_rules[max] = _reduce_minmax(max)
builtin_rules[min] = _reduce_minmax(min)


@rule(sum)
def _sum(tx, args, kwargs):
    items = args[0].iterate(tx)
    acc = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    if acc.is_constant() and isinstance(acc.as_constant(), (str, bytes, bytearray)):
        raise raised_error(lambda: sum([], acc.as_constant()))  # sum() can't sum strings
    if _all_constant(items, {"start": acc}):
        return _fold(lambda *a: sum(a, acc.as_constant()), items, {})
    add = builtin_rules[operator.add]
    for item in items:
        acc = add(tx, [acc, item], {})
    return acc


@rule(sorted)
def _sorted(tx, args, kwargs):
    items = args[0].iterate(tx)
    if not all(i.is_constant() for i in items) or not _all_constant([], kwargs):
        raise Unsupported("sorted() of values unknown at trace time")
    if "key" in kwargs and kwargs["key"].as_constant() is not None:
        raise Unsupported("sorted(key=...) on traced values")
    try:
        ordered = sorted(items, key=lambda v: v.as_constant(), reverse=bool(
            kwargs.get("reverse", ConstantVariable(False)).as_constant()))
    except TypeError as e:  # values that do not compare, as in eager
        raise traced_error(e) from e
    return ListVariable(ordered)


@rule(getattr)
def _getattr(tx, args, kwargs):
    obj, name, *default = args
    attr = _attribute_name(getattr, name)
    if not default:
        try:
            return obj.get_attr(tx, attr)
        except MissingAttribute as e:
            if e.exc is None:
                e.exc = _attribute_error(obj, attr)  # eager's message for a handler to see
            raise
    try:
        return obj.get_attr(tx, attr)
    except MissingAttribute:
        return default[0]


def _attribute_error(obj: VariableTracker, attr: str) -> VariableTracker:
    from ._objects import ExceptionVariable, PythonModuleVariable

    if isinstance(obj, PythonModuleVariable):
        message = f"module {obj.module.__name__!r} has no attribute {attr!r}"
    elif obj.is_constant() and isinstance(obj.as_constant(), type):
        message = f"type object {obj.as_constant().__name__!r} has no attribute {attr!r}"
    else:
        message = f"{obj.python_type().__name__!r} object has no attribute {attr!r}"
    return ExceptionVariable(AttributeError, [ConstantVariable(message)])


def _attribute_name(fn: Any, name: VariableTracker) -> str:
    attr = constant_args(f"{fn.__name__}()", [name])[0]
    if type(attr) is not str:  # attribute name must be string
        raise raised_error(lambda: fn(None, attr, None) if fn is setattr else fn(None, attr))
    return attr


@rule(super)
def _super(tx, args, kwargs):
    from ._objects import SuperVariable

    if len(args) == 2:
        cls = args[0].as_constant()
        return SuperVariable(cls, args[1])
    if args:
        raise Unsupported("super() with one argument")
    # zero-argument super(): the method's __class__ cell and its first argument
    cell = tx.cells.get("__class__")
    first = tx.code.co_varnames[0] if tx.code.co_argcount else None
    if cell is None or cell.contents is None or first is None:
        raise Unsupported("super() outside a method")
    contents = tx.realize(cell.contents)
    cell.contents = contents
    owner = tx.cells[first].contents if first in tx.cells else tx.locals.get(first)
    return SuperVariable(contents.as_constant(), tx.realize(owner))


@rule(delattr)
def _delattr(tx, args, kwargs):
    from ._functions import UserMethodVariable
    from ._objects import NewObjectVariable, lookup_class_attribute

    obj, name = args
    attr = _attribute_name(delattr, name)
    if not isinstance(obj, NewObjectVariable):
        raise Unsupported(f"deleting attribute {attr!r} of {obj.describe()}")
    hook = lookup_class_attribute(obj.cls, "__delattr__")
    if hook is not object.__delattr__:
        if not isinstance(hook, types.FunctionType):
            raise Unsupported(f"deleting attribute {attr!r} of {obj.describe()} (its class's __delattr__)")
        return UserMethodVariable(hook, obj).call(tx, [name], {})
    if attr not in obj.attrs:
        raise MissingAttribute(f"{obj.describe()} has no attribute {attr!r} to delete")
    del obj.attrs[attr]
    return ConstantVariable(None)


@rule(setattr)
def _setattr(tx, args, kwargs):
    obj, name, value = args
    obj.store_attr(tx, _attribute_name(setattr, name), value)
    return ConstantVariable(None)


@rule(object.__setattr__)
def _object_setattr(tx, args, kwargs):
    # what frozen dataclasses' __init__ calls: a plain store that skips the class's __setattr__
    from ._objects import NewObjectVariable, UserDefinedObjectVariable

    obj, name, value = args
    attr = constant_args("object.__setattr__()", [name])[0]
    if isinstance(obj, NewObjectVariable):
        obj.store_attr(tx, attr, value, force=True)
    elif isinstance(obj, UserDefinedObjectVariable):
        obj.store_attr(tx, attr, value, raw=True)
    else:
        obj.store_attr(tx, attr, value)
    return ConstantVariable(None)


@rule(inspect.signature)
def _signature(tx, args, kwargs):
    # The signature of a guarded function is fixed by its guard: computed at trace time.
    from ._functions import UserFunctionVariable, UserMethodVariable

    if len(args) != 1 or kwargs:
        raise Unsupported("inspect.signature() with options")
    (fn,) = args
    if isinstance(fn, UserFunctionVariable):
        return FrozenObjectVariable(inspect.signature(fn.fn))
    if isinstance(fn, UserMethodVariable):
        sig = inspect.signature(fn.fn)
        return FrozenObjectVariable(sig.replace(parameters=list(sig.parameters.values())[1:]))
    raise Unsupported(f"inspect.signature() of {fn.describe()}")


def _dataclass_of(v: VariableTracker) -> Any:
    # the class, or the instance's class: what a dataclass query looks at (its identity is
    # guarded wherever the value came from)
    return v.as_constant() if v.is_constant() and isinstance(v.as_constant(), type) else v.python_type()


@rule(dataclasses.fields)
def _dataclass_fields(tx, args, kwargs):
    (obj,) = args
    try:
        fields = dataclasses.fields(_dataclass_of(obj))
    except TypeError as e:  # not a dataclass
        raise traced_error(e) from e
    return TupleVariable([FrozenObjectVariable(f) for f in fields])


@rule(dataclasses.is_dataclass)
def _is_dataclass(tx, args, kwargs):
    (obj,) = args
    return ConstantVariable(dataclasses.is_dataclass(_dataclass_of(obj)))


@rule(copy.copy)
def _copy(tx, args, kwargs):
    (obj,) = args
    return copy_tracker(tx, obj, deep=False)


@rule(copy.deepcopy)
def _deepcopy(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported("copy.deepcopy() with a memo")
    return copy_tracker(tx, args[0], deep=True)


def copy_tracker(tx: Translator, v: VariableTracker, *, deep: bool) -> VariableTracker:
    """The tracker of ``copy.copy(v)`` / ``copy.deepcopy(v)``: constants, tuples, lists,
    dicts and sets, objects created while tracing, and frame objects of plain classes (every
    attribute read, so guarded, then copied). Tensors are not copied in a trace."""
    from ._objects import NewObjectVariable, UserDefinedObjectVariable, plain_copyable

    def inner(item: VariableTracker) -> VariableTracker:
        return copy_tracker(tx, item, deep=True) if deep else item

    if isinstance(v, UserDefinedObjectVariable) and v.source is not None and plain_copyable(type(v.obj)):
        from ._dict_views import instance_dict

        # its attributes as the trace sees them now (keys guarded), every value read
        state = instance_dict(tx, v, v.obj)
        if state is None:
            raise Unsupported(f"copying {v.describe()}, whose __dict__ is not its instance dict")
        new = NewObjectVariable(type(v.obj))
        new.attrs.update({k: inner(state.value_of(tx, k)) for k in state.key_list()})
        return new

    if v.is_constant():
        return v  # immutable: copy and deepcopy give the object itself
    if isinstance(v, TupleVariable):
        return TupleVariable([inner(i) for i in v.items], tuple_type=v.tuple_type) if deep else v
    if isinstance(v, ListVariable):
        return ListVariable([inner(i) for i in v.items])
    if isinstance(v, SetVariable):
        return SetVariable([inner(i) for i in v.items])
    if isinstance(v, DictVariable):  # a frame dict: every value is read (and guarded) now
        return DictVariable({k: inner(i) for k, i in v.items.items()})
    if isinstance(v, NewObjectVariable):
        new = NewObjectVariable(v.cls)
        new.attrs.update({k: inner(a) for k, a in v.attrs.items()})
        if v.items is not None:
            new.items.items.update({k: inner(i) for k, i in v.items.items.items()})
        return new
    raise Unsupported(f"copying {v.describe()} inside a compiled region")


@rule(callable)
def _callable(tx, args, kwargs):
    (obj,) = args
    if obj.is_constant():
        return ConstantVariable(callable(obj.as_constant()))
    # instances are callable when their class (not its metaclass) defines __call__
    return ConstantVariable(any("__call__" in k.__dict__ for k in obj.python_type().__mro__))


@rule(slice)
def _slice(tx, args, kwargs):
    if kwargs or not 1 <= len(args) <= 3 or not _all_constant(args, kwargs):
        raise Unsupported(f"slice() of {', '.join(a.describe() for a in args)}")
    return _fold(slice, args, kwargs)


@rule(hasattr)
def _hasattr(tx, args, kwargs):
    obj, name = args
    attr = _attribute_name(hasattr, name)
    try:
        obj.get_attr(tx, attr)
    except MissingAttribute:
        return ConstantVariable(False)
    return ConstantVariable(True)


def _converter(fn: type) -> Rule:
    def apply(tx, args, kwargs):
        if _all_constant(args, kwargs):
            return _fold(fn, args, kwargs)
        what = args[0].describe() if args else "nothing"
        raise Unsupported(f"{fn.__name__}() of {what} needs its value at trace time")

    return apply


for _fn in (int, float, str, complex):
    builtin_rules[_fn] = _converter(_fn)


@rule(print)
def _print(tx, args, kwargs):
    # printed by the compiled code after the graph ran, with the values of the call
    if "file" in kwargs:
        raise Unsupported("print() to a file inside a compiled region")
    tx.output.replay_call(print, list(args), dict(kwargs))
    return ConstantVariable(None)


@rule(warnings.warn)
def _warn(tx, args, kwargs):
    tx.output.replay_call(warnings.warn, list(args), dict(kwargs))
    return ConstantVariable(None)


def is_builtin_function(value: Any) -> bool:
    """Whether ``value`` is modelled by BuiltinVariable: a rule exists, or it is a function
    of ``builtins``, ``operator`` or ``math`` (folded on constants)."""
    try:
        if value in builtin_rules:
            return True
    except Exception:  # unhashable, or a __hash__ that fails (an object half-built)
        return False
    module = getattr(value, "__module__", None)
    return module in ("builtins", "_operator", "math") and callable(value) and not isinstance(value, type)


from . import _builtins_iteration, _builtins_mapping  # noqa: E402, F401  (register their rules)
