"""Containers: tuples, lists, dicts, sets and ranges whose items are trackers.

Containers are modelled item by item, so ``x, y = pair`` or ``for layer in layers`` unrolls at
trace time. Lists and dicts are mutable: a mutation changes the tracker (never the real
object) and marks it ``mutated``; after the graph runs, the generated code replays the final
contents onto the real object when the container came from the frame (it has a source).
Invariant: one tracker per real container (the builder caches them by source), so aliases
see each other's mutations, and so do the views (``d.keys()``) and iterators over it, which
read the container when they are used, never a copy made earlier.

A method call eager would reject (an unknown method, a wrong number of arguments, a missing
key or value, a mutation of an immutable container) raises, in the trace, the exception
eager raises: its type and message are those CPython gives for the same call on a stand-in
(``call_error``), so the traced code's ``try``/``except`` sees what eager code would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable
from ._errors import call_error, empty_of, raised_error, traced_error

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["DictVariable", "FrameDictVariable", "IteratorVariable", "ListVariable", "RangeVariable",
           "SetVariable", "TupleVariable", "constant_args"]


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

    def get_iter(self, tx: Translator) -> VariableTracker:
        from ._iterators import SequenceIteratorVariable

        return SequenceIteratorVariable(self)

    def truth(self, tx: Translator) -> bool:
        return bool(self.items)

    def getitem(self, tx: Translator, key: VariableTracker) -> VariableTracker:
        k = _index(tx, self, key)
        if isinstance(k, slice):
            return type(self)(self.items[k])
        if not isinstance(k, int) or not -len(self.items) <= k < len(self.items):
            # the message names the real type ("tuple index out of range")
            sample = [None] * len(self.items) if self.python_type() is list else (None,) * len(self.items)
            raise raised_error(lambda: sample[k])
        return self.items[k]

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        tp = self.python_type()
        if tp not in (list, tuple) and not hasattr(tuple, name):  # a namedtuple's own method
            from ._namedtuple import namedtuple_method

            return namedtuple_method(tx, self, name, args, kwargs)
        error = call_error(tp if tp in (list, tuple) else tuple, name, args, kwargs)
        if error is not None:
            raise error
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__iter__":
            return self.get_iter(tx)
        if name in ("index", "count"):
            from ._builtins import values_equal

            target = args[0]
            bounds = slice(*constant_args(f"{name}() bounds", args[1:]) or [None])
            start = range(len(self.items))[bounds].start if len(self.items) else 0
            hits = [start + i for i, v in enumerate(self.items[bounds]) if values_equal(tx, v, target)]
            if name == "count":
                return ConstantVariable(len(hits))
            if not hits:
                if not target.is_constant() and self.python_type() is list:
                    raise Unsupported(f"{self.describe()}.index: value not found")
                sample = [] if self.python_type() is list else ()
                raise raised_error(lambda: sample.index(target.as_constant() if target.is_constant() else None))
            return ConstantVariable(hits[0])
        raise Unsupported(f"method {name!r} of {self.describe()} is not supported")


class ContainerMethodVariable(VariableTracker):
    """``obj.name`` of a container, read without being called at once (``add = s.add``,
    ``getattr(d, "keys")``): a call of it is ``obj.name(...)``."""

    __slots__ = ("name", "obj")

    def __init__(self, obj: VariableTracker, name: str) -> None:
        super().__init__(None)
        self.obj = obj
        self.name = name

    def python_type(self) -> type:
        return type([].append)

    def describe(self) -> str:
        return f"method {self.name} of {self.obj.describe()}"

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return self.obj.call_method(tx, self.name, args, kwargs)


def container_attr(v: VariableTracker, tp: type, name: str) -> VariableTracker:
    """``v.name`` for a container tracker of the builtin type ``tp``: its method, or eager's
    AttributeError when ``tp`` has no such attribute."""
    sample = empty_of(tp)
    if not hasattr(sample, name):
        raise raised_error(lambda: getattr(sample, name))
    if callable(getattr(sample, name)):
        return ContainerMethodVariable(v, name)
    raise Unsupported(f"attribute {name!r} of {v.describe()}")


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
        if self.tuple_type is tuple or hasattr(tuple, name):
            return container_attr(self, tuple, name)
        if name == "_fields" and fields is not None:
            return ConstantVariable(fields)
        if callable(getattr(self.tuple_type, name, None)):
            return ContainerMethodVariable(self, name)  # a namedtuple's method
        return super().get_attr(tx, name)

    def getitem(self, tx: Translator, key: VariableTracker) -> VariableTracker:
        k = _index(tx, self, key)
        if isinstance(k, slice):
            import torch

            # a slice of a torch.Size is a torch.Size; of a namedtuple, a tuple
            size = self.tuple_type is torch.Size
            return TupleVariable(self.items[k], tuple_type=torch.Size if size else tuple)
        return super().getitem(tx, key)


class ListVariable(_Sequence):
    """A list; mutations are tracked (see the module docstring)."""

    __slots__ = ("mutated",)

    def __init__(self, items: list[VariableTracker], source: Source | None = None) -> None:
        super().__init__(items, source)
        self.mutated = False

    def python_type(self) -> type:
        return list

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        return container_attr(self, list, name)

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        error = call_error(list, name, args, kwargs)
        if error is not None:
            raise error
        try:
            return self._call(tx, name, args, kwargs)
        except (IndexError, TypeError, ValueError) as e:
            # the list operation itself failed, on the trackers, as it fails on the real list
            raise traced_error(e) from e

    def _call(self, tx: Translator, name: str, args: list[VariableTracker],
              kwargs: dict[str, VariableTracker]) -> VariableTracker:
        items = self.items
        none = ConstantVariable(None)
        if name == "append":
            items.append(args[0])
        elif name == "extend":
            items.extend(args[0].iterate(tx))
        elif name == "insert":
            items.insert(_index(tx, self, args[0]), args[1])
        elif name == "pop":
            result = items.pop(*[_index(tx, self, a) for a in args])
            self.mutated = True
            tx.output.note_mutation(self)
            return result
        elif name == "clear":
            items.clear()
        elif name == "reverse":
            items.reverse()
        elif name == "sort":
            if not all(i.is_constant() for i in items):
                raise Unsupported(f"sorting {self.describe()}, whose items are unknown at trace time")
            if "key" in kwargs and not (kwargs["key"].is_constant() and kwargs["key"].as_constant() is None):
                raise Unsupported(f"sorting {self.describe()} with a key function")
            reverse = bool(kwargs["reverse"].as_constant()) if "reverse" in kwargs else False
            items.sort(key=lambda v: v.as_constant(), reverse=reverse)  # raises as eager does
        elif name == "__setitem__":
            k = _index(tx, self, args[0])
            if isinstance(k, slice):
                items[k] = args[1].iterate(tx)
            else:
                items[k] = args[1]
        elif name == "__delitem__":
            del items[_index(tx, self, args[0])]
        elif name == "remove":
            from ._builtins import values_equal

            for i, v in enumerate(items):
                if values_equal(tx, v, args[0]):
                    del items[i]
                    break
            else:
                [].remove(None)  # ValueError: list.remove(x): x not in list
        elif name == "copy":
            return ListVariable(list(items))
        else:
            return super().call_method(tx, name, args, kwargs)
        self.mutated = True
        tx.output.note_mutation(self)
        return none


class DictVariable(VariableTracker):
    """A dict with keys known at trace time; mutations are tracked like lists'."""

    __slots__ = ("items", "mutated", "version")

    def __init__(self, items: dict[Any, VariableTracker], source: Source | None = None) -> None:
        super().__init__(source)
        self.items = dict(items)
        self.mutated = False
        self.version = 0  # bumped when a key is added or removed (iterators check it)

    def python_type(self) -> type:
        return dict

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        return container_attr(self, self.python_type(), name)

    def key_list(self) -> list[Any]:
        """The keys as they are now, in order (all constants)."""
        return list(self.items)

    def value_of(self, tx: Translator, key: Any) -> VariableTracker:
        """The value of ``key``, a key the dict has."""
        return self.items[key]

    def has_key(self, key: Any) -> bool:
        return key in self.items

    def key_count(self) -> int:
        return len(self.items)

    def key_version(self) -> Any:
        """A value that changes when keys are added or removed."""
        return self.version

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in self.key_list()]

    def get_iter(self, tx: Translator) -> VariableTracker:
        from ._iterators import DictIteratorVariable

        return DictIteratorVariable(self)

    def truth(self, tx: Translator) -> bool:
        return bool(self.key_count())

    def getitem(self, tx: Translator, key: VariableTracker) -> VariableTracker:
        k = _index(tx, self, key)
        if not self.has_key(k):
            raise traced_error(KeyError(k))
        return self.value_of(tx, k)

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        error = call_error(self.python_type(), name, args, kwargs)  # (a mappingproxy: no mutations)
        if error is not None:
            raise error
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__contains__":
            return ConstantVariable(self.has_key(_index(tx, self, args[0])))
        if name == "__len__":
            return ConstantVariable(self.key_count())
        if name in ("__iter__", "__reversed__"):
            from ._iterators import DictIteratorVariable

            return DictIteratorVariable(self, reverse=name == "__reversed__")
        if name in ("keys", "values", "items"):
            from ._dict_views import DictViewVariable

            return DictViewVariable(self, name)
        if name == "get":
            k = _index(tx, self, args[0])
            if self.has_key(k):
                return self.value_of(tx, k)
            return args[1] if len(args) == 2 else ConstantVariable(None)
        if name == "copy":
            return DictVariable(dict(self.items))
        return self._mutate(tx, name, args, kwargs)

    def _mutate(self, tx: Translator, name: str, args: list[VariableTracker],
                kwargs: dict[str, VariableTracker]) -> VariableTracker:
        items = self.items
        result: VariableTracker = ConstantVariable(None)
        if name != "__setitem__" or _index(tx, self, args[0]) not in items:
            self.version += 1  # (at worst a key set that did not change)
        if name == "__setitem__":
            items[_index(tx, self, args[0])] = args[1]
        elif name == "__delitem__":
            k = _index(tx, self, args[0])
            if k not in items:
                raise traced_error(KeyError(k))
            del items[k]
        elif name == "update":
            from ._builtins_mapping import update_pairs

            pairs = update_pairs(tx, args[0]) if args else []
            items.update(pairs)
            items.update(kwargs)
        elif name == "pop":
            k = _index(tx, self, args[0])
            if k in items:
                result = items.pop(k)
            elif len(args) == 2:
                return args[1]
            else:
                raise traced_error(KeyError(k))
        elif name == "popitem":
            if not items:
                raise traced_error(KeyError("popitem(): dictionary is empty"))
            k, v = items.popitem()
            result = TupleVariable([ConstantVariable(k), v])
        elif name == "setdefault":
            k = _index(tx, self, args[0])
            if k in items:
                return items[k]
            items[k] = result = args[1] if len(args) == 2 else ConstantVariable(None)
        elif name == "clear":
            items.clear()
        else:
            raise Unsupported(f"method {name!r} of {self.describe()} is not supported")
        self.mutated = True
        tx.output.note_mutation(self)
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
    """An iterator. ``next_item(tx)`` advances it: the next item, or None once it is
    exhausted. This class goes over a list of items fixed when it is made (a traced
    generator's yields, itertools results, the items of a range, a string or an object
    iterated at ``iter()``); ``_iterators`` has the ones that read a container as they go
    and the lazy builtins (``zip``, ``map``, ...). ``pytype``: the real iterator's type."""

    __slots__ = ("index", "items", "pytype")

    def __init__(self, items: list[VariableTracker], pytype: type | None = None) -> None:
        super().__init__(None)
        self.items = items
        self.index = 0
        self.pytype = pytype

    def python_type(self) -> type:
        return self.pytype if self.pytype is not None else super().python_type()

    def describe(self) -> str:
        return "an iterator"

    def next_item(self, tx: Translator) -> VariableTracker | None:
        """The next item (None: exhausted)."""
        if self.index < len(self.items):
            self.index += 1
            return self.items[self.index - 1]
        return None

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        rest = []
        while (item := self.next_item(tx)) is not None:
            rest.append(item)
        return rest

    def get_iter(self, tx: Translator) -> VariableTracker:
        return self  # an iterator's iter() is itself

    def truth(self, tx: Translator) -> bool:
        return True

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name == "__iter__" and not args and not kwargs:
            return self
        if name == "__next__" and not args and not kwargs:
            item = self.next_item(tx)
            if item is None:
                raise traced_error(StopIteration())
            return item
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, expr: Callable[[VariableTracker], str], ref: Callable[[Any], str]) -> str:
        """Replacement code giving a real iterator where this one is now (what is left of it);
        ``expr`` renders a tracker, ``ref`` names an object."""
        rest = [expr(i) for i in self.items[self.index:]]
        return f"iter(({', '.join(rest)}{',' if len(rest) == 1 else ''}))"


