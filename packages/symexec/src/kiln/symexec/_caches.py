"""SymexecCaches: everything kiln.symexec keeps from one capture to the next.

symexec keeps no module-level cache: a caller that captures many frames (kiln's Session)
owns one ``SymexecCaches`` and passes it to every ``capture(..., caches=...)``; a capture
given none uses a fresh one of its own, sharing nothing.

What it holds, and why sharing it is sound:

- ``dispatch``: the fake-op ``DispatchCache`` (kiln.symshapes): what an op gives on concrete
  input metadata does not depend on the capture; symbolic entries are keyed by their
  ShapeEnv. Emptied when it grows past ``dispatch_limit`` entries (``fake_op_cache``).
- ``decoded``: per code object, its instructions as the Translator walks them (labels
  resolved to indices); ``analyses``: per code object, its decoded ``Bytecode`` and the
  locals live at each instruction (graph breaks). Both are pure functions of the code,
  weakly keyed: an entry lives as long as its code object.
- ``resume_functions``: the resume functions made at graph breaks, by (code, instruction,
  stack layout, locals passed). This one is about identity, not speed: a recompile of a
  frame that breaks at the same place gets the same function back, so the cache entries
  kiln.frameeval holds for its code keep serving it.

Invariant: the caches change how fast a capture is and which resume function objects it
reuses, never what the capture computes.
"""

from __future__ import annotations

import types
import weakref
from dataclasses import dataclass, field
from typing import Any

from kiln.symshapes.bridge import DispatchCache

__all__ = ["SymexecCaches"]


@dataclass(slots=True, eq=False)
class SymexecCaches:
    """The caches captures share; see the module docstring."""

    dispatch: DispatchCache = field(default_factory=DispatchCache)
    decoded: weakref.WeakKeyDictionary[types.CodeType, tuple[list[Any], dict[int, int]]] = \
        field(default_factory=weakref.WeakKeyDictionary)
    analyses: weakref.WeakKeyDictionary[types.CodeType, tuple[Any, list[frozenset[str]]]] = \
        field(default_factory=weakref.WeakKeyDictionary)
    resume_functions: dict[tuple, types.FunctionType] = field(default_factory=dict)
    dispatch_limit: int = 100_000

    def fake_op_cache(self) -> DispatchCache:
        """``dispatch``, emptied first when it holds more than ``dispatch_limit`` entries."""
        cache = self.dispatch
        if len(cache.entries) + len(cache.probes) > self.dispatch_limit:
            cache.entries.clear()
            cache.probes.clear()
        return cache
