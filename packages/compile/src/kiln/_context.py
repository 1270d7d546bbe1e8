"""CompileContext: what the stages compiling one frame's graph share beyond ``(gm,
example_inputs)``: the ShapeEnv and the fake example inputs, with symbolic sizes; the typed
config of each stage (``configs``, from ``kiln.compile``'s ``mode``/``options``:
``_stage_configs``); a guard sink; and the time each phase took.

A callable backend keeps torch's signature ``backend(gm, example_inputs)`` (``example_inputs``
are the real values of the first call, as under torch.compile); while it runs,
``kiln.compile_context()`` returns the context of the graph it was given (as torch's
``TracingContext.get()`` does for torch's backends), and None anywhere else. kiln's own
stages (aotgrad, inductor) take it as an argument.

The guard sink (``guards``): a stage that compiles the graph under an assumption about the
frame's values that the capture's guards do not state (a value it specialized on) appends a
kiln.guards guard to it; the policy adds them to the frame's guard set, and they are checked
by the same checker, before the entry is used. The policy closes the sink when it compiles
the checker: a guard appended after that (a backend called again later for new inputs of a
graph already in the cache) is a RuntimeError, never silently dropped.

``timings``: seconds per phase of this frame's compile, as the policy measured them:
``capture`` (kiln.symexec), ``backend`` (the backend's compile, absent for a graph without
ops), ``guards`` (compiling the checker); logged with ``KILN_LOGS=perf``.

``trace``: the compile's structured trace (``_trace.CompileTrace``) when one is being written
(``kiln.config.trace_dir``, ``KILN_TRACE``, ``kiln.explain``), else None: kiln's stages record
what they made there (aotgrad's graphs, inductor's code, the disk caches' hits and misses).

Invariants:
- ``fake_inputs[i]`` stands for ``example_inputs[i]``: a kiln FakeTensor whose sizes and
  strides are ints or ``torch.SymInt`` over ``shape_env``'s symbols (``dynamic=True``, marked
  or automatically dynamic dimensions), or the example value itself for a non-tensor input.
- A graph whose ``symbolic`` is True serves every size its guards admit: a backend must not
  compile it for the example sizes only (kiln's eager backend runs the graph's own code).
- The context is set for the duration of one backend call, in that thread only.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from kiln.guards import Guard

from ._stage_configs import DEFAULT_CONFIGS, StageConfigs
from ._stats import GraphCacheStats
from ._trace import CompileTrace

__all__ = ["CompileContext", "GuardSink", "compile_context"]


class GuardSink:
    """Guards the stages add to one frame's guard set (see the module docstring)."""

    __slots__ = ("_closed", "_guards")

    def __init__(self) -> None:
        self._guards: list[Guard] = []
        self._closed = False

    def append(self, guard: Guard) -> None:
        """Add ``guard`` to the frame's guards; a RuntimeError once they are compiled."""
        if not isinstance(guard, Guard):
            raise TypeError(f"expected a kiln.guards Guard, got {type(guard).__name__}")
        if self._closed:
            raise RuntimeError(f"{guard.describe()}: the frame's guards are compiled already; "
                               "a stage adds guards while the frame's graph is first compiled")
        self._guards.append(guard)

    def extend(self, guards: Iterable[Guard]) -> None:
        """``append`` each of ``guards``."""
        for guard in guards:
            self.append(guard)

    def close(self) -> list[Guard]:
        """The guards added so far; no more may be added."""
        self._closed = True
        return list(self._guards)

    def __iter__(self) -> Iterator[Guard]:
        return iter(self._guards)

    def __len__(self) -> int:
        return len(self._guards)


@dataclass(frozen=True, slots=True)
class CompileContext:
    """The frame a graph comes from, its ShapeEnv and fake example inputs, the stages'
    configs, the guard sink and the phase timings (see the module docstring)."""

    code: types.CodeType
    shape_env: Any  # kiln.symshapes.ShapeEnv
    fake_inputs: tuple[Any, ...]
    configs: StageConfigs = DEFAULT_CONFIGS
    guards: GuardSink = field(default_factory=GuardSink)
    timings: dict[str, float] = field(default_factory=dict)
    kernels: dict[str, Any] = field(default_factory=dict)  # the Session's kernel libraries (kiln.inductor)
    graph_cache: GraphCacheStats = field(default_factory=GraphCacheStats)  # the Session's (_compiled_cache)
    # what the disk cache holds of the compiled graph ("graph": its record's variant), for the
    # disk cache of captured frames (_frame_cache)
    records: dict[str, Any] = field(default_factory=dict)
    trace: CompileTrace | None = None

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Add the seconds the block takes to ``timings[phase]``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[phase] = self.timings.get(phase, 0.0) + time.perf_counter() - start

    @property
    def symbolic(self) -> bool:
        """Whether some input size or stride is a symbol (the graph serves many sizes)."""
        return any(_symbolic_tensor(fake) for fake in self.fake_inputs)

    def varying_inputs(self) -> tuple[int, ...]:
        """Positions of the inputs whose value or size may differ between the calls the
        guards admit: tensors with a symbolic size, stride or offset, and numbers (kiln makes
        a number a graph input only when it varies)."""
        return tuple(i for i, fake in enumerate(self.fake_inputs)
                     if _symbolic_tensor(fake) or not (fake is None or isinstance(fake, torch.Tensor)))

    def symbolic_dims(self) -> list[tuple[int, ...]]:
        """Per input, the dimensions whose size is a symbol (empty for non-tensors)."""
        return [tuple(d for d, size in enumerate(fake.shape) if isinstance(size, torch.SymInt))
                if isinstance(fake, torch.Tensor) else () for fake in self.fake_inputs]


def _symbolic_tensor(fake: Any) -> bool:
    return isinstance(fake, torch.Tensor) and any(
        isinstance(v, torch.SymInt) for v in (*fake.shape, *fake.stride(), fake.storage_offset()))


_current: contextvars.ContextVar[CompileContext | None] = contextvars.ContextVar("kiln_compile_context", default=None)


def compile_context() -> CompileContext | None:
    """The CompileContext of the graph whose backend is running now, else None."""
    return _current.get()


@contextlib.contextmanager
def active(context: CompileContext | None) -> Iterator[None]:
    """``context`` is ``compile_context()`` inside."""
    token = _current.set(context)
    try:
        yield
    finally:
        _current.reset(token)


def context_of(cap: Any, configs: StageConfigs = DEFAULT_CONFIGS, timings: dict[str, float] | None = None,
               kernels: dict[str, Any] | None = None, graph_cache: GraphCacheStats | None = None,
               trace: CompileTrace | None = None) -> CompileContext:
    """The context of a kiln.symexec Capture's graph, compiled with ``configs``; ``kernels``:
    the Session's kernel libraries; ``graph_cache``: its graph cache's counters; ``trace``: the
    compile's structured trace, if any."""
    return CompileContext(cap.code, cap.shape_env, cap.fake_inputs, configs, GuardSink(), dict(timings or {}),
                          kernels if kernels is not None else {},
                          graph_cache if graph_cache is not None else GraphCacheStats(), trace=trace)
