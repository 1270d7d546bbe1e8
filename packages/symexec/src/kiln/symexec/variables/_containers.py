"""Containers: tuples, lists, dicts and ranges whose items are trackers.

Containers are modelled item by item, so ``x, y = pair`` or ``for layer in layers`` unrolls at
trace time. Lists and dicts are mutable: a mutation changes the tracker (never the real
object) and marks it ``mutated``; after the graph runs, the generated code replays the final
contents onto the real object when the container came from the frame (it has a source).
Invariant: one tracker per real container (the builder caches them by source), so aliases
see each other's mutations.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from .._unsupported import TracedException, Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["DictVariable", "FrameDictVariable", "IteratorVariable", "ListVariable", "RangeVariable", "SetVariable", "TupleVariable", "constant_args"]


def constant_args(what: str, args: list[VariableTracker]) -> list[Any]:
    """The constant values of ``args``, or Unsupported naming ``what``."""
    for a in args:
        if not a.is_constant():
            raise Unsupported(f"{what} needs values known at trace time, got {a.describe()}")
    return [a.as_constant() for a in args]


def _index(tx: Translator, container: VariableTracker, key: VariableTracker) -> Any:
    if not key.is_constant():
        raise Unsupported(f"indexing {container.describe()} with {key.describe()}")
    return key.as_constant()


def field_names(tuple_type: type) -> tuple[str, ...] | None:
    """Names of a namedtuple's or struct sequence's fields (``torch.return_types``), or None."""
    fields = getattr(tuple_type, "_fields", None)
    if fields is None and tuple_type is not tuple:
        fields = getattr(tuple_type, "__match_args__", None)  # struct sequences
    return tuple(fields) if fields is not None else None


class _Sequence(VariableTracker):
    __slots__ = ("items",)

    def __init__(self, items: list[VariableTracker], source: Source | None = None) -> None:
        super().__init__(source)
        self.items = list(items)

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        return list(self.items)

    def truth(self, tx: Translator) -> bool:
        return bool(self.items)

    def getitem(self, tx: Translator, key: VariableTracker) -> VariableTracker:
        k = _index(tx, self, key)
        if isinstance(k, slice):
            return type(self)(self.items[k])
        try:
            return self.items[k]
        except (IndexError, TypeError) as e:
            raise TracedException(f"{self.describe()}[{k!r}]: {e}", type(e)) from e

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__" and not args:
            return ConstantVariable(len(self.items))
        if name in ("index", "count") and not kwargs:
            from ._builtins import values_equal

            target = args[0]
            hits = [i for i, v in enumerate(self.items) if values_equal(tx, v, target)]
            if name == "count":
                return ConstantVariable(len(hits))
            if not hits:
                raise Unsupported(f"{self.describe()}.index: value not found")
            return ConstantVariable(hits[0])
        raise Unsupported(f"method {name!r} of {self.describe()} is not supported")


class TupleVariable(_Sequence):
    """A tuple (also ``torch.Size`` and namedtuples, through ``tuple_type``)."""

    __slots__ = ("tuple_type",)

    def __init__(self, items: list[VariableTracker], source: Source | None = None,
                 tuple_type: type = tuple) -> None:
        super().__init__(items, source)
        self.tuple_type = tuple_type

    def python_type(self) -> type:
        return self.tuple_type

    def is_constant(self) -> bool:
        return self.tuple_type is tuple and all(i.is_constant() for i in self.items)

    def as_constant(self) -> Any:
        if not self.is_constant():
            return super().as_constant()
        return tuple(i.as_constant() for i in self.items)

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        fields = field_names(self.tuple_type)
        if fields is not None and name in fields:
            return self.items[fields.index(name)]
        return super().get_attr(tx, name)

    def getitem(self, tx: Translator, key: VariableTracker) -> VariableTracker:
        k = _index(tx, self, key)
        if isinstance(k, slice):
            return TupleVariable(self.items[k])
        return super().getitem(tx, key)


class ListVariable(_Sequence):
    """A list; mutations are tracked (see the module docstring)."""

    __slots__ = ("mutated",)

    def __init__(self, items: list[VariableTracker], source: Source | None = None) -> None:
        super().__init__(items, source)
        self.mutated = False

    def python_type(self) -> type:
        return list

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        items = self.items
        none = ConstantVariable(None)
        if kwargs and name != "sort":
            raise Unsupported(f"list.{name} with keyword arguments")
        if name == "append" and len(args) == 1:
            items.append(args[0])
        elif name == "extend" and len(args) == 1:
            items.extend(args[0].iterate(tx))
        elif name == "insert" and len(args) == 2:
            items.insert(_index(tx, self, args[0]), args[1])
        elif name == "pop" and len(args) <= 1:
            i = _index(tx, self, args[0]) if args else -1
            if not items:
                raise Unsupported(f"pop from empty {self.describe()}")
            result = items.pop(i)
            self.mutated = True
            return result
        elif name == "clear" and not args:
            items.clear()
        elif name == "reverse" and not args:
            items.reverse()
        elif name == "sort" and not args and set(kwargs) <= {"reverse"}:
            if not all(i.is_constant() for i in items):
                raise Unsupported(f"sorting {self.describe()}, whose items are unknown at trace time")
            reverse = bool(kwargs["reverse"].as_constant()) if "reverse" in kwargs else False
            items.sort(key=lambda v: v.as_constant(), reverse=reverse)
        elif name == "__setitem__" and len(args) == 2:
            k = _index(tx, self, args[0])
            if isinstance(k, slice):
                items[k] = args[1].iterate(tx)
            else:
                items[k] = args[1]
        elif name == "__delitem__" and len(args) == 1:
            del items[_index(tx, self, args[0])]
        elif name == "remove" and len(args) == 1:
            from ._builtins import values_equal

            for i, v in enumerate(items):
                if values_equal(tx, v, args[0]):
                    del items[i]
                    break
            else:
                raise Unsupported(f"{self.describe()}.remove: value not found")
        elif name == "copy" and not args:
            return ListVariable(list(items))
        else:
            return super().call_method(tx, name, args, kwargs)
        self.mutated = True
        return none


class DictVariable(VariableTracker):
    """A dict with keys known at trace time; mutations are tracked like lists'."""

    __slots__ = ("items", "mutated")

    def __init__(self, items: dict[Any, VariableTracker], source: Source | None = None) -> None:
        super().__init__(source)
        self.items = dict(items)
        self.mutated = False

    def python_type(self) -> type:
        return dict

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in self.items]

    def truth(self, tx: Translator) -> bool:
        return bool(self.items)

    def getitem(self, tx: Translator, key: VariableTracker) -> VariableTracker:
        k = _index(tx, self, key)
        if k not in self.items:
            raise TracedException(f"key {k!r} is not in {self.describe()}", KeyError)
        return self.items[k]

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        items = self.items
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(_index(tx, self, args[0]) in items)
        if name == "__len__" and not args:
            return ConstantVariable(len(items))
        if name == "keys" and not args:
            return DictKeysVariable(self)
        if name == "values" and not args:
            return TupleVariable(list(items.values()))
        if name == "items" and not args:
            return TupleVariable([TupleVariable([ConstantVariable(k), v]) for k, v in items.items()])
        if name == "get" and 1 <= len(args) <= 2:
            k = _index(tx, self, args[0])
            return items.get(k, args[1] if len(args) == 2 else ConstantVariable(None))
        if name == "copy" and not args:
            return DictVariable(dict(items))
        return self._mutate(tx, name, args, kwargs)

    def _mutate(self, tx: Translator, name: str, args: list[VariableTracker],
                kwargs: dict[str, VariableTracker]) -> VariableTracker:
        items = self.items
        result: VariableTracker = ConstantVariable(None)
        if name == "__setitem__" and len(args) == 2:
            items[_index(tx, self, args[0])] = args[1]
        elif name == "__delitem__" and len(args) == 1:
            k = _index(tx, self, args[0])
            if k not in items:
                raise TracedException(f"del of missing key {k!r} in {self.describe()}", KeyError)
            del items[k]
        elif name == "update" and len(args) <= 1:
            if args:
                other = args[0]
                if not isinstance(other, DictVariable):
                    raise Unsupported(f"dict.update with {other.describe()}")
                items.update(other.items)
            items.update(kwargs)
        elif name == "pop" and 1 <= len(args) <= 2:
            k = _index(tx, self, args[0])
            if k in items:
                result = items.pop(k)
            elif len(args) == 2:
                return args[1]
            else:
                raise TracedException(f"pop of missing key {k!r} in {self.describe()}", KeyError)
        elif name == "setdefault" and 1 <= len(args) <= 2:
            k = _index(tx, self, args[0])
            if k in items:
                return items[k]
            items[k] = result = args[1] if len(args) == 2 else ConstantVariable(None)
        elif name == "clear" and not args:
            items.clear()
        else:
            raise Unsupported(f"method {name!r} of {self.describe()} is not supported")
        self.mutated = True
        return result


