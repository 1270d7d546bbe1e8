"""Sources: how a caller names where a symbol's value comes from.

kiln.symshapes treats a source as an opaque hashable object supplied by whoever creates the
symbol (``ShapeEnv.create_symbol(hint, source=...)``) and hands it back, unchanged, in
``produce_guards()``. ``DimSource`` is a neutral default for tensor sizes, strides and
offsets (an input name plus a dimension) that consumers such as kiln.guards can map onto
their own source objects without importing this package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DimSource"]


@dataclass(slots=True, frozen=True)
class DimSource:
    """``name``'s ``kind`` at dimension ``dim`` (``dim`` is unused for ``storage_offset``)."""

    name: str
    dim: int = 0
    kind: Literal["size", "stride", "storage_offset", "scalar"] = "size"

    def __str__(self) -> str:
        if self.kind == "storage_offset":
            return f"{self.name}.storage_offset()"
        if self.kind == "scalar":
            return self.name
        return f"{self.name}.{self.kind}()[{self.dim}]"
