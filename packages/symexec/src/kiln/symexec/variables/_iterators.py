"""Live iterators: iterators over containers the trace may still change, and the lazy builtins.

Python's iterators read their container when they are advanced, not when they are made:
``it = iter(xs); xs.append(t); list(it)`` sees ``t``, ``zip``/``enumerate``/``map``/
``filter`` pull from their arguments one item at a time (``map`` calls its function then),
and a dict iterator raises ``RuntimeError`` when the dict changed size since it was made.
The trackers here do the same on trackers: each ``next_item(tx)`` reads the container as it
is at that point of the trace.

A traced generator (``GeneratorVariable``) is run to its end when it is called: it is
its yields, and the value its ``return`` gave (what ``x = yield from gen()`` receives). An
object of a user class with a Python ``__next__`` (``UserIteratorVariable``, made when its
class's ``__iter__`` returns such an object) is advanced by inlining ``__next__`` one item
at a time; the StopIteration it raises ends it.

Invariants: an exhausted iterator stays exhausted (as CPython's do, even if its list grows
later); ``reconstruct`` rebuilds, in replacement code, a real iterator positioned where the
trace left this one (at a graph break, or when it is returned), from the real container.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._unsupported import TracedException, Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable
from ._containers import IteratorVariable, TupleVariable
from ._errors import traced_error

if TYPE_CHECKING:
    from .._translator import Translator

__all__ = ["DictIteratorVariable", "EnumerateVariable", "FilterVariable", "GeneratorVariable", "MapVariable",
           "SequenceIteratorVariable", "SetIteratorVariable", "UserIteratorVariable", "ZipVariable",
           "advanced"]

Expr = Callable[[VariableTracker], str]
Ref = Callable[[Any], str]


_CHANGED: Any = object()  # a dict iterator's version once its dict changed size


def advanced(it: Any, n: int) -> Any:
    """``it`` after ``n`` calls of ``next`` (replacement code positions rebuilt iterators)."""
    for _ in range(n):
        next(it)
    return it


class SequenceIteratorVariable(IteratorVariable):
    """``iter(list)`` / ``iter(tuple)`` (``reverse``: ``reversed(...)``): reads the
    sequence tracker's items at each step, as ``list_iterator`` reads the list."""

    __slots__ = ("position", "reverse", "seq")

    def __init__(self, seq: VariableTracker, reverse: bool = False) -> None:
        sample = [] if seq.python_type() is list else ()
        super().__init__([], pytype=type(reversed(sample) if reverse else iter(sample)))
        self.seq: VariableTracker | None = seq
        self.reverse = reverse
        self.position = len(seq.items) - 1 if reverse else 0

    def next_item(self, tx: Translator) -> VariableTracker | None:
        if self.seq is None:
            return None
        items = self.seq.items
        if 0 <= self.position < len(items):
            item = items[self.position]
            self.position += -1 if self.reverse else 1
            self.index += 1
            return item
        self.seq = None
        return None

    def reconstruct(self, expr: Expr, ref: Ref) -> str:
        if self.seq is None:
            return "iter(())"
        n = len(self.seq.items)
        if self.reverse:
            if not 0 <= self.position < n:
                return "iter(())"
            return f"{ref(advanced)}(reversed({expr(self.seq)}), {n - 1 - self.position})"
        return f"{ref(advanced)}(iter({expr(self.seq)}), {self.position})"


