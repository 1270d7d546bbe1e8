"""The storage guard: tensors that must not share memory.

A graph that changes an input tensor in place treats each tensor input as memory of its own
(a functionalizing backend writes the new values back to that one input). That holds only
while no other tensor input is a view of the same memory, a fact the tensor-match guards do
not state (a view has its own sizes and strides). ``NoStorageSharing`` states it.

The fact is written once, in ``shared_storage``; ``describe`` names it, ``emit`` calls it
from the generated checker and ``explain`` reports what it found, so the three cannot
disagree. Storages without bytes (empty tensors) and tensors without a plain storage
(sparse, nested) share nothing. torch is never imported here: the values are asked for their
``untyped_storage()``; a value that is no tensor fails the check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kiln.guards._base import CodeContext, Guard
from kiln.guards._sources import Source

__all__ = ["NoStorageSharing", "shared_storage"]


def shared_storage(tensors: tuple[Any, ...]) -> tuple[int, int] | None:
    """The positions of the first two of ``tensors`` over one storage, or None."""
    seen: dict[tuple[Any, int], int] = {}
    for i, t in enumerate(tensors):
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse, nested: no plain storage to share
            continue
        if not storage.nbytes():
            continue
        key = (storage.device, storage.data_ptr())
        j = seen.setdefault(key, i)
        if j != i:
            return (j, i)
    return None


@dataclass(frozen=True, slots=True)
class NoStorageSharing(Guard):
    """No two of the tensors at ``items`` are views of one storage."""

    items: tuple[Source, ...]
    cost = 8

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))

    @property
    def sources(self) -> tuple[Source, ...]:
        return self.items

    def describe(self) -> str:
        return "no storage shared among tensors " + ", ".join(map(str, self.items))

    def emit(self, ctx: CodeContext, *exprs: str) -> list[str]:
        check = ctx.const(shared_storage, "shared_storage")
        return [f"{check}(({', '.join(exprs)},)) is None"]

    def explain(self, *values: Any) -> str | None:
        pair = shared_storage(values)
        if pair is None:
            return None
        i, j = pair
        return f"{self.items[i]} and {self.items[j]}: expected separate storages, got views of one storage"