class FrameDictVariable(DictVariable):
    """A dict read from the frame (its keys guarded): values are wrapped, and guarded, only
    when the code reads them by key. A config's ``__dict__`` of forty entries costs the
    guards of the two the code looks at. Anything that needs every value (a mutation,
    rebuilding it) fills ``items`` first, then it is a DictVariable.
    """

    __slots__ = ("builder", "real")

    def __init__(self, real: dict[Any, Any], source: Source, builder: Any) -> None:
        VariableTracker.__init__(self, source)  # ``items`` stays unset until needed
        self.real = real
        self.builder = builder
        self.mutated = False
        self.version = 0

    def __getattr__(self, name: str) -> Any:
        # only reached for the unset ``items`` slot: every value, wrapped now
        if name != "items":
            raise AttributeError(name)
        from kiln.guards import ItemSource

        items = {k: self.builder.wrap(v, ItemSource(self.source, k)) for k, v in self.real.items()}
        self.items = items
        return items

    def python_type(self) -> type:
        return type(self.real)

    def key_list(self) -> list[Any]:
        return list(self.items if _filled(self) else self.real)

    def has_key(self, key: Any) -> bool:
        return key in (self.items if _filled(self) else self.real)

    def key_count(self) -> int:
        return len(self.items if _filled(self) else self.real)

    def value_of(self, tx: Translator, key: Any) -> VariableTracker:
        from kiln.guards import ItemSource

        if _filled(self):
            return self.items[key]
        return self.builder.wrap(self.real[key], ItemSource(self.source, key))