class DictIteratorVariable(IteratorVariable):
    """An iterator over a dict tracker's keys, values or items (``kind``), possibly
    reversed: the keys as they are at each step; a size change since the iterator was made
    raises RuntimeError, as in CPython. Other key changes (same size) are not modelled."""

    __slots__ = ("dict", "keys", "kind", "reverse", "version")

    _TYPES = {(kind, rev): type((reversed if rev else iter)(getattr({}, kind)()))
              for kind in ("keys", "values", "items") for rev in (False, True)}

    def __init__(self, d: VariableTracker, kind: str = "keys", reverse: bool = False) -> None:
        super().__init__([], pytype=self._TYPES[kind, reverse])
        self.dict: VariableTracker | None = d
        self.kind = kind
        self.reverse = reverse
        self.keys = list(d.key_list())
        self.version = d.key_version()

    def next_item(self, tx: Translator) -> VariableTracker | None:
        if self.dict is None:
            return None
        if self.version is _CHANGED or self.dict.key_count() != len(self.keys):
            self.version = _CHANGED  # keeps raising, as CPython's does
            raise traced_error(RuntimeError("dictionary changed size during iteration"))
        if self.dict.key_version() != self.version:
            if self.dict.key_list() != self.keys:
                raise Unsupported("iterating over a dict whose keys changed (same size) while iterating")
            self.version = self.dict.key_version()
        if self.index >= len(self.keys):
            self.dict = None
            return None
        key = self.keys[len(self.keys) - 1 - self.index] if self.reverse else self.keys[self.index]
        self.index += 1
        if self.kind == "keys":
            return ConstantVariable(key)
        value = self.dict.value_of(tx, key)
        return value if self.kind == "values" else TupleVariable([ConstantVariable(key), value])

    def reconstruct(self, expr: Expr, ref: Ref) -> str:
        if self.dict is None:
            return "iter(())"
        if self.dict.key_count() != len(self.keys):
            raise Unsupported("passing on an iterator of a dict that changed size")
        view = f"{expr(self.dict)}.{self.kind}()"
        return f"{ref(advanced)}({'reversed' if self.reverse else 'iter'}({view}), {self.index})"


class SetIteratorVariable(IteratorVariable):
    """``iter(set)``: the set's items in the trace's order; a size change raises."""

    __slots__ = ("set",)

    def __init__(self, s: VariableTracker) -> None:
        super().__init__(s.ordered(), pytype=type(iter(set())))
        self.set = s

    def next_item(self, tx: Translator) -> VariableTracker | None:
        if self.set is None or (self.index < len(self.items) and len(self.set.items) != len(self.items)):
            self.set = None  # keeps raising, as CPython's does
            raise traced_error(RuntimeError("Set changed size during iteration"))
        return super().next_item(tx)


class EnumerateVariable(IteratorVariable):
    """``enumerate(iterable, start)``: pulls one item at a time."""

    __slots__ = ("count", "inner")

    def __init__(self, inner: IteratorVariable, start: int) -> None:
        super().__init__([], pytype=enumerate)
        self.inner = inner
        self.count = start

    def next_item(self, tx: Translator) -> VariableTracker | None:
        item = self.inner.next_item(tx)
        if item is None:
            return None
        self.count += 1
        return TupleVariable([ConstantVariable(self.count - 1), item])

    def reconstruct(self, expr: Expr, ref: Ref) -> str:
        return f"enumerate({self.inner.reconstruct(expr, ref)}, {self.count})"


class ZipVariable(IteratorVariable):
    """``zip(*iterables, strict=...)``: one item from each in turn, stopping (or, strict,
    raising ValueError) at the first exhausted one, as CPython does."""

    __slots__ = ("done", "inners", "strict")

    def __init__(self, inners: list[IteratorVariable], strict: bool) -> None:
        super().__init__([], pytype=zip)
        self.inners = inners
        self.strict = strict
        self.done = not inners

    def next_item(self, tx: Translator) -> VariableTracker | None:
        if self.done:
            return None
        row = []
        for i, inner in enumerate(self.inners):
            item = inner.next_item(tx)
            if item is None:
                self.done = True
                if self.strict:
                    self._check_strict(tx, i)
                return None
            row.append(item)
        return TupleVariable(row)

    def _check_strict(self, tx: Translator, i: int) -> None:
        plural = "s 1-" if i > 1 else " "
        if i:
            message = f"zip() argument {i + 1} is shorter than argument{plural}{i}"
            raise traced_error(ValueError(message))
        for j, inner in enumerate(self.inners[1:], start=1):
            if inner.next_item(tx) is not None:
                plural = "s 1-" if j > 1 else " "
                message = f"zip() argument {j + 1} is longer than argument{plural}{j}"
                raise traced_error(ValueError(message))

    def reconstruct(self, expr: Expr, ref: Ref) -> str:
        if self.done:
            return "iter(())"
        parts = [i.reconstruct(expr, ref) for i in self.inners]
        return f"zip({', '.join(parts)}{', strict=True' if self.strict else ''})"


