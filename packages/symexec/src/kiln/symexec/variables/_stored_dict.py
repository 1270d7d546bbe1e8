"""The stored items of a frame object of a dict subclass that defines ``__getitem__`` in
Python (transformers' ``ModelOutput``, ``ClassInstantier`` registries).

The class's own ``__getitem__`` is inlined wherever the code indexes the object; what that
code reads underneath (``dict(self.items())``, ``super().__getitem__(key)``) are the items
the dict stores. ``StoredDictVariable`` holds those, read-only like ``FrameDictVariable``
(its keys guarded in order, a value wrapped and guarded when read), each value reached by a
``DictItemSource`` (``dict.__getitem__(obj, key)``), so neither the guards nor the
replacement code run the class's ``__getitem__``.

Invariant: made only for classes that keep dict's ``keys`` (which the keys guard calls) and
have literal keys; anything else is Unsupported.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._containers import FrameDictVariable, _filled

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator
    from ._base import VariableTracker

__all__ = ["StoredDictVariable", "stored_items"]


class StoredDictVariable(FrameDictVariable):
    """What a dict subclass object from the frame stores; see the module docstring."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name != "items":  # only the unset ``items`` slot: every value, wrapped now
            raise AttributeError(name)
        from kiln.guards import DictItemSource

        items = {k: self.builder.wrap(v, DictItemSource(self.source, k)) for k, v in dict.items(self.real)}
        self.items = items
        return items

    def python_type(self) -> type:
        # the builtin whose methods the class's code calls on its items (``super().items()``)
        return collections.OrderedDict if isinstance(self.real, collections.OrderedDict) else dict

    def key_list(self) -> list[Any]:
        return list(self.items if _filled(self) else dict.keys(self.real))

    def has_key(self, key: Any) -> bool:
        return key in self.items if _filled(self) else dict.__contains__(self.real, key)

    def key_count(self) -> int:
        return len(self.items) if _filled(self) else dict.__len__(self.real)

    def value_of(self, tx: Translator, key: Any) -> VariableTracker:
        from kiln.guards import DictItemSource

        if _filled(self):
            return self.items[key]
        return self.builder.wrap(dict.__getitem__(self.real, key), DictItemSource(self.source, key))


def stored_items(tx: Translator, obj: Any, source: Source, what: str) -> StoredDictVariable:
    """The stored items of ``obj`` (from the frame at ``source``), its keys guarded."""
    from kiln.guards import DictKeysMatch

    from ._objects import lookup_class_attribute

    if lookup_class_attribute(type(obj), "keys") not in (dict.keys, collections.OrderedDict.keys):
        raise Unsupported(f"reading the items of {what}, whose class defines keys()")
    keys = tuple(dict.keys(obj))
    if not all(_literal(k) for k in keys):
        raise Unsupported(f"{what} has keys kiln cannot guard on")
    tx.output.guards.add(DictKeysMatch(source, keys))
    return StoredDictVariable(obj, source, tx.builder)


def _literal(key: Any) -> bool:
    if key is None or type(key) in (bool, int, str, bytes):
        return True
    return type(key) is tuple and all(_literal(k) for k in key)
