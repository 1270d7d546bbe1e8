"""Backends: what turns a captured GraphModule into the callable the replacement code runs.

A backend is a name from ``backend_rules`` or any callable ``backend(gm, example_inputs)``
returning a callable. A named backend is a list of stages, readable as data (``STAGES``):
``"eager"`` has none and runs the graph's generated Python (``gm.forward``); ``"aot_eager"``
is ``[aotgrad]``: kiln.aotgrad's functional forward and backward ATen graphs, run as their
generated Python by an ``autograd.Function``; a graph aotgrad cannot take (it says why,
``AotUnsupported``) runs as captured, with the reason logged. ``"inductor"`` (``[aotgrad,
inductor]``, the default) has kiln.inductor compile aotgrad's forward and backward ATen
graphs into C++ kernels (CPU tensors; ops without a lowering, and other devices, run as ATen
calls from its wrapper).

``compile_graph`` is the one place a backend is called. Invariants (as under torch.compile):

- The backend runs with kiln's frame callback off: its own Python (torch's compile_fx, a
  user's helper functions, a torch.fx GraphModule it traces) is never captured.
- An exception the backend raises reaches the caller as ``BackendCompilerFailed``, chaining
  the original (``__cause__`` and ``inner_exception``).
- Whatever callable the backend returns runs with the callback off too (what it runs is the
  backend's business: an AOT runtime wrapper, generated ``call`` code, kernels), except the
  graph's own generated code (``gm`` or ``gm.forward``, written by kiln.fxgraph, as the
  backend was given it) when the graph provably starts no frame of user code: that one is
  called directly, saving a wrapper frame on every cache hit. Whether it can is kiln.symexec's
  answer (``Capture.may_start_user_frames``), which the caller passes; this module never
  looks inside the graph.
- Exceptions the compiled callable raises while it runs pass through unchanged.
- A graph with inputs that vary between the calls its guards admit (a size that is a
  symbol, a number taken as an input: ``kiln.compile_context()``) is only given as is to
  code known to serve every such input: the graph's own code, or a backend that says so
  (``backend.handles_dynamic_inputs = True``). Anything else a backend returns (torch's
  ``aot_eager`` or ``compile_fx`` behind ``to_torch_fx``, which compile for the example
  inputs' sizes and numbers) runs only on inputs like its examples; for others the backend
  is called again with them (``config.recompile_limit`` times at most per graph), and past
  that the graph's own code runs them (``specialized``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import types
from collections.abc import Callable
from typing import Any

import torch

import kiln.frameeval as fe

from ._context import CompileContext, active, compile_context

__all__ = ["BackendCompilerFailed", "BackendUnavailable", "backend_rules", "compile_graph",
           "resolve_backend"]

Backend = Callable[[Any, list[Any]], Callable[..., Any]]
_log = logging.getLogger("kiln")


class BackendUnavailable(RuntimeError):
    """The named backend is unknown."""


class BackendCompilerFailed(RuntimeError):
    """A backend raised while compiling a graph (torch's exception of the same name).

    ``backend_name`` names the backend, ``inner_exception`` is what it raised (also the
    ``__cause__``)."""

    def __init__(self, backend: Any, inner: BaseException) -> None:
        self.backend_name = backend_name(backend)
        self.inner_exception = inner
        super().__init__(f"backend={self.backend_name!r} raised:\n{type(inner).__name__}: {inner}")


def _aotgrad(gm: Any, example_inputs: list[Any], context: CompileContext | None,
             accept_guards: Callable[[list[Any]], bool] | None = None, **compilers: Any) -> Callable[..., Any]:
    """kiln.aotgrad's forward/backward graphs of ``gm``; ``gm.forward`` where it cannot.
    ``compilers``: ``fw_compiler``, ``bw_compiler`` and ``decompositions`` (a later stage's);
    ``accept_guards``: the taker of relations the trace decides (default: the frame's guard
    sink, ``_guard_sink``)."""
    from kiln.aotgrad import AotUnsupported, aot_compile

    partitioner = context.configs.aotgrad.partitioner if context is not None else "min_cut"
    trace = context.trace if context is not None else None
    try:
        return aot_compile(gm, example_inputs, context, partitioner=partitioner,
                           accept_guards=accept_guards or _guard_sink(context),
                           on_graphs=trace.aot_graphs if trace is not None else None, **compilers)
    except AotUnsupported as e:
        _log.warning("kiln.aotgrad cannot take this graph (%s); it runs as captured", e)
        return gm.forward
    except Exception:
        from ._config import config

        if config.raise_internal_errors:
            raise
        _log.warning("kiln.aotgrad failed on this graph (an error of kiln's); it runs as captured",
                     exc_info=True)
        return gm.forward


def _inductor(gm: Any, example_inputs: list[Any], context: CompileContext | None) -> Callable[..., Any]:
    """aotgrad, with kiln.inductor compiling its forward and backward ATen graphs; an ATen
    graph inductor fails on runs as its generated code (the reason logged). With the graph
    cache on (``kiln.config.graph_cache`` and the inductor config's ``graph_cache``), what a
    process compiled before for this graph and these inputs is loaded from disk instead
    (``_compiled_cache``), and what is compiled here is recorded."""
    from kiln.inductor import InductorConfig, aten_compiler, decompositions, start_compile_workers

    from . import _compiled_cache
    from ._config import config as kiln_config

    config = context.configs.inductor if context is not None else InductorConfig()
    if config.graph_cache and not kiln_config.graph_cache:
        config = dataclasses.replace(config, graph_cache=False)
    key = None
    trace = context.trace if context is not None else None
    if context is not None and config.graph_cache:
        key = cache_step(_compiled_cache.key_of, gm, example_inputs, context)
        if key is None:
            context.graph_cache.uncacheable += 1
            if trace is not None:
                trace.cache("graph", "uncacheable")
        else:
            runtime = cache_step(_compiled_cache.load, key, context, _guard_sink(context))
            if trace is not None:
                trace.cache("graph", "miss" if runtime is None else "hit")
            if runtime is not None:
                context.graph_cache.hits += 1
                context.records["graph"] = runtime.cache_variant
                return runtime
            context.graph_cache.misses += 1
    start_compile_workers(config, example_inputs)  # they start triton while aotgrad traces
    compile_aten = aten_compiler(config, context.kernels if context is not None else None)
    halves: dict[str, Any] = {}

    def compiler_of(half: str) -> Callable[[Any], Callable[..., Any]]:
        def compiler(aten_gm: Any) -> Callable[..., Any]:
            start = time.perf_counter()
            try:
                compiled = compile_aten(aten_gm)
            except Exception:
                if kiln_config.raise_internal_errors:
                    raise
                _log.warning("kiln.inductor failed on this ATen graph (an error of kiln's); it runs as "
                             "generated Python", exc_info=True)
                compiled = aten_gm.forward
            halves[half] = compiled
            if trace is not None:
                trace.inductor(half, getattr(compiled, "compiled", None), time.perf_counter() - start)
            return compiled

        return compiler

    sink = _guard_sink(context)
    accepted: list[Any] = []

    def accept(exprs: list[Any]) -> bool:
        taken = sink is not None and sink(exprs)
        if taken:
            accepted.extend(exprs)
        return taken

    runtime = _aotgrad(gm, example_inputs, context, accept, fw_compiler=compiler_of("forward"),
                       bw_compiler=compiler_of("backward"), decompositions=decompositions())
    if key is not None and cache_step(_compiled_cache.store, key, runtime, halves, accepted, context):
        context.graph_cache.stored += 1
        context.records["graph"] = runtime.cache_variant
        if trace is not None:
            trace.cache("graph", "stored")
    return runtime


def cache_step(step: Callable[..., Any], *args: Any) -> Any:
    """``step(*args)`` of the disk cache of compiled graphs; None, with a warning, when it
    fails (an error of kiln's: the graph is compiled as if the cache were off), unless
    ``config.raise_internal_errors``."""
    from ._config import config

    try:
        return step(*args)
    except Exception:
        if config.raise_internal_errors:
            raise
        _log.warning("kiln: a disk cache (of compiled graphs or captured frames) failed (an error of kiln's); "
                     "the frame is compiled without it", exc_info=True)
        return None


def _guard_sink(context: CompileContext | None) -> Callable[[list[Any]], bool] | None:
    """A taker for relations on symbolic sizes a stage decided: each becomes a guard of the
    frame (``context.guards``) when every symbol in it is one of the frame's, with a source;
    else nothing is added and it answers False."""
    if context is None or context.shape_env is None:
        return None
    env = context.shape_env

    def accept(exprs: list[Any]) -> bool:
        from kiln.guards import ShapeRelation

        guards = []
        for expr in exprs:
            sources = {sym: env.source_of(sym) for sym in expr.free_symbols}
            if any(source is None for source in sources.values()):
                return False
            try:
                guards.append(ShapeRelation(expr, sources))
            except (TypeError, ValueError):
                return False
        for guard in guards:
            context.guards.append(guard)
        return True

    return accept


# Each named backend as the stages it runs, in order: a stage takes (gm, example_inputs,
# context) and returns the callable to run.
STAGES: dict[str, tuple[Callable[..., Any], ...]] = {
    "eager": (),
    "aot_eager": (_aotgrad,),
    "inductor": (_aotgrad, _inductor),  # the last stage runs the ones before it
}


def _staged(name: str) -> Backend:
    stages = STAGES[name]

    def backend(gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
        if not stages:
            return gm.forward
        return stages[-1](gm, example_inputs, compile_context())

    backend.__qualname__ = backend.__name__ = name
    # aotgrad's graphs compute every size from the inputs (a trace that would need a new
    # guard on a size is refused), so they serve every input the frame's guards admit
    backend.handles_dynamic_inputs = True  # type: ignore[attr-defined]
    return backend


backend_rules: dict[str, Backend] = {name: _staged(name) for name in STAGES}


def _torch_inductor(gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
    """torch's Inductor compiling kiln's captured graph (kiln's frontend, torch's backend):
    the reverse of ``torch.compile(backend=kiln.inductor.backend)``, to compare the two
    backends on identical graphs. It compiles for the example inputs' sizes and numbers."""
    from torch._inductor.compile_fx import compile_fx

    from kiln.fxgraph.torch_fx import to_torch_fx

    return compile_fx(to_torch_fx(gm), list(example_inputs))


backend_rules["torch_inductor"] = _torch_inductor


def resolve_backend(backend: str | Backend) -> Backend:
    """The backend callable for a name or callable; an unknown name is an error."""
    if callable(backend):
        return backend
    if isinstance(backend, str) and backend in backend_rules:
        return backend_rules[backend]
    known = sorted(backend_rules)
    raise BackendUnavailable(f"unknown backend {backend!r}; known: {', '.join(known)}")


def backend_name(backend: Any) -> str:
    """A readable name of a backend: its registered name, else its qualified name."""
    for name, rule in backend_rules.items():
        if rule is backend:
            return name
    return getattr(backend, "__qualname__", None) or getattr(backend, "__name__", None) \
        or type(backend).__qualname__


def compile_graph(backend: Backend, gm: Any, example_inputs: list[Any],
                  context: CompileContext | None = None, *,
                  may_start_user_frames: bool = True) -> Callable[..., Any]:
    """Call ``backend(gm, example_inputs)`` with capture off, ``context`` as
    ``kiln.compile_context()``, and return the callable the replacement code should run (see
    the module docstring). ``may_start_user_frames``: kiln.symexec's answer for ``gm``
    (``Capture.may_start_user_frames``); the default, True, never calls the graph's code
    directly. Raises ``BackendCompilerFailed`` when the backend raises."""
    captured = getattr(type(gm), "forward", None)
    compiled = _call_backend(backend, gm, example_inputs, context)
    if not callable(compiled):
        raise BackendCompilerFailed(
            backend, TypeError(f"a backend must return a callable, got {type(compiled).__name__}"))
    if _is_graph_code(compiled, gm):
        # the answer is about the graph as captured: code a backend regenerated is not it
        direct = not may_start_user_frames and getattr(type(gm), "forward", None) is captured
        return compiled if direct else _capture_off(compiled)
    varying = context.varying_inputs() if context is not None else ()
    if varying and not getattr(backend, "handles_dynamic_inputs", False):
        compiled = specialized(backend, gm, example_inputs, context, compiled, varying)
    return _capture_off(compiled)


def _call_backend(backend: Backend, gm: Any, example_inputs: list[Any], context: CompileContext | None) -> Any:
    """``backend(gm, example_inputs)`` with the frame callback off and ``context`` active; its
    exception as ``BackendCompilerFailed``."""
    previous = fe.set_callback(None)
    try:
        with active(context):
            return backend(gm, example_inputs)
    except Exception as e:
        raise BackendCompilerFailed(backend, e) from e
    finally:
        fe.set_callback(previous)


def _input_key(args: tuple, varying: tuple[int, ...]) -> tuple:
    key = []
    for i in varying:
        a = args[i]
        if isinstance(a, torch.Tensor):
            key.append((tuple(a.shape), a.stride(), a.storage_offset()))
        else:
            key.append((type(a), a))
    return tuple(key)


def specialized(backend: Backend, gm: Any, example_inputs: list[Any], context: CompileContext | None,
                compiled: Callable[..., Any], varying: tuple[int, ...]) -> Callable[..., Any]:
    """``compiled`` for inputs like ``example_inputs`` (equal sizes, strides and numbers at
    the ``varying`` positions); the backend called again for others, up to
    ``config.recompile_limit`` versions, then the graph's own code (see the module
    docstring)."""
    from ._config import config

    versions = {_input_key(tuple(example_inputs), varying): compiled}
    fallback = gm.forward

    def run_graph(*args: Any) -> Any:
        key = _input_key(args, varying)
        fn = versions.get(key)
        if fn is None:
            if len(versions) >= config.recompile_limit:
                return fallback(*args)
            fn = versions[key] = _call_backend(backend, gm, list(args), context)
        return fn(*args)

    return run_graph


def _is_graph_code(compiled: Any, gm: Any) -> bool:
    """Whether ``compiled`` is the graph's own generated code (kiln.fxgraph wrote it: calling
    ``gm`` or ``gm.forward`` runs that one function and nothing else of Python's)."""
    forward = getattr(type(gm), "forward", None)
    return (compiled is gm or compiled is forward) and isinstance(forward, types.FunctionType) \
        and forward.__code__.co_filename.startswith("<kiln.fxgraph ")


def loaded_runtime(runtime: Callable[..., Any]) -> Callable[..., Any]:
    """What ``compile_graph`` returns for backend ``"inductor"``'s ``runtime`` loaded from disk
    (the disk cache of captured frames): its runtime with capture off (it is not the graph's
    own code, and it serves every input the frame's guards admit)."""
    return _capture_off(runtime)


def _capture_off(compiled: Callable[..., Any]) -> Callable[..., Any]:
    """``compiled`` run with no frame callback: what it runs (a runtime wrapper, generated
    code, a custom op's Python implementation) runs as it is, never compiled as a frame of
    its own (as torch.compile disables itself around its compiled graphs)."""
    set_callback = fe.set_callback

    def run_graph(*args: Any) -> Any:
        previous = set_callback(None)
        try:
            return compiled(*args)
        finally:
            set_callback(previous)

    return run_graph
