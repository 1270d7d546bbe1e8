"""``os.environ`` read by traced code: each variable read is answered at trace time and
guarded on its own (``M['os'].environ.get('NAME') == value``), so setting an unrelated
variable never recompiles and changing one the code read does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable

if TYPE_CHECKING:
    from .._translator import Translator

__all__ = ["EnvironVariable"]


class EnvironVariable(VariableTracker):
    """``os.environ``; see the module docstring. Writes are not traced."""

    __slots__ = ()

    def python_type(self) -> type:
        import os

        return type(os.environ)

    def describe(self) -> str:
        return "os.environ"

    def _read(self, tx: Translator, key: VariableTracker) -> str | None:
        import os

        from kiln.guards import AttrSource, EqualsMatch, IsNone, MappingGetSource, ModuleSource

        if not key.is_constant() or type(key.as_constant()) is not str:
            raise Unsupported(f"reading os.environ with {key.describe()}")
        name = key.as_constant()
        value = os.environ.get(name)
        source = MappingGetSource(AttrSource(ModuleSource("os"), "environ"), name)
        tx.output.guards.add(IsNone(source) if value is None else EqualsMatch(source, value))
        return value

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            value = self._read(tx, args[0])
            if value is None:
                return args[1] if len(args) == 2 else ConstantVariable(None)
            return ConstantVariable(value)
        if name == "__getitem__" and len(args) == 1:
            value = self._read(tx, args[0])
            if value is None:
                raise Unsupported(f"os.environ[{args[0].as_constant()!r}] raises KeyError")
            return ConstantVariable(value)
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self._read(tx, args[0]) is not None)
        raise Unsupported(f"os.environ.{name}() inside a compiled region")
