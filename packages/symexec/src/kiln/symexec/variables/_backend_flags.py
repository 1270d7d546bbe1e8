"""torch.backends switches read while tracing (``torch.backends.cudnn.enabled``,
``torch.backends.cuda.matmul.allow_tf32``, ``torch.backends.mkldnn.enabled``, ...).

torch keeps these switches in C++ and shows them through objects whose attributes read
them: ``cuBLASModule.__getattr__`` (``torch.backends.cuda.matmul``) and the ``ContextProp``
descriptors of the ``PropModule`` objects that replace modules such as
``torch.backends.cudnn`` in ``sys.modules``. ``FlagHolderVariable`` stands for one of these
holders; reading a switch gives its value now, guarded by value through a source that reads
the same attribute (``M['torch.backends.cudnn'].enabled``), so turning it on or off
recompiles instead of running code traced for the other setting.

Invariants: every value read is guarded (a switch being process- or thread-wide makes no
difference: the guard reads it at every call); functions found on a holder
(``is_available()``, ``version()``) are torch functions as anywhere else; other values, and
any store, are Unsupported (a graph break), never answered from the trace's example.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import TYPE_CHECKING, Any

from .._unsupported import MissingAttribute, Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["FlagHolderVariable", "flag_holder_source"]


@functools.cache
def _holder_types() -> tuple[type, ...]:
    import torch.backends
    import torch.backends.cuda

    return (torch.backends.PropModule, type(torch.backends.cuda.matmul))


def flag_holder_source(value: Any) -> Source | None:
    """Where the guards read the switches of ``value`` from, when it is one of torch's flag
    holders reachable by import path; None for any other value."""
    if not isinstance(value, _holder_types()):
        return None
    from kiln.guards import AttrSource, ModuleSource

    if isinstance(value, types.ModuleType):
        name = value.__name__
        return ModuleSource(name) if sys.modules.get(name) is value else None
    cuda = sys.modules.get("torch.backends.cuda")
    if cuda is not None and getattr(cuda, "matmul", None) is value:
        return AttrSource(ModuleSource("torch.backends.cuda"), "matmul")
    return None


def _guardable(value: Any) -> bool:
    return value is None or type(value) in (bool, int, float, str)


class FlagHolderVariable(VariableTracker):
    """A torch.backends flag holder; see the module docstring. ``source`` is the holder's
    import path (what the value guards read through), whatever path the code took."""

    __slots__ = ("holder",)

    def __init__(self, holder: Any, source: Source) -> None:
        super().__init__(source)
        self.holder = holder

    def python_type(self) -> type:
        return type(self.holder)

    def describe(self) -> str:
        return f"torch.backends flags {self.source}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        from kiln.guards import AttrSource, EqualsMatch, IsNone

        try:
            value = getattr(self.holder, name)
        except AttributeError:
            raise MissingAttribute(f"{self.describe()} has no attribute {name!r}") from None
        held = flag_holder_source(value)
        if held is not None:
            return FlagHolderVariable(value, held)
        if _guardable(value):
            source = AttrSource(self.source, name)
            tx.output.guards.add(IsNone(source) if value is None else EqualsMatch(source, value))
            return ConstantVariable(value)
        if callable(value) or isinstance(value, types.ModuleType):
            return tx.builder.wrap(value, None)  # a function or module of torch: fixed
        raise Unsupported(f"reading {name!r} of {self.describe()}, a {type(value).__name__}")

    def store_attr(self, tx: Translator, name: str, value: VariableTracker) -> None:
        raise Unsupported(f"setting {name!r} of {self.describe()} (a global torch switch) inside a compiled region")
