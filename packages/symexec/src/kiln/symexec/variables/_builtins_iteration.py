"""Rules of the iteration builtins: ``iter``, ``next``, ``zip``, ``enumerate``, ``map``,
``filter``, ``reversed``, ``any``, ``all``.

They make the live iterators of ``_iterators``: nothing is read from the arguments before
the iterator is advanced, as in eager Python (``zip(xs, ys)`` over a list changed later
sees the change; ``map``'s function runs when an item is pulled; ``any`` stops at the first
true item). Errors are eager's (``_errors``): ``next`` of an exhausted iterator raises
StopIteration, ``iter`` of a value that is not iterable a TypeError.
"""

from __future__ import annotations

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._builtins import rule
from ._constant import ConstantVariable
from ._containers import DictVariable, IteratorVariable, ListVariable, SetVariable, TupleVariable
from ._errors import raised_error, traced_error
from ._iterators import (
    DictIteratorVariable,
    EnumerateVariable,
    FilterVariable,
    GeneratorVariable,
    MapVariable,
    SequenceIteratorVariable,
    ZipVariable,
)
from ._objects import call_special_method, user_special_method

__all__ = ["make_iterator"]


def make_iterator(tx, v: VariableTracker) -> IteratorVariable:
    """``iter(v)`` as an iterator tracker; eager's TypeError when ``v`` is not iterable."""
    if v.is_constant() and not _iterable(v.as_constant()):
        raise raised_error(lambda: iter(v.as_constant()))
    if user_special_method(v, "__iter__") is not None:
        it = call_special_method(tx, v, "__iter__", [])
        return it if isinstance(it, IteratorVariable) else IteratorVariable(it.iterate(tx))
    it = v.get_iter(tx)
    if not isinstance(it, IteratorVariable):
        raise Unsupported(f"iter() of {v.describe()}")
    return it


def _iterable(value) -> bool:
    try:
        iter(value)
    except TypeError:
        return False
    return True


@rule(iter)
def _iter(tx, args, kwargs):
    if len(args) != 1:
        raise Unsupported("iter() with a sentinel")
    return make_iterator(tx, args[0])


@rule(next)
def _next(tx, args, kwargs):
    it = args[0]
    if not isinstance(it, IteratorVariable):
        next_fn = user_special_method(it, "__next__")
        if next_fn is not None:  # an object whose class defines __next__ in Python
            return _user_next(tx, it, next_fn, args[1] if len(args) == 2 else None)
        if isinstance(it, (ListVariable, TupleVariable, DictVariable, SetVariable)) or it.is_constant():
            sample = it.as_constant() if it.is_constant() else it.python_type()()
            raise raised_error(lambda: next(sample))  # 'list' object is not an iterator
        raise Unsupported(f"next() of {it.describe()}")
    item = it.next_item(tx)
    if item is not None:
        return item
    if len(args) == 2:
        return args[1]
    if isinstance(it, GeneratorVariable):
        raise it.stop_iteration()  # with the generator's return value, as in eager
    raise traced_error(StopIteration())


def _user_next(tx, it, next_fn, default):
    """``next(obj)`` of an object whose ``__next__`` is Python: that method, inlined; its
    StopIteration (value included) goes on as raised, or gives ``default``."""
    from .._unsupported import TracedException
    from ._functions import UserMethodVariable

    method = UserMethodVariable(next_fn, it)
    if default is None:
        return method.call(tx, [], {})
    try:
        return method.call(tx, [], {})
    except TracedException as e:
        if not issubclass(e.exc_type, StopIteration):
            raise
        return default


@rule(zip)
def _zip(tx, args, kwargs):
    strict = kwargs["strict"].as_constant() if "strict" in kwargs else False
    return ZipVariable([make_iterator(tx, a) for a in args], bool(strict))


@rule(enumerate)
def _enumerate(tx, args, kwargs):
    iterable = args[0] if args else kwargs["iterable"]
    start = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    if not start.is_constant():
        raise Unsupported(f"enumerate() starting at {start.describe()}")
    if type(start.as_constant()) not in (int, bool):
        raise raised_error(lambda: enumerate((), start.as_constant()))
    return EnumerateVariable(make_iterator(tx, iterable), start.as_constant())


@rule(map)
def _map(tx, args, kwargs):
    fn, *iterables = args
    return MapVariable(fn, [make_iterator(tx, a) for a in iterables])


@rule(filter)
def _filter(tx, args, kwargs):
    fn, iterable = args
    return FilterVariable(fn, make_iterator(tx, iterable))


@rule(reversed)
def _reversed(tx, args, kwargs):
    from ._dict_views import DictViewVariable

    (seq,) = args
    if isinstance(seq, (ListVariable, TupleVariable)):
        return SequenceIteratorVariable(seq, reverse=True)
    if isinstance(seq, DictVariable):
        return DictIteratorVariable(seq, "keys", reverse=True)
    if isinstance(seq, DictViewVariable):
        return DictIteratorVariable(seq.dict, seq.kind, reverse=True)
    if user_special_method(seq, "__reversed__") is not None:
        return call_special_method(tx, seq, "__reversed__", [])
    if seq.is_constant():
        value = seq.as_constant()
        try:
            items = list(reversed(value))
        except TypeError as e:  # not reversible
            raise traced_error(e) from e
        return IteratorVariable([ConstantVariable(v) for v in items], pytype=type(reversed(value)))
    if isinstance(seq, (IteratorVariable, SetVariable)):
        name = seq.python_type().__name__ if not isinstance(seq, IteratorVariable) or seq.pytype else "generator"
        raise traced_error(TypeError(f"'{name}' object is not reversible"))
    raise Unsupported(f"reversed() of {seq.describe()}")


def _short_circuit(stop_at: bool):
    def apply(tx, args, kwargs):
        it = make_iterator(tx, args[0])
        while (item := it.next_item(tx)) is not None:
            if item.truth(tx) == stop_at:
                return ConstantVariable(stop_at)
        return ConstantVariable(not stop_at)

    return apply


rule(any)(_short_circuit(True))
rule(all)(_short_circuit(False))
