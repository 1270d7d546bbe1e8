"""BuiltinVariable: Python builtins and ``operator``/``math`` functions, one rule each.

``builtin_rules`` maps a function to the rule that models it on trackers. A rule folds
constants at trace time, turns tensor operands into graph nodes, and works on containers
item by item. Binary operators (``x + y`` reaches here as ``operator.add``) dispatch on the
operand kinds: any tensor makes a node; all constants fold; containers concatenate or repeat.
A function without a rule folds when every argument is a constant and is Unsupported
otherwise.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import operator
import types
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._unsupported import MissingAttribute, TracedException, Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable, FrozenObjectVariable, is_constant_value
from ._containers import (
    DictVariable,
    IteratorVariable,
    ListVariable,
    RangeVariable,
    SetVariable,
    TupleVariable,
    constant_args,
)
from ._objects import call_special_method
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
        raise TracedException(f"{getattr(fn, '__name__', fn)} raised {type(e).__name__}: {e}", type(e)) from e
    return wrap_trace_value(result)


def values_equal(tx: Translator, a: VariableTracker, b: VariableTracker) -> bool:
    """``a == b`` decided at trace time (identity for non-constants)."""
    if a.is_constant() and b.is_constant():
        return bool(a.as_constant() == b.as_constant())
    return a is b


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

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        r = builtin_rules.get(self.fn)
        if r is not None:
            return r(tx, args, kwargs)
        if _all_constant(args, kwargs):
            return _fold(self.fn, args, kwargs)
        raise Unsupported(f"{self.describe()} with {', '.join(a.describe() for a in args)}")


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
    seq = (TupleVariable, ListVariable)
    if fn is operator.add and isinstance(a, seq) and type(a) is type(b):
        return type(a)(a.items + b.items)
    if fn is operator.mul and isinstance(a, seq) and b.is_constant():
        return type(a)(a.items * b.as_constant())
    if fn is operator.mul and isinstance(b, seq) and a.is_constant():
        return type(b)(b.items * a.as_constant())
    if fn in _SET_OPS and isinstance(a, SetVariable) and isinstance(b, SetVariable):
        return a.combine(fn, b)
    if fn in (operator.eq, operator.ne) and isinstance(a, seq) and isinstance(b, seq):
        same = len(a.items) == len(b.items) and all(
            _compare(tx, x, y) for x, y in zip(a.items, b.items, strict=True))
        return ConstantVariable(same if fn is operator.eq else not same)
    if fn in (operator.eq, operator.ne) and not (a.is_constant() and b.is_constant()):
        # two objects of different kinds (or non-constants): Python falls back to identity
        same = a is b
        return ConstantVariable(same if fn is operator.eq else not same)
    raise Unsupported(f"{fn.__name__} of {a.describe()} and {b.describe()}")


_SET_OPS = (operator.or_, operator.and_, operator.sub, operator.xor)


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
    if isinstance(a, SetVariable) and plain in _SET_OPS and isinstance(b, SetVariable):
        a.items = a.combine(plain, b).items
        return a
    if isinstance(a, DictVariable) and plain is operator.or_ and isinstance(b, DictVariable):
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
    for x, y in ((a, b), (b, a)):
        # a number the graph takes is never the same object as a constant of another type;
        # answered without its value (which would specialize it)
        if isinstance(x, SymNumberVariable) and not isinstance(y, SymNumberVariable) \
                and y.is_constant() and type(y.as_constant()) is not x.python_type():
            return ConstantVariable(False)
    if a.is_constant() and b.is_constant():
        same = a.as_constant() is b.as_constant()
    else:
        same = a is b
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
    return obj.call_method(tx, "__setitem__", [key, value], {})


@rule(operator.delitem)
def _delitem(tx, args, kwargs):
    obj, key = args
    return obj.call_method(tx, "__delitem__", [key], {})


@rule(operator.contains)
def _contains(tx, args, kwargs):
    from ._environ import EnvironVariable

    container, item = args
    if isinstance(container, (DictVariable, SetVariable, EnvironVariable)):
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
    (obj,) = args
    if isinstance(obj, TensorVariable):
        n = obj.fake.shape[0] if obj.fake.dim() else None
        if n is None:
            raise Unsupported("len() of a 0-d tensor")
        return ConstantVariable(n)
    if isinstance(obj, DictVariable):
        return ConstantVariable(len(obj.items))
    if obj.is_constant():
        return _fold(len, args, kwargs)
    n = call_special_method(tx, obj, "__len__", [])
    if n is not None:
        return n
    return ConstantVariable(len(obj.iterate(tx)))


@rule(isinstance)
def _isinstance(tx, args, kwargs):
    obj, classes = args
    cls = classes.as_constant()
    return ConstantVariable(_issubclass_of(obj.python_type(), cls))


def _issubclass_of(tp: type, cls: Any) -> bool:
    if isinstance(cls, tuple):
        return any(_issubclass_of(tp, c) for c in cls)
    return issubclass(tp, cls)


@rule(issubclass)
def _issubclass(tx, args, kwargs):
    return ConstantVariable(_issubclass_of(args[0].as_constant(), args[1].as_constant()))


@rule(type)
def _type(tx, args, kwargs):
    if len(args) != 1:
        raise Unsupported("type() with three arguments (creating a class)")
    from ._objects import UserDefinedClassVariable

    tp = args[0].python_type()
    return ConstantVariable(tp) if is_constant_value(tp) else UserDefinedClassVariable(tp)


@rule(range)
def _range(tx, args, kwargs):
    return RangeVariable(range(*constant_args("range()", args)))


def _make_sequence(kind: type) -> Rule:
    def apply(tx, args, kwargs):
        items = args[0].iterate(tx) if args else []
        return TupleVariable(items) if kind is tuple else ListVariable(items)

    return apply


builtin_rules[tuple] = _make_sequence(tuple)
builtin_rules[list] = _make_sequence(list)


@rule(dict)
def _dict(tx, args, kwargs):
    items: dict[Any, VariableTracker] = {}
    if args:
        src = args[0]
        if isinstance(src, DictVariable):
            items.update(src.items)
        else:
            for pair in src.iterate(tx):
                k, v = pair.iterate(tx)
                items[constant_args("a dict key", [k])[0]] = v
    items.update(kwargs)
    return DictVariable(items)


@rule(set, frozenset)
def _set(tx, args, kwargs):
    return SetVariable(args[0].iterate(tx) if args else [])


@rule(zip)
def _zip(tx, args, kwargs):
    strict = kwargs.get("strict", ConstantVariable(False)).as_constant()
    columns = [a.iterate(tx) for a in args]
    if strict and len({len(c) for c in columns}) > 1:
        raise Unsupported("zip(strict=True) of sequences of different lengths")
    return TupleVariable([TupleVariable(list(row)) for row in zip(*columns, strict=False)])


@rule(enumerate)
def _enumerate(tx, args, kwargs):
    start = kwargs["start"].as_constant() if "start" in kwargs else (
        args[1].as_constant() if len(args) > 1 else 0)
    return TupleVariable([TupleVariable([ConstantVariable(i + start), v])
                          for i, v in enumerate(args[0].iterate(tx))])


@rule(reversed)
def _reversed(tx, args, kwargs):
    return TupleVariable(list(reversed(args[0].iterate(tx))))


@rule(map)
def _map(tx, args, kwargs):
    fn, *seqs = args
    columns = [s.iterate(tx) for s in seqs]
    return TupleVariable([fn.call(tx, list(row), {}) for row in zip(*columns, strict=False)])


@rule(filter)
def _filter(tx, args, kwargs):
    fn, seq = args
    items = seq.iterate(tx)
    if fn.is_constant() and fn.as_constant() is None:
        return TupleVariable([v for v in items if v.truth(tx)])
    return TupleVariable([v for v in items if fn.call(tx, [v], {}).truth(tx)])


@rule(any)
def _any(tx, args, kwargs):
    return ConstantVariable(any(v.truth(tx) for v in args[0].iterate(tx)))


@rule(all)
def _all(tx, args, kwargs):
    return ConstantVariable(all(v.truth(tx) for v in args[0].iterate(tx)))


def _reduce_minmax(fn: Any) -> Rule:
    def apply(tx, args, kwargs):
        if kwargs:
            if _all_constant(args, kwargs):
                return _fold(fn, args, kwargs)
            raise Unsupported(f"{fn.__name__}() with keyword arguments on traced values")
        items = args[0].iterate(tx) if len(args) == 1 else list(args)
        if not items:
            raise Unsupported(f"{fn.__name__}() of an empty sequence")
        if all(i.is_constant() for i in items):
            return ConstantVariable(fn(i.as_constant() for i in items))
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
    add = builtin_rules[operator.add]
    for item in items:
        acc = add(tx, [acc, item], {})
    return acc


@rule(sorted)
def _sorted(tx, args, kwargs):
    items = args[0].iterate(tx)
    if not all(i.is_constant() for i in items) or not _all_constant([], kwargs):
        raise Unsupported("sorted() of values unknown at trace time")
    ordered = sorted(items, key=lambda v: v.as_constant(), reverse=bool(
        kwargs.get("reverse", ConstantVariable(False)).as_constant()))
    if "key" in kwargs and kwargs["key"].as_constant() is not None:
        raise Unsupported("sorted(key=...) on traced values")
    return ListVariable(ordered)


@rule(getattr)
def _getattr(tx, args, kwargs):
    obj, name, *default = args
    attr = constant_args("getattr()", [name])[0]
    if not default:
        return obj.get_attr(tx, attr)
    try:
        return obj.get_attr(tx, attr)
    except MissingAttribute:
        return default[0]


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
    attr = constant_args("delattr()", [name])[0]
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
    obj.store_attr(tx, constant_args("setattr()", [name])[0], value)
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
    return TupleVariable([FrozenObjectVariable(f) for f in dataclasses.fields(_dataclass_of(obj))])


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
        from kiln.guards import GenericAttrSource

        # its instance dict as the builder wraps any frame dict (keys guarded), every value read
        state = tx.builder.wrap(object.__getattribute__(v.obj, "__dict__"), GenericAttrSource(v.source, "__dict__"))
        new = NewObjectVariable(type(v.obj))
        new.attrs.update({k: inner(i) for k, i in state.items.items()})
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
    attr = constant_args("hasattr()", [name])[0]
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


@rule(iter)
def _iter(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported("iter() with a sentinel")
    if isinstance(args[0], IteratorVariable):
        return args[0]  # an iterator's iter() is itself
    return IteratorVariable(args[0].iterate(tx))


@rule(next)
def _next(tx, args, kwargs):
    it = args[0] if args else None
    if not isinstance(it, IteratorVariable) or len(args) > 2 or kwargs:
        raise Unsupported(f"next() of {it.describe() if it is not None else 'nothing'}")
    if it.index < len(it.items):
        it.index += 1
        return it.items[it.index - 1]
    if len(args) == 2:
        return args[1]
    raise TracedException("next() of an exhausted iterator raised StopIteration", StopIteration)


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
