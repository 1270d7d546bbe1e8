"""Views of mappings: ``d.keys()``/``values()``/``items()``, ``obj.__dict__``, and the
``collections.abc`` views of user mappings.

A view reads its mapping whenever it is used, never a copy made when the view was:
``v = d.values(); d[k] = t; len(v)`` counts ``t``, as in eager Python. Returned from a
compiled function, a view of a dict is rebuilt as the same view of the real (or rebuilt)
dict, so it stays live for the caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable
from ._containers import DictVariable, SetVariable, TupleVariable, _index
from ._errors import call_error, raised_error

if TYPE_CHECKING:
    from .._translator import Translator

__all__ = ["DictViewVariable", "InstanceDictVariable", "MappingViewVariable", "instance_dict"]


class DictViewVariable(VariableTracker):
    """``d.keys()``, ``d.values()``, ``d.items()`` (``kind``) of a dict tracker: a live view,
    which reads the dict whenever it is used (iterated, measured, returned). A keys view is
    a constant (its keys are): set operators, ``==`` and ``in`` fold on the keys as they are
    at that moment; items views take part in them when their values are constants."""

    __slots__ = ("dict", "kind")

    _TYPES = {kind: type(getattr({}, kind)()) for kind in ("keys", "values", "items")}

    def __init__(self, d: DictVariable, kind: str) -> None:
        super().__init__(None)
        self.dict = d
        self.kind = kind

    def python_type(self) -> type:
        tp = self.dict.python_type()
        if tp is not dict and tp.__module__ == "collections":  # odict_keys and the like
            return type(getattr(tp(), self.kind)())
        return self._TYPES[self.kind]

    def describe(self) -> str:
        return f"dict_{self.kind} of {self.dict.describe()}"

    def is_constant(self) -> bool:
        return self.kind == "keys"

    def as_constant(self) -> Any:
        if self.kind == "keys":
            return dict.fromkeys(self.dict.key_list()).keys()
        return super().as_constant()

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        return self.get_iter(tx).iterate(tx)

    def get_iter(self, tx: Translator) -> VariableTracker:
        from ._iterators import DictIteratorVariable

        return DictIteratorVariable(self.dict, self.kind)

    def truth(self, tx: Translator) -> bool:
        return bool(self.dict.key_count())

    def as_set(self, tx: Translator) -> SetVariable:
        """The view's items as a set (what its set operators start from)."""
        if self.kind == "values":
            raise Unsupported("set operations on dict values")
        return SetVariable(self.iterate(tx))

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        view = getattr({}, self.kind)()
        if not hasattr(view, name):
            raise raised_error(lambda: getattr(view, name))
        return super().get_attr(tx, name)

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        from ._iterators import DictIteratorVariable

        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(self.dict.key_count())
        if name in ("__iter__", "__reversed__") and not args and not kwargs:
            return DictIteratorVariable(self.dict, self.kind, reverse=name == "__reversed__")
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return ConstantVariable(self._contains(tx, args[0]))
        if name == "isdisjoint" and len(args) == 1 and not kwargs and self.kind != "values":
            mine = self.as_set(tx)
            return ConstantVariable(not any(mine.contains(i) for i in args[0].iterate(tx)))
        return super().call_method(tx, name, args, kwargs)

    def _contains(self, tx: Translator, item: VariableTracker) -> bool:
        from ._builtins import values_equal

        if self.kind == "keys":
            return self.dict.has_key(_index(tx, self, item))
        if self.kind == "values":
            return any(values_equal(tx, self.dict.value_of(tx, k), item) for k in self.dict.key_list())
        if item.is_constant() and type(item.as_constant()) is tuple:
            item = TupleVariable([ConstantVariable(v) for v in item.as_constant()])
        if not isinstance(item, TupleVariable) or len(item.items) != 2:
            return False
        k = _index(tx, self, item.items[0])
        return self.dict.has_key(k) and values_equal(tx, self.dict.value_of(tx, k), item.items[1])


