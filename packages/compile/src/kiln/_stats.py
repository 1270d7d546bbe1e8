"""Stats: the compile policy's record of one Session: counters, and what it decided per code.

One ``Stats`` belongs to one ``kiln.Session`` (``kiln.session().stats``); ``kiln.reset()``
starts a new Session and with it a new record. The policy (``_policy``) writes it on cache
misses only; the cache-hit path never reads it (except a ``fullgraph`` call, which reads
``eager_codes`` and ``broken_codes`` of its own code).

Invariants: the per-code maps only grow while the Session lives (a decision is never undone
before ``kiln.reset``); code objects are held strongly, as kiln.frameeval's entries hold
their replacement code until a reset.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GraphCacheStats", "Stats"]


@dataclass(slots=True, eq=False)
class Stats:
    """Counters and per-code decisions of the policy (see the module docstring).

    ``breaks`` holds each graph break taken and each frame given up on, in order, as the
    ``kiln.Unsupported`` (reason and user's line) or the reason text."""

    captures: int = 0
    failures: int = 0
    entries: int = 0
    unique_graphs: int = 0
    eager_codes: dict[types.CodeType, str] = field(default_factory=dict)
    broken_codes: dict[types.CodeType, str] = field(default_factory=dict)  # an entry with a break
    # per code: what the guards of each of its captures fix (kiln.symexec's Specializations,
    # one per capture), and the sources whose numbers are graph inputs now
    code_guards: dict[types.CodeType, list[Any]] = field(default_factory=dict)
    dynamic_numbers: dict[types.CodeType, frozenset[Any]] = field(default_factory=dict)
    # per code: the tensor dimensions that are symbols now (source -> dims); see _automatic_dynamic
    dynamic_dims: dict[types.CodeType, dict[Any, frozenset[int]]] = field(default_factory=dict)
    # per resume function: its arguments whose values only exist at run time (_breaks.ResumeInputs)
    resume_runtime: dict[types.CodeType, frozenset[str]] = field(default_factory=dict)
    # id of each replacement code kiln made -> (that code, the code it replaces), by identity
    # (a replacement's constants may be unhashable); finds the compiled callers of a frame
    originals: dict[int, tuple[types.CodeType, types.CodeType]] = field(default_factory=dict)
    breaks: list[Any] = field(default_factory=list)  # kiln.Unsupported or str
    # per code: the recompile memory on disk as last read or written (_recompile_memory):
    # (numbers, dims), to write only what is new
    recorded_memory: dict[types.CodeType, tuple[frozenset[Any], dict[Any, frozenset[int]]]] = \
        field(default_factory=dict)


@dataclass(slots=True)
class GraphCacheStats:
    """What the disk cache of compiled captured graphs (``_compiled_cache``, backend
    ``"inductor"``) did in one Session: graphs loaded from disk (no aotgrad trace, no inductor
    compile), looked up and not found (compiled), recorded, and not cacheable."""

    hits: int = 0
    misses: int = 0
    stored: int = 0
    uncacheable: int = 0
    # the disk cache of captured frames (_frame_cache): frames run without a capture, frames recorded
    frames_loaded: int = 0
    frames_stored: int = 0
