"""Session: everything kiln keeps from one compile to the next, in one object.

A Session owns the process state of the compiler:

- ``stats``: the compile policy's counters and per-code decisions (``Stats``): what was
  given up on, the guards of each capture, the automatic-dynamic memory (numbers and
  dimensions made dynamic), the graph breaks taken;
- ``symexec``: kiln.symexec's caches (``SymexecCaches``: decoded code, fake-op results,
  resume functions), passed explicitly to every capture;
- ``kernels``: kiln.inductor's loaded kernel libraries, one ``CppBuilder`` per cache
  directory (its in-process map from cache key to library), handed to the inductor stage
  through the CompileContext;
- ``graph_cache``: the counters of the disk cache of compiled captured graphs
  (``GraphCacheStats``, ``_compiled_cache``), handed to the inductor stage the same way;
- ``traces``: the structured trace's files and compile counter (``_trace.TraceFiles``). They
  are the process's, not one Session's: a Session takes the ``traces`` of the Session
  current when it is made, so ``kiln.reset()`` (and ``with kiln.Session()``) keep writing to
  the same file, with the compile numbers going on.

Later stages (autotuning results) add their caches here, never as module globals.

Exactly one Session is current: ``kiln.session()``. ``kiln.reset()`` replaces it with a fresh
one (and resets kiln.frameeval). A test that wants counters of its own makes a Session and
activates it with ``with``::

    with kiln.Session() as s:
        compiled(x)
    assert s.stats.captures == 1

Invariants:
- Activation is process-wide, not per thread (the compiled entries kiln.frameeval keeps on
  code objects beside it are process-wide too), and nests: leaving the block makes the
  Session that was current when it began current again, also after a ``kiln.reset()``
  inside it.
- kiln.frameeval's compiled entries are not the Session's: entries compiled before a
  ``with`` block still hit inside it, and entries compiled inside still hit after it (a hit
  never touches the Session); ``kiln.reset()`` is the clean slate for both.
- The policy reads ``kiln.session()`` once per cache miss and hands the Session's parts to
  the stages it calls; no stage looks the Session up itself. The pointer to the current
  Session (``_CURRENT``) is the one module-level reference kiln's state hangs from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kiln.symexec import SymexecCaches

from ._stats import GraphCacheStats, Stats
from ._trace import TraceFiles

__all__ = ["Session", "session"]


@dataclass(slots=True, eq=False)
class Session:
    """The counters and caches of kiln's compiler (see the module docstring); ``with
    session:`` makes it current for the block."""

    stats: Stats = field(default_factory=Stats)
    symexec: SymexecCaches = field(default_factory=SymexecCaches)
    kernels: dict[str, Any] = field(default_factory=dict)  # cache directory -> kiln.inductor CppBuilder
    graph_cache: GraphCacheStats = field(default_factory=GraphCacheStats)
    traces: TraceFiles = field(default_factory=lambda: _process_traces())
    _outer: list[Session] = field(default_factory=list, init=False, repr=False)

    def __enter__(self) -> Session:
        self._outer.append(_CURRENT.session)
        _CURRENT.session = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _CURRENT.session = self._outer.pop()


class _Current:
    """The slot holding the current Session."""

    __slots__ = ("session",)

    def __init__(self) -> None:
        self.session = Session()


def _process_traces() -> TraceFiles:
    """The trace files of the process: the current Session's (a new one for the first)."""
    return _CURRENT.session.traces if _CURRENT is not None else TraceFiles()


_CURRENT: _Current | None = None
_CURRENT = _Current()


def session() -> Session:
    """The current Session: whose counters and caches compiles use now."""
    return _CURRENT.session


def new_session() -> Session:
    """Make a fresh Session current (``kiln.reset``) and return it."""
    _CURRENT.session = fresh = Session()
    return fresh