class RangeVariable(VariableTracker):
    """``range(...)`` with constant bounds."""

    __slots__ = ("value",)

    def __init__(self, value: range) -> None:
        super().__init__(None)
        self.value = value

    def python_type(self) -> type:
        return range

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.value

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        return [ConstantVariable(i) for i in self.value]

    def truth(self, tx: Translator) -> bool:
        return bool(self.value)


class IteratorVariable(VariableTracker):
    """An iterator over items known at trace time: ``iter(...)``, a traced generator's yields.

    ``FOR_ITER`` advances ``index``; iterating it gives the items not consumed yet.
    """

    __slots__ = ("index", "items")

    def __init__(self, items: list[VariableTracker]) -> None:
        super().__init__(None)
        self.items = items
        self.index = 0

    def describe(self) -> str:
        return "an iterator"

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        rest = self.items[self.index:]
        self.index = len(self.items)
        return rest


class FrameDictVariable(DictVariable):
    """A dict read from the frame (its keys guarded): values are wrapped, and guarded, only
    when the code reads them by key. A config's ``__dict__`` of forty entries costs the
    guards of the two the code looks at. Anything that needs every value (``values()``,
    ``items()``, a mutation, rebuilding it) fills ``items`` first, then it is a DictVariable.
    """

    __slots__ = ("builder", "real")

    def __init__(self, real: dict[Any, Any], source: Source, builder: Any) -> None:
        VariableTracker.__init__(self, source)  # ``items`` stays unset until needed
        self.real = real
        self.builder = builder
        self.mutated = False

    def __getattr__(self, name: str) -> Any:
        # only reached for the unset ``items`` slot: every value, wrapped now
        if name != "items":
            raise AttributeError(name)
        from kiln.guards import ItemSource

        items = {k: self.builder.wrap(v, ItemSource(self.source, k)) for k, v in self.real.items()}
        self.items = items
        return items

    def _value(self, key: Any) -> VariableTracker:
        from kiln.guards import ItemSource

        try:
            return self.items[key] if _filled(self) else self.builder.wrap(self.real[key], ItemSource(self.source, key))
        except KeyError:
            raise TracedException(f"key {key!r} is not in {self.describe()}", KeyError) from None

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in (self.items if _filled(self) else self.real)]

    def truth(self, tx: Translator) -> bool:
        return bool(self.items if _filled(self) else self.real)

    def getitem(self, tx: Translator, key: VariableTracker) -> VariableTracker:
        return self._value(_index(tx, self, key))

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if not _filled(self) and not kwargs:
            if name == "__getitem__" and len(args) == 1:
                return self.getitem(tx, args[0])
            if name == "get" and 1 <= len(args) <= 2:
                k = _index(tx, self, args[0])
                if k in self.real:
                    return self._value(k)
                return args[1] if len(args) == 2 else ConstantVariable(None)
            if name == "__contains__" and len(args) == 1:
                return ConstantVariable(_index(tx, self, args[0]) in self.real)
            if name == "__len__" and not args:
                return ConstantVariable(len(self.real))
        return super().call_method(tx, name, args, kwargs)


