"""The user API: ``kiln.compile``, ``kiln.explain``, ``kiln.disable``, ``kiln.reset``.

``kiln.compile`` mirrors ``torch.compile``: a function, an ``nn.Module`` (a module whose
calls are compiled is returned) or a decorator. Calling the result sets kiln's frame
callback for the duration of the call; every frame that starts meanwhile goes through
kiln.frameeval, whose cache answers hits in C and asks the policy (``_policy``) on misses.
Its ``mode``, ``options``, ``fullgraph`` and ``dynamic`` become the stages' typed configs
once, here (``_stage_configs``); ``kiln.reset`` starts a new ``kiln.Session``.
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
from ._logs import configure_from_env
from ._policy import FrameCompiler
from ._session import _CURRENT, new_session, session
from ._stage_configs import stage_configs

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
        return CompiledModule(model, callback)
    return _wrap(model, callback)


def _entry_code(model: Any) -> types.CodeType | None:
    """The code object of the function ``model`` runs first (a module: its forward)."""
    fn = type(model).forward if isinstance(model, torch.nn.Module) else model
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__code__", None)


def _wrap(fn: Callable[..., Any], callback: FrameCompiler) -> Callable[..., Any]:
    set_callback = fe.set_callback
    entry = callback.entry if callback.fullgraph else None
    current = _CURRENT  # the slot of the current Session (kiln.session() without a call)

    @functools.wraps(fn)
    def compiled(*args: Any, **kwargs: Any) -> Any:
        if entry is not None:
            # An earlier compile without fullgraph gave up on this code or broke its graph
            # (its cache entries would be used); fullgraph promises an error instead.
            stats = current.session.stats
            why = stats.eager_codes.get(entry) or stats.broken_codes.get(entry)
            if why is not None:
                raise Unsupported(f"{entry.co_qualname} cannot be compiled in one graph: {why}")
        previous = set_callback(callback)
        try:
            return fn(*args, **kwargs)
        finally:
            set_callback(previous)

    compiled._kiln_compiled = fn  # type: ignore[attr-defined]
    return compiled


class CompiledModule(torch.nn.Module):
    """The module ``kiln.compile(module)`` returns: calls go through kiln, state is shared.

    ``_orig_mod`` is the original module, registered as this module's only child (so its
    parameters are this module's, and ``state_dict`` keys start with ``_orig_mod.``, as
    torch's OptimizedModule's do). Everything else is the original's, as under
    torch.compile: attribute reads fall through to it, and ``setattr``/``delattr`` of any
    name this class does not define (plain attributes, parameters, buffers, submodules) go
    to it; ``training`` is the original's (``train()``/``eval()`` switch it), so the guards
    of compiled code see every change.
    """

    # Names that belong to the wrapper itself; any other attribute is the original module's.
    _OWN_ATTRIBUTES = frozenset({"_orig_mod", "_kiln_call", "_kiln_callback", "_kiln_ready",
                                 "__dict__"})

    def __init__(self, module: torch.nn.Module, callback: FrameCompiler) -> None:
        # Before nn.Module.__init__: attribute access on self reaches _orig_mod from then on,
        # and ``training`` (set by nn.Module.__init__) must not reach the original yet.
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_kiln_ready", False)
        super().__init__()
        self._kiln_ready = True
        self._orig_mod = module  # registers it as the child module
        self._kiln_callback = callback
        self._kiln_call = _wrap(module.__call__, callback)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._kiln_call(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        # copy.deepcopy and pickle rebuild the wrapper around the copied original module
        return (type(self), (self._orig_mod, self._kiln_callback))

    @property  # type: ignore[override]
    def training(self) -> bool:
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        if self.__dict__.get("_kiln_ready"):
            self._orig_mod.training = value

    def __getattr__(self, name: str) -> Any:
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._modules["_orig_mod"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in CompiledModule._OWN_ATTRIBUTES or hasattr(type(self), name):
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if name in CompiledModule._OWN_ATTRIBUTES or hasattr(type(self), name):
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)

    def __dir__(self) -> list[str]:
        own = self._orig_mod.__dir__()
        return own + [name for name in super().__dir__() if name not in own]


def disable(fn: Callable[..., Any] | None = None) -> Any:
    """Run ``fn`` without kiln, also when called from compiled code (decorator or call)."""
    if fn is None:
        return disable

    @functools.wraps(fn)
    def eager(*args: Any, **kwargs: Any) -> Any:
        previous = fe.set_callback(None)
        try:
            return fn(*args, **kwargs)
        finally:
            fe.set_callback(previous)

    eager._kiln_disabled = True  # type: ignore[attr-defined]
    return eager


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
    kiln before and after (entries compiled so far are forgotten)."""

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        target = getattr(fn, "_kiln_compiled", fn)
        if isinstance(target, CompiledModule):
            target = target._orig_mod
        configure_from_env()
        captures: list[Any] = []
        callback = FrameCompiler(lambda gm, example_inputs: gm.forward, observer=captures.append)
        call = target.__call__ if isinstance(target, torch.nn.Module) else target
        reset()
        try:
            fe.keep_installed(True)
            _wrap(call, callback)(*args, **kwargs)
            breaks = [_break_reason(b) for b in session().stats.breaks]
        finally:
            reset()
        graphs = [c.graph_module for c in captures if c.op_count]
        ops = [c.op_names for c in captures if c.op_count]
        guards = [g for c in captures for g in c.guards.ordered()]
        return ExplainOutput(graphs, len(graphs), len(breaks), breaks, sum(map(len, ops)), ops, guards)

    return run


def _break_reason(error: Unsupported | str) -> BreakReason:
    if isinstance(error, Unsupported):
        return BreakReason(error.reason, error.location, list(error.stack))
    return BreakReason(error, None)
