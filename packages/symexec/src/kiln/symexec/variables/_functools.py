"""functools wrappers of callables: ``partial`` objects and ``lru_cache`` wrappers.

``PartialVariable`` is ``functools.partial(func, *args, **keywords)``, read from the frame
(its parts guarded through their sources: ``func`` as any function is, each stored argument
and keyword by value or as a graph input) or made while tracing. A call is a call of ``func``
with the stored arguments first and the stored keywords overridden by the call's. Attributes
read as eager reads them: ``func``/``args``/``keywords``, then the instance ``__dict__`` (a
frame partial's guarded on its keys), then ``functools.partial``'s own class attributes, else
eager's AttributeError (so ``hasattr`` and ``except AttributeError`` answer at trace time).

``LruCacheVariable`` is a ``functools.lru_cache`` wrapper: a call inlines the wrapped
function (``__wrapped__``), as torch.compile does; the cache is neither read nor filled, so
the graph computes what a cache miss computes. The wrapper is guarded by identity.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._base import VariableTracker

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["LruCacheVariable", "PartialVariable", "make_partial"]

_OWN_FIELDS = ("func", "args", "keywords")
# class attributes of the wrappers that are plain values (the same for every instance)
_PLAIN_CLASS_ATTRS = ("__doc__", "__module__")
_LRU_CONSTANT_ATTRS = ("__name__", "__qualname__", "__module__", "__doc__")


class PartialVariable(VariableTracker):
    """``functools.partial``; see the module docstring. ``real``: the frame's partial object,
    when it came from the frame (None when made while tracing)."""

    __slots__ = ("args", "dict_read", "func", "keywords", "real")

    def __init__(self, func: VariableTracker, args: list[VariableTracker],
                 keywords: dict[str, VariableTracker], source: Source | None = None,
                 real: functools.partial | None = None) -> None:
        super().__init__(source)
        self.func = func
        self.args = args
        self.keywords = keywords
        self.real = real
        self.dict_read = False  # CPython makes a partial's ``__dict__`` when it is first read

    def python_type(self) -> type:
        return functools.partial

    def has_instance_dict(self) -> bool:
        """Whether the real partial has its ``__dict__`` made (then ``partial(p, ...)`` keeps
        ``p`` as its ``func`` instead of merging ``p``'s arguments into the new partial)."""
        if self.real is not None:
            return self.real.__reduce__()[2][3] is not None  # read without making the dict
        return self.dict_read

    def describe(self) -> str:
        return f"partial of {self.func.describe()}"

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return tx.call(self.func, [*self.args, *args], {**self.keywords, **kwargs})

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        from ._constant import ConstantVariable
        from ._containers import DictVariable, TupleVariable
        from ._objects import UserDefinedClassVariable

        if name == "func":
            return self.func
        if name == "args":
            return TupleVariable(list(self.args))
        if name == "keywords":
            return DictVariable(dict(self.keywords))
        if name == "__class__":
            return UserDefinedClassVariable(functools.partial)
        own = self._instance_dict(tx)
        if name == "__dict__":
            return own
        if self.real is not None and name in self.real.__dict__:
            return own.getitem(tx, ConstantVariable(name))
        if name in _PLAIN_CLASS_ATTRS:
            return ConstantVariable(getattr(functools.partial, name))
        if name == "__call__":
            return self  # calling the bound ``__call__`` is calling the partial
        sample = functools.partial(print)  # no instance attributes: the class's answer
        if not hasattr(sample, name):
            from ._errors import raised_error

            raise raised_error(lambda: getattr(sample, name))  # eager's message
        raise Unsupported(f"reading attribute {name!r} of {self.describe()} is not supported")

    def _instance_dict(self, tx: Translator) -> VariableTracker:
        """The partial's ``__dict__``: a frame partial's real one, guarded on its keys (an
        attribute set on it later is a guard failure). Reading a partial made while tracing
        never sets attributes, so its dict is empty; a tracker of it could not be mutated
        faithfully (the rebuilt partial would not see the change), so none is handed out."""
        self.dict_read = True
        if self.real is not None and self.source is not None:
            from kiln.guards import AttrSource

            return tx.builder.wrap(self.real.__dict__, AttrSource(self.source, "__dict__"))
        return _EMPTY_DICT


def make_partial(func: VariableTracker, args: list[VariableTracker],
                  keywords: dict[str, VariableTracker]) -> PartialVariable:
    """``functools.partial(func, *args, **keywords)`` made while tracing. As CPython does, a
    partial of a partial without a ``__dict__`` is flattened: the inner one's function, its
    arguments then these, its keywords updated by these."""
    if isinstance(func, PartialVariable) and not func.has_instance_dict():
        return PartialVariable(func.func, [*func.args, *args], {**func.keywords, **keywords})
    return PartialVariable(func, list(args), dict(keywords))


class _EmptyInstanceDict(VariableTracker):
    """The empty ``__dict__`` of a partial made while tracing: read-only, empty."""

    __slots__ = ()

    def python_type(self) -> type:
        return dict

    def describe(self) -> str:
        return "the __dict__ of a partial made while tracing"

    def getitem(self, tx: Translator, key: VariableTracker) -> VariableTracker:
        raise Unsupported("reading the __dict__ of a partial made while tracing")


_EMPTY_DICT = _EmptyInstanceDict()


class LruCacheVariable(VariableTracker):
    """A ``functools.lru_cache`` wrapper; see the module docstring. ``wrapped``: the tracker
    of ``real.__wrapped__``."""

    __slots__ = ("real", "wrapped")

    def __init__(self, wrapped: VariableTracker, real: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.wrapped = wrapped
        self.real = real

    def python_type(self) -> type:
        return type(self.real)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.real

    def describe(self) -> str:
        return f"lru_cache wrapper of {self.wrapped.describe()}"

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return tx.call(self.wrapped, args, kwargs)

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        from ._constant import ConstantVariable

        if name == "__wrapped__":
            return self.wrapped
        if name in _LRU_CONSTANT_ATTRS:
            return ConstantVariable(getattr(self.real, name))
        if not hasattr(self.real, name):
            from ._errors import raised_error

            raise raised_error(lambda: getattr(self.real, name))
        raise Unsupported(f"reading attribute {name!r} of {self.describe()} (its cache) is not supported")