def _filled(d: FrameDictVariable) -> bool:
    try:
        object.__getattribute__(d, "items")
    except AttributeError:
        return False
    return True


class DictKeysVariable(VariableTracker):
    """``d.keys()``: a live view of a dict tracker's keys (all constants). As a constant it
    is a real ``dict_keys`` of the keys at that moment, so set operators, ``in`` and
    ``len`` fold at trace time."""

    __slots__ = ("dict",)

    def __init__(self, d: DictVariable) -> None:
        super().__init__(None)
        self.dict = d

    def python_type(self) -> type:
        return type({}.keys())

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return dict.fromkeys(self.dict.items).keys()

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in self.dict.items]

    def truth(self, tx: Translator) -> bool:
        return bool(self.dict.items)


class SetVariable(VariableTracker):
    """A set made while tracing, of items known at trace time (constants, or objects by
    identity): membership, ``add``/``discard``/``update``, iteration in insertion order."""

    __slots__ = ("items",)

    def __init__(self, items: list[VariableTracker]) -> None:
        super().__init__(None)
        self.items: list[VariableTracker] = []
        for item in items:
            self._add(item)

    def python_type(self) -> type:
        return set

    @staticmethod
    def _key(item: VariableTracker) -> Any:
        if item.is_constant():
            value = item.as_constant()
            try:
                hash(value)
            except TypeError:
                raise Unsupported(f"an unhashable {type(value).__name__} in a set") from None
            return ("value", value)
        return ("id", id(item))

    def _add(self, item: VariableTracker) -> None:
        if all(self._key(i) != self._key(item) for i in self.items):
            self.items.append(item)

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        return list(self.items)

    def truth(self, tx: Translator) -> bool:
        return bool(self.items)

    def combine(self, op: Any, other: SetVariable) -> SetVariable:
        """``self | other``, ``&``, ``-`` or ``^`` (items compared as ``in`` does here)."""
        import operator

        mine = {self._key(i) for i in self.items}
        theirs = {self._key(i) for i in other.items}
        if op is operator.or_:
            return SetVariable([*self.items, *other.items])
        if op is operator.and_:
            return SetVariable([i for i in self.items if self._key(i) in theirs])
        if op is operator.sub:
            return SetVariable([i for i in self.items if self._key(i) not in theirs])
        return SetVariable([i for i in self.items if self._key(i) not in theirs]
                           + [i for i in other.items if self._key(i) not in mine])

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name == "__contains__" and len(args) == 1:
            key = self._key(args[0])
            return ConstantVariable(any(self._key(i) == key for i in self.items))
        if name == "__len__" and not args:
            return ConstantVariable(len(self.items))
        if name == "add" and len(args) == 1:
            self._add(args[0])
        elif name == "update":
            for a in args:
                for item in a.iterate(tx):
                    self._add(item)
        elif name == "discard" and len(args) == 1:
            key = self._key(args[0])
            self.items = [i for i in self.items if self._key(i) != key]
        elif name == "copy" and not args:
            return SetVariable(list(self.items))
        else:
            raise Unsupported(f"method {name!r} of a set is not supported")
        return ConstantVariable(None)