class MapVariable(IteratorVariable):
    """``map(fn, *iterables)``: ``fn`` is called (traced) when an item is pulled."""

    __slots__ = ("fn", "zipped")

    def __init__(self, fn: VariableTracker, inners: list[IteratorVariable]) -> None:
        super().__init__([], pytype=map)
        self.fn = fn
        self.zipped = ZipVariable(inners, strict=False)

    def next_item(self, tx: Translator) -> VariableTracker | None:
        row = self.zipped.next_item(tx)
        return None if row is None else self.fn.call(tx, list(row.items), {})

    def reconstruct(self, expr: Expr, ref: Ref) -> str:
        parts = [i.reconstruct(expr, ref) for i in self.zipped.inners]
        return f"map({expr(self.fn)}, {', '.join(parts)})"


class FilterVariable(IteratorVariable):
    """``filter(fn, iterable)`` (``fn`` None: the items' truth), pulled one item at a time."""

    __slots__ = ("fn", "inner")

    def __init__(self, fn: VariableTracker, inner: IteratorVariable) -> None:
        super().__init__([], pytype=filter)
        self.fn = fn
        self.inner = inner

    def next_item(self, tx: Translator) -> VariableTracker | None:
        while True:
            item = self.inner.next_item(tx)
            if item is None:
                return None
            keep = item if self.fn.is_constant() and self.fn.as_constant() is None else \
                self.fn.call(tx, [item], {})
            if keep.truth(tx):
                return item

    def reconstruct(self, expr: Expr, ref: Ref) -> str:
        return f"filter({expr(self.fn)}, {self.inner.reconstruct(expr, ref)})"


class GeneratorVariable(IteratorVariable):
    """A traced generator, run to its end when called: its yields, and ``value``, the
    tracker of what its ``return`` gave (the StopIteration's value)."""

    __slots__ = ("value",)

    def __init__(self, items: list[VariableTracker], value: VariableTracker) -> None:
        super().__init__(items)
        self.value = value

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name == "__next__" and not args and not kwargs:
            item = self.next_item(tx)
            if item is None:
                raise self.stop_iteration()
            return item
        return super().call_method(tx, name, args, kwargs)

    def stop_iteration(self) -> TracedException:
        """The StopIteration an exhausted ``__next__`` raises, carrying the return value."""
        from ._objects import ExceptionVariable

        plain = self.value.is_constant() and self.value.as_constant() is None
        return TracedException("StopIteration", StopIteration,
                               ExceptionVariable(StopIteration, [] if plain else [self.value]))


class UserIteratorVariable(IteratorVariable):
    """An object whose class defines ``__next__`` in Python, iterated: ``next_method`` (the
    bound ``__next__``'s tracker) is called for each item, also after a StopIteration (as
    CPython calls it again: the class decides whether it stays exhausted)."""

    __slots__ = ("next_method", "obj")

    def __init__(self, obj: VariableTracker, next_method: VariableTracker) -> None:
        super().__init__([], pytype=obj.python_type())
        self.obj = obj
        self.next_method = next_method

    def describe(self) -> str:
        return f"the iterator {self.obj.describe()}"

    def next_item(self, tx: Translator) -> VariableTracker | None:
        try:
            item = self.next_method.call(tx, [], {})
        except TracedException as e:
            if not issubclass(e.exc_type, StopIteration):
                raise
            return None
        self.index += 1
        return item

    def reconstruct(self, expr: Expr, ref: Ref) -> str:
        return expr(self.obj)  # the object is its own iterator, in the state the trace left it
