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
rule runs), and each rule's errors of wrong types or values. Operators are in
``_builtins_operators``, iteration builtins in ``_builtins_iteration``, mappings and frame
namespaces (``dict``, ``locals``, ``vars``) in ``_builtins_mapping``.
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
from ._symnumber import SymNumberVariable, convert
from ._tensor import TensorVariable
from ._wrap import wrap_trace_value

if TYPE_CHECKING:
    from .._translator import Translator

__all__ = ["BuiltinVariable", "builtin_rules", "is_builtin_function", "values_equal"]

Rule = Callable[["Translator", list[VariableTracker], dict[str, VariableTracker]], VariableTracker]
builtin_rules: dict[Any, Rule] = {}



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
    # the values first: a tracker that is no constant is kiln's limit (Unsupported), not an
    # error of the user's code that its own except clause could catch
    values = [a.as_constant() for a in args]
    named = {k: v.as_constant() for k, v in kwargs.items()}
    try:
        result = fn(*values, **named)
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
        if _has_rule(value):  # a builtin's method with a rule of its own (``dict.fromkeys``)
            return BuiltinVariable(value)
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


def _has_rule(value: Any) -> bool:
    try:
        return value in builtin_rules
    except Exception:  # unhashable, or a __hash__ that fails
        return False


# What a call of these does depends on the calling frame or changes the world outside the
# trace: folded at trace time they would answer for kiln's own frame, or happen once.
_NEVER_FOLDED = frozenset({globals, eval, exec, input, open, breakpoint, __import__, help, id})


# -- builtins ----------------------------------------------------------------------------------

@rule(len)
def _len(tx, args, kwargs):
    from ._dict_views import DictViewVariable

    (obj,) = args
    if isinstance(obj, TensorVariable):
        if not obj.fake.dim():
            raise traced_error(TypeError("len() of a 0-d tensor"))
        return obj.call_method(tx, "size", [ConstantVariable(0)], {})
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
        def size(v):
            return isinstance(v, SymNumberVariable) and v.symbolic

        if any(size(i) for i in items) and all(
                size(i) or (type(i) is ConstantVariable and type(i.as_constant()) is int) for i in items):
            # sizes: the winner is chosen by comparisons the ShapeEnv keeps as guards (a
            # relation, not the value), as Python's max/min would (the first of equals)
            def value(v):
                return v.example if isinstance(v, SymNumberVariable) else v.as_constant()

            best = items[0]
            for item in items[1:]:
                if bool(value(item) > value(best)) if fn is max else bool(value(item) < value(best)):
                    best = item
            return best
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
    key = kwargs.get("key", ConstantVariable(None))
    if not key.is_constant() or key.as_constant() is not None:
        # the key function traced once per item, in order, as eager calls it; its results
        # must be known at trace time (the order they give is then eager's)
        keys = [key.call(tx, [i], {}) for i in items]
    else:
        keys = items
    if not all(k.is_constant() for k in keys) or not _all_constant([], {k: v for k, v in kwargs.items() if k != "key"}):
        raise Unsupported("sorted() of values unknown at trace time")
    try:
        order = sorted(range(len(items)), key=lambda i: keys[i].as_constant(), reverse=bool(
            kwargs.get("reverse", ConstantVariable(False)).as_constant()))
        ordered = [items[i] for i in order]
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
    from ._objects import NewObjectVariable

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
    from ._objects import NewObjectVariable, plain_copyable

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
        if fn in (int, float) and len(args) == 1 and not kwargs:
            value = args[0]
            if isinstance(value, TensorVariable) and _static_numel(value) == 1:  # ``int(t)``: ``t.item()``
                value = value.call_method(tx, "item", [], {})
            if isinstance(value, SymNumberVariable) and value.unbacked:
                return convert(tx.output, fn, value)  # a data-dependent number stays in the graph
        if _all_constant(args, kwargs):
            return _fold(fn, args, kwargs)
        what = args[0].describe() if args else "nothing"
        raise Unsupported(f"{fn.__name__}() of {what} needs its value at trace time")

    return apply


def _static_numel(t: TensorVariable) -> int | None:
    n = t.fake.numel()
    return n if type(n) is int else None


for _fn in (int, float, complex):  # str: _builtins_text
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


from . import (  # noqa: E402, F401  (register their rules)
    _builtins_iteration,
    _builtins_mapping,
    _builtins_text,
    _defaultdict,
    _deque,
    _itertools,
    _operator_getters,
)
from ._builtins_operators import values_equal  # noqa: E402  (registers the operator rules)