@functools.cache
def _itertools_table() -> dict[Any, int | None]:
    """itertools classes whose output depends only on the positions of their inputs' items,
    run for real on lists of trackers: how many leading arguments are iterables (None: all
    positional ones)."""
    import itertools

    table: dict[Any, int | None] = {
        itertools.product: None, itertools.chain: None, itertools.zip_longest: None,
        itertools.islice: 1, itertools.combinations: 1, itertools.permutations: 1,
        itertools.combinations_with_replacement: 1, itertools.repeat: 0,
    }
    if hasattr(itertools, "pairwise"):
        table[itertools.pairwise] = 1
    return table


def is_itertools_class(cls: Any) -> bool:
    return cls in _itertools_table()


def run_itertools(tx: Translator, cls: Any, args: list[VariableTracker],
                  kwargs: dict[str, VariableTracker]) -> IteratorVariable:
    """``itertools.product(a, b)`` and friends over trackers: an iterator of the results."""
    import itertools

    n = _itertools_table()[cls]
    count = len(args) if n is None else n
    real_args = [list(a.iterate(tx)) for a in args[:count]]
    rest = args[count:]
    if cls is itertools.repeat:
        if len(args) != 2 or kwargs or not args[1].is_constant():
            raise Unsupported("itertools.repeat() without a number of times")
        real_args, rest = [args[0]], [args[1]]
    values = [a.as_constant() for a in rest] if all(a.is_constant() for a in rest) else None
    if values is None:
        raise Unsupported(f"{cls.__name__}() with arguments unknown at trace time")
    options = {k: (v if k == "fillvalue" else v.as_constant()) for k, v in kwargs.items()}
    out = []
    for item in cls(*real_args, *values, **options):
        out.append(TupleVariable(list(item)) if isinstance(item, tuple) else item)
    return IteratorVariable(out)
