"""Dicts of the ``collections`` types and ``dict.fromkeys``: ``defaultdict`` (made in the
trace or read from the frame), ``OrderedDict`` made in the trace with arguments.

A ``defaultdict`` tracker is a dict tracker with a ``default_factory`` tracker: reading a
missing key calls the factory (traced like any call: a class, a lambda, a closure, a torch
function) and stores its result under the key, as ``defaultdict.__missing__`` does; ``get``,
``in``, ``setdefault`` and ``pop`` never call it. One made in the trace and returned is
rebuilt as a real ``defaultdict`` of the same factory (``rebuild``). One read from the frame
is guarded as a frame dict (its type and keys; values where read) plus its factory, read
through ``L['d'].default_factory`` only when the trace calls or reads it.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._builtins import rule
from ._constant import ConstantVariable
from ._containers import DictVariable, FrameDictVariable, _index, container_attr
from ._errors import traced_error

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["DefaultDictVariable", "FrameDefaultDictVariable", "OrderedDictVariable", "construct_dict",
           "wrap_frame_defaultdict"]


class _DefaultDictMixin:
    """What a ``defaultdict`` tracker adds to a dict tracker (``factory``: its default_factory)."""

    __slots__ = ()

    def factory(self, tx: Translator) -> VariableTracker:
        raise NotImplementedError

    def python_type(self) -> type:
        return collections.defaultdict

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        if name == "default_factory":
            return self.factory(tx)
        return container_attr(self, collections.defaultdict, name)  # type: ignore[arg-type]

    def getitem(self, tx: Translator, key: VariableTracker) -> VariableTracker:
        k = _index(tx, self, key)  # type: ignore[arg-type]
        if self.has_key(k):  # type: ignore[attr-defined]
            return self.value_of(tx, k)  # type: ignore[attr-defined]
        factory = self.factory(tx)
        if factory.is_constant() and factory.as_constant() is None:
            raise traced_error(KeyError(k))
        value = factory.call(tx, [], {})  # __missing__: the factory's value, stored
        self._mutate(tx, "__setitem__", [key, value], {})  # type: ignore[attr-defined]
        return value


class DefaultDictVariable(_DefaultDictMixin, DictVariable):
    """A ``defaultdict`` made in the trace."""

    __slots__ = ("default_factory",)

    def __init__(self, items: dict[Any, VariableTracker], default_factory: VariableTracker) -> None:
        DictVariable.__init__(self, items)
        self.default_factory = default_factory

    def factory(self, tx: Translator) -> VariableTracker:
        return self.default_factory

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name == "copy" and not args and not kwargs:
            return DefaultDictVariable(dict(self.items), self.default_factory)
        return DictVariable.call_method(self, tx, name, args, kwargs)

    def rebuild(self, literal: str, expr: Callable[[VariableTracker], str], ref: Callable[..., str]) -> str:
        """Replacement code building the real object from ``literal``, a dict display."""
        return f"{ref(collections.defaultdict, 'type')}({expr(self.default_factory)}, {literal})"


class FrameDefaultDictVariable(_DefaultDictMixin, FrameDictVariable):
    """A ``defaultdict`` read from the frame (guarded as a frame dict; its factory read,
    and guarded, when the trace needs it)."""

    __slots__ = ("default_factory",)

    def __init__(self, real: dict[Any, Any], source: Source, builder: Any) -> None:
        FrameDictVariable.__init__(self, real, source, builder)
        self.default_factory: VariableTracker | None = None

    def factory(self, tx: Translator) -> VariableTracker:
        if self.default_factory is None:
            from kiln.guards import AttrSource

            self.default_factory = self.builder.wrap(
                self.real.default_factory, AttrSource(self.source, "default_factory"))  # type: ignore[attr-defined]
        return self.default_factory


class OrderedDictVariable(DictVariable):
    """An ``OrderedDict`` made in the trace (its order: insertion, as a dict's)."""

    __slots__ = ()

    def python_type(self) -> type:
        return collections.OrderedDict

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name == "copy" and not args and not kwargs:
            return OrderedDictVariable(dict(self.items))
        if name == "move_to_end" and len(args) == 1 and set(kwargs) <= {"last"}:
            k = _index(tx, self, args[0])
            if k not in self.items:
                raise traced_error(KeyError(k))
            last = kwargs["last"].truth(tx) if "last" in kwargs else True
            value = self.items.pop(k)
            self.items = {k: value, **self.items} if not last else {**self.items, k: value}
            self.mutated = True
            tx.output.note_mutation(self)
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def rebuild(self, literal: str, expr: Callable[[VariableTracker], str], ref: Callable[..., str]) -> str:
        """Replacement code building the real object from ``literal``, a dict display."""
        return f"{ref(collections.OrderedDict, 'type')}({literal})"


def _fill(tx: Translator, d: DictVariable, args: list[VariableTracker],
          kwargs: dict[str, VariableTracker], what: str) -> None:
    from ._builtins_mapping import update_pairs

    if len(args) > 1:
        raise traced_error(TypeError(f"{what} expected at most 1 arguments, got {len(args)}"))
    for k, v in update_pairs(tx, args[0]) if args else ():
        d.items[k] = v
    d.items.update(kwargs)


def construct_dict(tx: Translator, cls: type, args: list[VariableTracker],
                   kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """``defaultdict(...)`` or ``OrderedDict(...)`` made in the trace; None for other classes."""
    if cls is collections.defaultdict:
        factory = args[0] if args else ConstantVariable(None)
        if factory.is_constant() and factory.as_constant() is not None and not callable(factory.as_constant()):
            raise traced_error(TypeError("first argument must be callable or None"))
        d: DictVariable = DefaultDictVariable({}, factory)
        _fill(tx, d, list(args[1:]), kwargs, "defaultdict")
        return d
    if cls is collections.OrderedDict:
        d = OrderedDictVariable({})
        _fill(tx, d, list(args), kwargs, "OrderedDict")
        return d
    return None


def wrap_frame_defaultdict(builder: Any, value: Any, source: Source) -> VariableTracker:
    """The tracker of a ``defaultdict`` read from the frame at ``source``: its type and keys
    guarded (values and factory where read)."""
    from kiln.guards import DictKeysMatch, TypeMatch, is_item_key

    if not all(is_item_key(k) for k in value):
        raise Unsupported(f"defaultdict {source} has keys kiln cannot guard on")
    builder._guard(TypeMatch(source, type(value)))
    builder._guard(DictKeysMatch(source, tuple(value)))
    return FrameDefaultDictVariable(value, source, builder)


@rule(dict.fromkeys)
def _fromkeys(tx, args, kwargs):
    from ._builtins_mapping import _dict_key

    if kwargs or not 1 <= len(args) <= 2:
        raise Unsupported("dict.fromkeys() with keywords or a wrong number of arguments")
    value = args[1] if len(args) == 2 else ConstantVariable(None)
    from ._builtins_iteration import make_iterator

    it = make_iterator(tx, args[0])
    d = DictVariable({})
    while (key := it.next_item(tx)) is not None:
        d.items[_dict_key(key)] = value  # one value object under every key, as in eager
    return d

