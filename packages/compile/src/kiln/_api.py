"""The user API: ``kiln.compile``, ``kiln.explain``, ``kiln.disable``, ``kiln.reset``.

``kiln.compile`` mirrors ``torch.compile``: a function, an ``nn.Module`` (a module whose
calls are compiled is returned) or a decorator. Calling the result sets kiln's frame
callback for the duration of the call; every frame that starts meanwhile goes through
kiln.frameeval, whose cache answers hits in C and asks the policy (``_policy``) on misses.
Its ``mode``, ``options``, ``fullgraph`` and ``dynamic`` become the stages' typed configs
once, here (``_stage_configs``); ``kiln.reset`` starts a new ``kiln.Session``. The wrappers
it returns (a function's, and ``CompiledModule``, which behaves like torch's OptimizedModule)
are ``_compiled_module``'s; ``kiln.disable`` is ``_disable``'s.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

import kiln.frameeval as fe
from kiln.symexec import SourceLocation, Unsupported

from ._backends import resolve_backend
from ._compile_key import compile_key
from ._compiled_module import CompiledModule, wrap_call
from ._disable import disable
from ._logs import configure_from_env
from ._policy import FrameCompiler
from ._session import new_session, session
from ._stage_configs import stage_configs
from ._trace import MemoryTrace

__all__ = ["CompiledModule", "ExplainOutput", "compile", "disable", "explain", "reset"]


def compile(
    model: Callable[..., Any] | None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable[..., Any] = "inductor",
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    disable: bool = False,
) -> Any:
    """Compile ``model`` (a function or nn.Module) like ``torch.compile``; see the module docstring.

    Used as ``@kiln.compile`` or ``@kiln.compile(fullgraph=True)`` it is a decorator. An
    unknown ``mode`` or ``options`` key is a ValueError naming the valid ones.
    """
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    configs = stage_configs(mode, options, fullgraph=fullgraph, dynamic=dynamic)
    if not callable(model):
        raise TypeError(f"kiln.compile expects a function or nn.Module, got {type(model).__name__}")
    if type(dynamic) not in (type(None), bool):
        raise TypeError(f"dynamic must be None, True or False, got {dynamic!r}")
    if disable:
        return model
    configure_from_env()
    # Setting a callback around each call is cheap only while the evaluation function stays
    # installed (otherwise every call installs and removes it: ~260 ns); the cost is the
    # hook's ~20 ns on other Python calls while no callback is set.
    fe.keep_installed(True)
    resolved = resolve_backend(backend)  # an unknown or unavailable backend fails here, early
    callback = FrameCompiler(resolved, configs, entry=_entry_code(model), key=compile_key(backend, configs))
    if isinstance(model, torch.nn.Module):
        recompile = functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                      mode=mode, options=options)
        return CompiledModule(model, callback, recompile)
    return wrap_call(model, callback)


def _entry_code(model: Any) -> types.CodeType | None:
    """The code object of the function ``model`` runs first (a module: its forward)."""
    fn = type(model).forward if isinstance(model, torch.nn.Module) else model
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__code__", None)


def reset() -> None:
    """Forget everything compiled: every cache entry and skip mark (kiln.frameeval), and
    every counter, decision and cache (a new current ``kiln.Session``); let the evaluation
    function go until the next ``kiln.compile``."""
    fe.reset()
    fe.keep_installed(False)
    new_session()


# -- explain -----------------------------------------------------------------------------------

@dataclass(slots=True)
class BreakReason:
    """Why capture stopped: the reason and where in the user's source."""

    reason: str
    location: SourceLocation | None
    stack: list[SourceLocation] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.reason}\n  at {self.location}" if self.location else self.reason


@dataclass(slots=True)
class ExplainOutput:
    """What kiln captures from one call (``kiln.explain(fn)(*args)``)."""

    graphs: list[Any]
    graph_count: int
    graph_break_count: int  # graph breaks taken plus frames that fell back to eager
    break_reasons: list[BreakReason]
    op_count: int
    ops_per_graph: list[list[str]]
    guards: list[Any]
    # the call's structured trace events (kiln._trace), for ``report``
    events: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def report(self, path: str) -> str:
        """Write the HTML report of this call (``kiln.report``: its frames, graphs, graph
        breaks with the user's lines, guards, symbolic sizes, transformed code) to ``path``;
        returns ``path``."""
        import os

        from kiln.report import render_events

        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(render_events(self.events, "kiln.explain report"))
        return path

    def __str__(self) -> str:
        lines = [f"graphs: {self.graph_count}, graph breaks: {self.graph_break_count}, "
                 f"ops: {self.op_count}, guards: {len(self.guards)}"]
        lines += [f"break: {r}" for r in self.break_reasons]
        return "\n".join(lines)


def explain(fn: Callable[..., Any]) -> Callable[..., ExplainOutput]:
    """``kiln.explain(fn)(*args, **kwargs)``: run one call of ``fn`` under kiln and describe
    what was captured: every graph (the frames ``fn`` starts, resume functions after graph
    breaks), each graph break and each frame that fell back to eager, with its reason and
    line, and the guards. Like ``torch._dynamo.explain`` it runs ``fn`` for real and resets
    kiln before and after (entries compiled so far are forgotten). ``.report(path)`` on the
    result writes the call's HTML report (``kiln.report``)."""

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        target = getattr(fn, "_kiln_compiled", fn)
        if isinstance(target, CompiledModule):
            target = target._orig_mod
        configure_from_env()
        captures: list[Any] = []
        trace = MemoryTrace()
        callback = FrameCompiler(lambda gm, example_inputs: gm.forward, observer=captures.append, trace_sink=trace)
        call = target.__call__ if isinstance(target, torch.nn.Module) else target
        reset()
        try:
            fe.keep_installed(True)
            wrap_call(call, callback)(*args, **kwargs)
            breaks = [_break_reason(b) for b in session().stats.breaks]
        finally:
            reset()
        graphs = [c.graph_module for c in captures if c.op_count]
        ops = [c.op_names for c in captures if c.op_count]
        guards = [g for c in captures for g in c.guards.ordered()]
        return ExplainOutput(graphs, len(graphs), len(breaks), breaks, sum(map(len, ops)), ops, guards,
                             trace.events)

    return run


def _break_reason(error: Unsupported | str) -> BreakReason:
    if isinstance(error, Unsupported):
        return BreakReason(error.reason, error.location, list(error.stack))
    return BreakReason(error, None)
