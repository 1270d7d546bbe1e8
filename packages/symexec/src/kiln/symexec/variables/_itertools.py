"""Rules of the lazy ``itertools``: ``chain``, ``chain.from_iterable``, ``accumulate``,
``count`` and ``repeat``.

Each makes an iterator tracker that pulls from its inputs only when it is advanced, as eager
does (``accumulate``'s function runs when an item is pulled), so a loop over it unrolls item
by item and tensor items stay tensors. ``count()`` and ``repeat()`` without a number of
times are unbounded: advancing them works (``zip(count(), xs)``), reading all their items is
Unsupported. The itertools that only rearrange their inputs' items (``product``,
``combinations``, ``islice``, ...) are run for real on lists of trackers (``_containers``).
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._builtins import builtin_rules, rule
from ._builtins_iteration import make_iterator
from ._constant import ConstantVariable
from ._containers import IteratorVariable
from ._errors import raised_error

__all__ = ["AccumulateVariable", "ChainVariable", "UnboundedVariable"]


class _LazyIterator(IteratorVariable):
    """An iterator whose items are computed as it is advanced (``items`` stays empty)."""

    __slots__ = ()

    def __init__(self, pytype: type) -> None:
        super().__init__([], pytype=pytype)

    def describe(self) -> str:
        return f"an itertools.{self.pytype.__name__} iterator"

    def reconstruct(self, expr, ref) -> str:
        raise Unsupported(f"{self.describe()} outliving the compiled region")


class ChainVariable(_LazyIterator):
    """``chain(*its)`` / ``chain.from_iterable(outer)``: each iterable of ``outer`` in turn."""

    __slots__ = ("current", "outer")

    def __init__(self, outer: IteratorVariable) -> None:
        super().__init__(itertools.chain)
        self.outer = outer
        self.current: IteratorVariable | None = None

    def next_item(self, tx) -> VariableTracker | None:
        while True:
            if self.current is not None:
                item = self.current.next_item(tx)
                if item is not None:
                    return item
            inner = self.outer.next_item(tx)
            if inner is None:
                return None
            self.current = make_iterator(tx, inner)


class AccumulateVariable(_LazyIterator):
    """``accumulate(it, fn, initial=...)``: running results of ``fn`` (``+`` by default)."""

    __slots__ = ("fn", "source_it", "total")

    def __init__(self, source_it: IteratorVariable, fn: VariableTracker | None,
                 initial: VariableTracker | None) -> None:
        super().__init__(itertools.accumulate)
        self.source_it = source_it
        self.fn = fn
        self.total = initial
        self.items = [initial] if initial is not None else []  # given out first

    def next_item(self, tx) -> VariableTracker | None:
        if self.index < len(self.items):
            return super().next_item(tx)
        item = self.source_it.next_item(tx)
        if item is None:
            return None
        if self.total is None:
            self.total = item
        elif self.fn is None:
            self.total = builtin_rules[operator.add](tx, [self.total, item], {})
        else:
            self.total = self.fn.call(tx, [self.total, item], {})
        return self.total


class UnboundedVariable(_LazyIterator):
    """``count(start, step)`` or ``repeat(value)``: items without end."""

    __slots__ = ("step", "value")

    def __init__(self, pytype: type, value: VariableTracker, step: Any = None) -> None:
        super().__init__(pytype)
        self.value = value
        self.step = step

    def next_item(self, tx) -> VariableTracker | None:
        item = self.value
        if self.step is not None:
            self.value = ConstantVariable(item.as_constant() + self.step)
        return item

    def iterate(self, tx) -> list[VariableTracker]:
        raise Unsupported(f"reading every item of {self.describe()}, which has no end")


def _option(v: VariableTracker | None) -> VariableTracker | None:
    return None if v is None or (v.is_constant() and v.as_constant() is None) else v


@rule(itertools.chain)
def _chain(tx, args, kwargs):
    if kwargs:
        raise raised_error(lambda: itertools.chain(**dict.fromkeys(kwargs)))
    return ChainVariable(IteratorVariable(list(args)))


@rule(itertools.chain.from_iterable)
def _chain_from_iterable(tx, args, kwargs):
    (outer,) = args
    return ChainVariable(make_iterator(tx, outer))


@rule(itertools.accumulate)
def _accumulate(tx, args, kwargs):
    iterable, *fn = args
    func = _option(fn[0] if fn else kwargs.get("func"))
    return AccumulateVariable(make_iterator(tx, iterable), func, _option(kwargs.get("initial")))


@rule(itertools.count)
def _count(tx, args, kwargs):
    start = args[0] if args else kwargs.get("start", ConstantVariable(0))
    step = args[1] if len(args) > 1 else kwargs.get("step", ConstantVariable(1))
    if not (start.is_constant() and step.is_constant()):
        raise Unsupported("itertools.count() of values unknown at trace time")
    try:
        itertools.count(start.as_constant(), step.as_constant())
    except TypeError as e:  # a number is required
        raise raised_error(lambda: itertools.count(start.as_constant(), step.as_constant())) from e
    return UnboundedVariable(itertools.count, start, step.as_constant())


@rule(itertools.repeat)
def _repeat(tx, args, kwargs):
    value, *times = args
    times = times or ([kwargs["times"]] if "times" in kwargs else [])
    if not times:
        return UnboundedVariable(itertools.repeat, value)
    if not times[0].is_constant():
        raise Unsupported("itertools.repeat() a number of times unknown at trace time")
    n = times[0].as_constant()
    if type(n) is not int:
        raise raised_error(lambda: itertools.repeat(None, n))
    return IteratorVariable([value] * max(n, 0), pytype=itertools.repeat)