def _filled(d: FrameDictVariable) -> bool:
    try:
        object.__getattribute__(d, "items")
    except AttributeError:
        return False
    return True


class SetVariable(VariableTracker):
    """A set (``frozen``: a frozenset) made while tracing, of items known at trace time
    (constants, or objects by identity): membership, ``add``/``discard``/``remove``/
    ``update``/``pop``, set operators.

    Iteration follows eager's order, which is that of the hash table: ``real`` is the same
    set of the constants, made by the same operations eager code makes (``real``: a set
    computed at trace time whose layout is kept), so its order, and ``pop``'s choice, are
    eager's. Once an object that is not a constant is in it, the order is one of addresses,
    unknown at trace time (``real`` None: iterating such a set of several items stops
    tracing)."""

    __slots__ = ("frozen", "items", "real")

    def __init__(self, items: list[VariableTracker], frozen: bool = False,
                 real: set[Any] | frozenset[Any] | None = None) -> None:
        super().__init__(None)
        self.frozen = frozen
        self.items: list[VariableTracker] = []
        self.real: Any = set()
        for item in items:
            self._add(item)
        if real is not None and self.real is not None:
            self.real = real  # the set eager computes, with its own layout
        elif frozen and self.real is not None:
            self.real = frozenset(self.real)

    def python_type(self) -> type:
        return frozenset if self.frozen else set

    def is_constant(self) -> bool:
        # a frozenset of constants is one (a dict key, folded operators)
        return self.frozen and self.real is not None and all(i.is_constant() for i in self.items)

    def as_constant(self) -> Any:
        return self.real if self.is_constant() else super().as_constant()

    def rebuild_text(self, expr: Callable[[VariableTracker], str], ref: Callable[..., str]) -> str:
        """Replacement code building the real set, its items added in the trace's order."""
        try:
            items = self.ordered()
        except Unsupported:
            items = self.items
        text = "{" + ", ".join(expr(i) for i in items) + "}" if items else "set()"
        return f"{ref(frozenset, 'type')}({text})" if self.frozen else text

    @staticmethod
    def _key(item: VariableTracker) -> Any:
        if item.is_constant():
            value = item.as_constant()
            try:
                hash(value)
            except TypeError as e:
                raise traced_error(e) from None
            return ("value", value)
        try:
            tp = item.python_type()
        except Unsupported:
            tp = None
        if tp is not None and getattr(tp, "__hash__", None) is None:
            raise traced_error(TypeError(f"unhashable type: '{tp.__name__}'"))
        return ("id", id(item))

    def _add(self, item: VariableTracker) -> None:
        key = self._key(item)
        if all(self._key(i) != key for i in self.items):
            self.items.append(item)
        if self.real is not None:
            if item.is_constant():
                self.real.add(item.as_constant())
            else:
                self.real = None

    def update_from(self, tx: Translator, other: VariableTracker) -> None:
        """``self.update(other)``: a set's items are merged as CPython merges them (its
        table, whose layout decides the order), any other iterable's added one by one."""
        merged = real_set_of(other)
        real = self.real
        if merged is None or real is None:
            for item in other.iterate(tx):
                self._add(item)
            return
        self.real = None  # (the items alone; the real set merges the other's table)
        for item in other.items if isinstance(other, SetVariable) else other.iterate(tx):
            self._add(item)
        self.real = real
        real.update(merged)

    def contains(self, item: VariableTracker) -> bool:
        key = self._key(item)
        return any(self._key(i) == key for i in self.items)

    def ordered(self) -> list[VariableTracker]:
        """The items in the order eager iterates over the set: that of a real set of the
        constants, added in the same order. Objects hash by address, an order unknown here."""
        if len(self.items) <= 1:
            return list(self.items)
        if self.real is None:
            raise Unsupported("iterating over a set of objects (their order depends on their addresses)")
        by_key = {self._key(i): i for i in self.items}
        return [by_key["value", v] for v in self.real]

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        return self.ordered()

    def get_iter(self, tx: Translator) -> VariableTracker:
        from ._iterators import SetIteratorVariable

        return SetIteratorVariable(self)

    def truth(self, tx: Translator) -> bool:
        return bool(self.items)

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        return container_attr(self, self.python_type(), name)

    def combine(self, op: Any, other: SetVariable, *, inplace: bool = False) -> SetVariable:
        """``self | other``, ``&``, ``-`` or ``^`` (items compared as ``in`` does here); the
        result has ``self``'s type, as Python's set operators give. ``inplace``: the value
        ``self |= other`` leaves in ``self`` (its layout kept)."""
        import operator

        if self.real is not None and other.real is not None:
            if inplace:
                real = self.real.copy()
                real = {operator.or_: operator.ior, operator.and_: operator.iand,
                        operator.sub: operator.isub, operator.xor: operator.ixor}[op](real, other.real)
            else:
                real = op(self.real, other.real)
            pool = {self._key(i): i for i in [*other.items, *self.items]}
            return SetVariable([pool["value", v] for v in real], frozen=self.frozen, real=real)
        mine = {self._key(i) for i in self.items}
        theirs = {self._key(i) for i in other.items}
        if op is operator.or_:
            items = [*self.items, *other.items]
        elif op is operator.and_:
            items = [i for i in self.items if self._key(i) in theirs]
        elif op is operator.sub:
            items = [i for i in self.items if self._key(i) not in theirs]
        else:
            items = ([i for i in self.items if self._key(i) not in theirs]
                     + [i for i in other.items if self._key(i) not in mine])
        return SetVariable(items, frozen=self.frozen)

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        error = call_error(self.python_type(), name, args, kwargs)
        if error is not None:
            raise error
        if name == "__contains__":
            return ConstantVariable(self.contains(args[0]))
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__iter__":
            return self.get_iter(tx)
        from ._sets import SET_METHODS, set_method

        if name in SET_METHODS:
            if self.source is not None and name.endswith("_update"):
                raise Unsupported(f"changing {self.describe()} (a set passed in)")
            return set_method(tx, self, name, args)
        if self.source is not None and name in ("add", "update", "discard", "remove", "pop", "clear"):
            raise Unsupported(f"changing {self.describe()} (a set passed in)")
        if name == "copy":
            if self.frozen:
                return self
            return SetVariable(list(self.items), real=None if self.real is None else self.real.copy())
        if name == "add":
            self._add(args[0])
        elif name == "update":
            for a in args:
                self.update_from(tx, a)
        elif name in ("discard", "remove"):
            if name == "remove" and not self.contains(args[0]):
                if not args[0].is_constant():
                    raise Unsupported("set.remove of a value the set does not hold")
                raise traced_error(KeyError(args[0].as_constant()))
            key = self._key(args[0])
            self.items = [i for i in self.items if self._key(i) != key]
            if self.real is not None and args[0].is_constant():
                self.real.discard(args[0].as_constant())
        elif name == "pop":
            if not self.items:
                raise traced_error(KeyError("pop from an empty set"))
            if self.real is None:
                raise Unsupported("set.pop() of a set of objects (which one comes first is an address)")
            key = ("value", self.real.pop())  # the element eager pops
            first = next(i for i in self.items if self._key(i) == key)
            self.items = [i for i in self.items if i is not first]
            return first
        elif name == "clear":
            self.items = []
            self.real = set()
        else:
            raise Unsupported(f"method {name!r} of a set is not supported")
        return ConstantVariable(None)


def real_set_of(v: VariableTracker) -> set[Any] | frozenset[Any] | None:
    """The real set of constants standing for ``v`` (a set tracker's, or a constant set),
    or None."""
    if isinstance(v, SetVariable):
        return v.real
    if v.is_constant() and isinstance(v.as_constant(), (set, frozenset)):
        return v.as_constant()
    return None


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
    if cls is itertools.zip_longest:
        options.setdefault("fillvalue", ConstantVariable(None))  # a tracker, as every item
    out = []
    for item in cls(*real_args, *values, **options):
        out.append(TupleVariable(list(item)) if isinstance(item, tuple) else item)
    return IteratorVariable(out, pytype=cls)