class InstanceDictVariable(DictVariable):
    """``obj.__dict__`` / ``vars(obj)`` of an object read from the frame: a live view of its
    attributes. Its keys and values are the real instance dict's (keys guarded, values
    wrapped when read) under the stores the trace made to the object (``obj.x = v``, seen as
    they happen); a store through it (``vars(obj)['x'] = v``) is such a store. Removing an
    attribute through it is not modelled."""

    __slots__ = ("guarded", "obj", "owner", "tx_output")

    def __init__(self, tx: Translator, owner: VariableTracker, obj: Any) -> None:
        from kiln.guards import GenericAttrSource

        VariableTracker.__init__(self, GenericAttrSource(owner.source, "__dict__"))
        self.owner = owner
        self.obj = obj
        self.tx_output = tx.output
        self.guarded = False
        self.mutated = False

    @property
    def items(self) -> dict[Any, VariableTracker]:  # type: ignore[override]
        raise Unsupported(f"rebuilding the __dict__ of {self.owner.describe()}")

    def _real(self) -> dict[str, Any]:
        real = object.__getattribute__(self.obj, "__dict__")
        if not self.guarded:
            from kiln.guards import DictKeysMatch, is_item_key

            if not all(is_item_key(k) for k in real):
                raise Unsupported(f"the __dict__ of {self.owner.describe()} has keys kiln cannot guard on")
            self.tx_output.guards.add(DictKeysMatch(self.source, tuple(real)))
            self.guarded = True
        return real

    def _written(self) -> dict[str, VariableTracker]:
        entry = self.tx_output.attribute_writes.get(id(self.owner))
        return {} if entry is None else entry[1]

    def key_list(self) -> list[Any]:
        return [*self._real(), *(k for k in self._written() if k not in self._real())]

    def has_key(self, key: Any) -> bool:
        return key in self._real() or key in self._written()

    def key_count(self) -> int:
        return len(self.key_list())

    def key_version(self) -> Any:
        return tuple(self.key_list())

    def value_of(self, tx: Translator, key: Any) -> VariableTracker:
        from kiln.guards import ItemSource

        written = self._written()
        if key in written:
            return written[key]
        return tx.builder.wrap(self._real()[key], ItemSource(self.source, key))

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        error = call_error(dict, name, args, kwargs)
        if error is not None:
            raise error
        if name == "copy":
            return DictVariable({k: self.value_of(tx, k) for k in self.key_list()})
        if name == "__setitem__":
            self._store(tx, _index(tx, self, args[0]), args[1])
            return ConstantVariable(None)
        if name == "update":
            from ._builtins_mapping import update_pairs

            for k, v in [*(update_pairs(tx, args[0]) if args else []), *kwargs.items()]:
                self._store(tx, k, v)
            return ConstantVariable(None)
        if name == "setdefault":
            k = _index(tx, self, args[0])
            if not self.has_key(k):
                self._store(tx, k, args[1] if len(args) == 2 else ConstantVariable(None))
            return self.value_of(tx, k)
        if name in ("__delitem__", "pop", "popitem", "clear"):
            raise Unsupported(f"removing attributes of {self.owner.describe()} through its __dict__")
        return super().call_method(tx, name, args, kwargs)

    def _store(self, tx: Translator, key: Any, value: VariableTracker) -> None:
        from ._objects import is_data_descriptor, lookup_class_attribute

        if type(key) is not str or is_data_descriptor(lookup_class_attribute(type(self.obj), key)):
            raise Unsupported(f"storing {key!r} into the __dict__ of {self.owner.describe()}")
        tx.output.store_attribute(self.owner, key, value)


def instance_dict(tx: Translator, owner: VariableTracker, obj: Any) -> InstanceDictVariable | None:
    """The one ``__dict__`` view of the frame object ``obj`` (tracked by ``owner``); None when
    its class makes ``__dict__`` something else than the instance dict (a property, slots)."""
    import types

    from kiln.guards import GenericAttrSource

    from ._objects import lookup_class_attribute

    if not isinstance(lookup_class_attribute(type(obj), "__dict__"), types.GetSetDescriptorType) \
            or not isinstance(_instance_dict_of(obj), dict):
        return None
    source = GenericAttrSource(owner.source, "__dict__")
    view = tx.output.trackers.get(source)
    if not isinstance(view, InstanceDictVariable):
        view = tx.output.trackers[source] = InstanceDictVariable(tx, owner, obj)
    return view


def _instance_dict_of(obj: Any) -> Any:
    try:
        return object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None


class MappingViewVariable(VariableTracker):
    """A ``collections.abc`` KeysView, ValuesView or ItemsView (``view_type``) of a mapping
    kiln models through its methods (a user ``Mapping``): live, it iterates the mapping
    whenever it is used; values and items read ``mapping[key]``."""

    __slots__ = ("mapping", "view_type")

    def __init__(self, mapping: VariableTracker, view_type: type) -> None:
        super().__init__(None)
        self.mapping = mapping
        self.view_type = view_type

    def python_type(self) -> type:
        return self.view_type

    def describe(self) -> str:
        return f"{self.view_type.__name__} of {self.mapping.describe()}"

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        import collections.abc
        import operator

        from ._builtins import builtin_rules

        keys = self.mapping.iterate(tx)
        if issubclass(self.view_type, collections.abc.KeysView):
            return keys
        values = [builtin_rules[operator.getitem](tx, [self.mapping, k], {}) for k in keys]
        if issubclass(self.view_type, collections.abc.ValuesView):
            return values
        return [TupleVariable([k, v]) for k, v in zip(keys, values, strict=True)]

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name == "__len__" and not args and not kwargs:
            from ._builtins import builtin_rules

            return builtin_rules[len](tx, [self.mapping], {})
        if name == "__iter__" and not args and not kwargs:
            return self.get_iter(tx)
        return super().call_method(tx, name, args, kwargs)
