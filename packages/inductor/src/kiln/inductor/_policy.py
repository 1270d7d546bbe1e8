"""``FusionPolicy``: the numbers behind the lowering's and the scheduler's choices, as data
(one object, passed explicitly; no heuristic is buried in the passes)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FusionPolicy"]


@dataclass(frozen=True, slots=True)
class FusionPolicy:
    fuse: bool = field(default=True, metadata={
        "help": "put buffers with the same outer loop into one kernel (False: one kernel per buffer, "
                "to bisect numerics)"})
    inline_max_ops: int = field(default=4, metadata={
        "help": "a pointwise value read by several nodes is recomputed in each while it costs at most "
                "this many operations per element; above, it is computed once into a buffer"})
    realize_ops: int = field(default=64, metadata={
        "help": "a value whose expression grew past this many operations is computed into a buffer"})
    parallel_min_elements: int = field(default=32768, metadata={
        "help": "a kernel's outer loop runs on several threads when it touches at least this many elements"})
