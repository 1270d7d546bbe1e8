"""The compile policy: what happens when a frame starts inside a compiled call.

``FrameCompiler`` is the callback kiln.frameeval calls on a cache miss. It decides, in order:

1. Code kiln must never compile as a root (kiln's own and generated code, the standard
   library, numpy, torch's internals other than ``forward`` methods): ``SKIP``, after which C never
   asks again. Model code shipped inside kiln's packages (the demo's GPT) is the user's by
   an explicit marker: its module sets ``__kiln_user_code__ = True`` (``USER_CODE_MARK``).
   A frame called by a ``kiln.disable(fn, recursive=False)`` wrapper runs as it is, that
   once (its callees are compiled as usual).
2. Code already given up on (a failure, or its recompile limit): run it as it is.
3. Otherwise capture the frame (kiln.symexec), compile the graph with the backend, add a
   cache entry ``(guard check, replacement code)`` and run the replacement. The checker
   holds the capture's guards and those the stages put in the frame's ``CompileContext``
   guard sink while compiling the graph. Where tracing
   fails at a call or a branch of the frame, the capture ends there (a graph break, logged
   with ``KILN_LOGS=graph_breaks``): the replacement runs the graph, the instruction, and a
   resume function, itself a frame compiled the same way.

The backend is called through ``_backends.compile_graph``: it and what it returns run with
the callback off (but for the graph's own code where kiln.symexec says it starts no user
frame, ``Capture.may_start_user_frames``). The policy asks the Capture what it needs (its
fake inputs, what its guards fix for automatic dynamic) and never inspects guard kinds or
graph nodes itself. What kiln cannot capture (``Unsupported``) where no graph break is possible
falls back to eager for that code, logged once with the reason and the user's line; with
``fullgraph`` it raises ``kiln.Unsupported`` (no graph breaks). A backend's failure
(``BackendCompilerFailed``: the user's callable raised) reaches the caller, as under
torch.compile, unless ``config.suppress_errors`` asks for eager with a warning. An error of
kiln's own while capturing a frame is a limit of kiln, not the user's: the frame runs eagerly
with a warning carrying the traceback (never a broken program), unless ``fullgraph`` or
``config.raise_internal_errors`` (what kiln's tests set). Recompiles are logged
(``KILN_LOGS=recompiles``) with the guard that failed for each existing entry. Which numbers
and tensor dimensions each capture makes dynamic is ``_automatic_dynamic``'s memory (learned
from failed guards, inherited by resume functions and by frames a compiled code calls), which
``_recompile_memory`` keeps in the cache directory across processes
(``config.recompile_memory``).

Everything the policy records and every cache it hands to a stage belongs to the current
``kiln.Session`` (``_session``), read once per miss: its ``stats`` (counters, decisions,
the automatic-dynamic memory) and its ``symexec`` caches, passed to ``capture``. The time of
each phase (capture, backend, guards) is on the frame's ``CompileContext``
(``KILN_LOGS=perf``).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import sysconfig
import time
import types
import warnings
from pathlib import Path
from typing import Any

import torch

import kiln.frameeval as fe
from kiln.inductor import cache_root
from kiln.symexec import ConstraintViolation, Specializations, Unsupported, capture
from kiln.symexec.bytecode import RESUME_PREFIX

from . import _frame_cache
from ._automatic_dynamic import (
    dynamic_dims,
    dynamic_numbers,
    inherit_from_caller,
    inherit_resume_inputs,
)
from ._backends import BackendCompilerFailed, backend_rules, cache_step, compile_graph
from ._compile_key import SameCompile
from ._config import config
from ._context import CompileContext, context_of
from ._disable import NONRECURSIVE_CODE
from ._gc import deferred_full_collections
from ._logs import artifact_logger
from ._recompile_memory import recall, remember
from ._session import Session, session
from ._stage_configs import DEFAULT_CONFIGS, StageConfigs
from ._stats import Stats
from ._trace import CompileTrace, trace_dir

__all__ = ["USER_CODE_MARK", "FrameCompiler", "never_root"]

_log = logging.getLogger("kiln")
# A module inside kiln's packages whose code is the user's (the demo's model) sets this
# global to True; kiln's other code is never a root.
USER_CODE_MARK = "__kiln_user_code__"
_STDLIB = os.path.normcase(sysconfig.get_paths()["stdlib"]) + os.sep
_TORCH = os.path.normcase(os.path.dirname(torch.__file__)) + os.sep
# third-party libraries whose frames are never a root: those torch's frontend skips (numpy's own
# Python functions are reached after a graph break at a numpy call kiln does not translate), and
# the libraries torch imports lazily and the import machinery they bring (sympy,
# typing_extensions, setuptools' import hook: their code ran as roots when a compiled call first
# reached a torch API that imports them)
_THIRD_PARTY = ("numpy", "pandas", "sklearn", "networkx", "hypothesis", "tqdm", "tabulate", "onnx", "onnxruntime",
                "tensorflow", "tensorrt", "tree", "tvm", "xarray", "sympy", "typing_extensions", "_distutils_hack")


@functools.cache
def _third_party_dirs() -> tuple[str, ...]:
    import importlib.util

    dirs = []
    for name in _THIRD_PARTY:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        if spec.submodule_search_locations:  # a package: its directory
            dirs += [os.path.normcase(location) + os.sep for location in spec.submodule_search_locations]
        elif spec.origin:  # a single module (typing_extensions.py): its file
            dirs.append(os.path.normcase(spec.origin))
    return tuple(dirs)


@functools.cache
def _kiln_dirs() -> tuple[str, ...]:
    import kiln

    return tuple(os.path.normcase(p) + os.sep for p in kiln.__path__)


def never_root(code: types.CodeType, f_globals: dict[str, Any]) -> bool:
    """Whether ``code`` (of a function whose globals are ``f_globals``) must never be
    captured as the root of a graph."""
    filename = code.co_filename
    if filename.startswith(("<kiln", "<frozen ")):  # kiln's own code; frozen stdlib (importlib)
        return True
    if filename.startswith("<") and _library_module(f_globals.get("__name__")):
        # code made with exec in a library's namespace (dataclass-generated methods of torch's
        # and sympy's classes, run when a compiled call reaches a torch API that imports them)
        return code.co_name != "forward"
    if f_globals.get("_tuple_new") is tuple.__new__:
        # a namedtuple class's generated ``__new__`` (its globals are collections' namespace
        # for it): the replacement code calls it to rebuild a namedtuple output
        return True
    path = os.path.normcase(filename)
    if path.startswith(_kiln_dirs()):
        return f_globals.get(USER_CODE_MARK) is not True
    if path.startswith(_TORCH):
        return code.co_name != "forward" and not code.co_name.startswith(RESUME_PREFIX)
    if path.startswith(_third_party_dirs()):
        return True
    return path.startswith(_STDLIB) and "site-packages" not in path


def _library_module(name: Any) -> bool:
    """Whether module ``name`` belongs to torch or a library in ``_THIRD_PARTY``."""
    if not isinstance(name, str):
        return False
    top = name.partition(".")[0]
    return top == "torch" or top in _THIRD_PARTY


class FrameCompiler:
    """The frameeval callback of one ``kiln.compile`` configuration.

    It keeps no state of its own between misses: each miss works on the current Session
    (``kiln.session()``), read once, whose parts it hands to each stage."""

    def __init__(self, backend: Any, configs: StageConfigs = DEFAULT_CONFIGS, *,
                 entry: types.CodeType | None = None, observer: Any = None, key: Any = None,
                 trace_sink: Any = None) -> None:
        self.backend = backend
        self.configs = configs
        self.key = key  # which kiln.compile configuration: each entry it makes is guarded by it
        self.observer = observer  # called with each Capture made (kiln.explain)
        # also given each compile's trace events, besides the trace folder's file (kiln.explain's)
        self.trace_sink = trace_sink
        # ``fullgraph`` is about the compiled function itself; other frames that start during
        # the call (callees of code run eagerly, constructors the replacement calls) fall back.
        self.entry = entry

    @property
    def fullgraph(self) -> bool:
        return self.configs.capture.fullgraph

    @property
    def dynamic(self) -> bool | None:
        """None: automatic; False: every value specialized (no automatic dynamic numbers)."""
        return self.configs.capture.dynamic

    def __call__(self, code: types.CodeType, L: dict[str, Any], func: Any) -> Any:
        if never_root(code, func.__globals__):
            return fe.SKIP
        # the frame that calls ``code`` (the new frame is not linked in yet)
        caller = sys._getframe(1)
        if caller.f_code is NONRECURSIVE_CODE:
            return None  # kiln.disable(fn, recursive=False): fn's frame runs as it is, this once
        current = session()
        stats = current.stats
        if code in stats.eager_codes:
            return None
        entries = fe.get_cache_entries(code)
        trace = current.traces.begin(trace_dir(), self.trace_sink)
        if trace is None:
            return self._miss(current, code, L, func, entries, caller, None)
        trace.frame(code, *_why(code, L, func, entries))
        try:
            result = self._miss(current, code, L, func, entries, caller, trace)
        except BaseException as e:
            trace.finish(e)
            raise
        trace.finish()
        return result

    def _miss(self, current: Session, code: types.CodeType, L: dict[str, Any], func: Any, entries: list[Any],
              caller: types.FrameType, trace: CompileTrace | None) -> Any:
        """Compile ``code``'s frame (or decide it runs as it is); see the module docstring."""
        stats = current.stats
        if entries and not self._may_recompile(stats, code, L, func, entries, trace):
            return None
        strict = self.fullgraph and code is self.entry
        try:
            with deferred_full_collections():  # (``_gc``: no walk of the whole heap mid-compile)
                return self._compile(current, code, L, func, graph_breaks=not strict, caller=caller, trace=trace)
        except ConstraintViolation:
            raise  # the user's mark_dynamic contradicts the code: theirs to know
        except Unsupported as e:
            if strict:
                raise
            return self._give_up(stats, code, entries, e, trace)
        except BackendCompilerFailed as e:
            if strict or not config.suppress_errors:
                raise
            _log.warning("kiln: compiling %s failed, running it eagerly: %s: %s",
                         code.co_qualname, type(e).__name__, e, exc_info=True)
            return self._give_up(stats, code, entries, f"backend error: {e}", trace)
        except Exception as e:
            if strict or config.raise_internal_errors:
                raise
            _log.warning("kiln: compiling %s failed, running it eagerly: %s: %s",
                         code.co_qualname, type(e).__name__, e, exc_info=True)
            return self._give_up(stats, code, entries, f"internal error: {type(e).__name__}: {e}", trace)

    def _may_recompile(self, stats: Stats, code: types.CodeType, L: dict[str, Any], func: Any,
                       entries: list[Any], trace: CompileTrace | None) -> bool:
        # Each entry's checker explains its own first failing guard; explanations are only
        # worked out for a log that is on or for the limit's warning.
        def reason(entry: Any) -> str:
            return entry.guard.explain(L, func.__globals__) or "(passes now)"

        rec = artifact_logger("recompiles")
        if rec.isEnabledFor(logging.INFO):
            rec.info("recompiling %s (%s:%s): %s", code.co_qualname, code.co_filename,
                     code.co_firstlineno, reason(entries[0]))
        verbose = artifact_logger("recompiles_verbose")
        if verbose.isEnabledFor(logging.INFO):
            for i, entry in enumerate(entries):
                verbose.info("  entry %d of %s: %s", i, code.co_qualname, reason(entry))
        if len(entries) >= config.recompile_limit:
            why = reason(entries[0])
            warnings.warn(
                f"kiln: {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}) reached "
                f"recompile_limit={config.recompile_limit}; it runs eagerly from now on. "
                f"Last failing guard: {why}", stacklevel=3)
            stats.eager_codes[code] = f"recompile_limit reached: {why}"
            if trace is not None:
                trace.add("recompile_limit", limit="recompile_limit", value=config.recompile_limit, reason=why)
            return False
        if stats.entries >= config.accumulated_recompile_limit:
            warnings.warn(
                f"kiln: accumulated_recompile_limit={config.accumulated_recompile_limit} reached; "
                f"{code.co_qualname} runs eagerly", stacklevel=3)
            stats.eager_codes[code] = "accumulated_recompile_limit reached"
            if trace is not None:
                trace.add("recompile_limit", limit="accumulated_recompile_limit",
                          value=config.accumulated_recompile_limit, reason=reason(entries[0]))
            return False
        return True

    def _compile(self, current: Session, code: types.CodeType, L: dict[str, Any], func: Any, *,
                 graph_breaks: bool, caller: types.FrameType | None, trace: CompileTrace | None = None) -> Any:
        stats = current.stats
        dynamic = self.dynamic
        automatic = dynamic is None
        if automatic:
            inherit_from_caller(stats, code, L, caller)
        on_disk = dynamic is not False and config.recompile_memory
        if on_disk:
            memory_root = str(cache_root(self.configs.inductor))
            recall(stats, code, memory_root)
        numbers = dynamic_numbers(stats, code, L, func.__globals__, learn=dynamic is not False)
        dims = dynamic_dims(stats, code, L, func.__globals__, learn=automatic)
        if on_disk:
            remember(stats, code, memory_root)
        frames = self._frame_record(code, numbers, dims, graph_breaks)
        if frames is not None:
            start = time.perf_counter()
            loaded = cache_step(_frame_cache.load, *frames, code, L, func.__globals__, self.key,
                                 CompileContext(code, None, (), self.configs, kernels=current.kernels,
                                                graph_cache=current.graph_cache, trace=trace))
            if trace is not None:
                trace.cache("frame", "miss" if loaded is None else "hit")
            if loaded is not None:
                return self._install_loaded(current, loaded, time.perf_counter() - start, trace)
        stats.captures += 1
        start = time.perf_counter()
        cap = capture(code, L, func.__globals__, graph_breaks=graph_breaks, dynamic_numbers=numbers,
                      dynamic_shapes=dynamic is True, dynamic_dims=dims, caches=current.symexec)
        context = context_of(cap, self.configs, {"capture": time.perf_counter() - start}, current.kernels,
                             current.graph_cache, trace)
        if trace is not None:
            trace.timings = context.timings
            trace.capture(cap, dims, numbers, dynamic)
        stats.code_guards.setdefault(code, []).append(cap.specializations)
        if dynamic is not False:
            inherit_resume_inputs(stats, cap, dims=automatic)
        if self.observer is not None:
            self.observer(cap)
        if cap.graph_break is not None:
            stats.breaks.append(cap.graph_break)  # detached by capture()
            stats.broken_codes[code] = str(cap.graph_break)
            artifact_logger("graph_breaks").info("graph break in %s: %s", code.co_qualname, cap.graph_break)
        gm = cap.graph_module
        fe.mark_skip(gm.forward.__code__)  # the graph's generated code is never a root
        compiled = None
        if cap.op_count:
            with context.timed("backend"):
                compiled = compile_graph(self.backend, gm, list(cap.example_inputs), context,
                                         may_start_user_frames=cap.may_start_user_frames)
        template = cap.replacement_template() if frames is not None else None  # compiled once, also kept
        replacement = cap.replacement(compiled, template)
        if trace is not None:
            replacement = trace.source_file(replacement)  # a file a debugger can step through
        stats.originals[id(replacement)] = (replacement, code)
        with context.timed("guards"):
            cap.guards.extend(context.guards.close())  # what the stages added: the same checker
            if self.key is not None:
                cap.guards.add(SameCompile(self.key))  # another backend or options compiles anew
            check = cap.guards.compile(func.__globals__)
        fe.add_cache_entry(code, check, replacement)
        stats.entries += 1
        stats.unique_graphs += bool(cap.op_count)
        _log_capture(code, cap, replacement, context)
        if trace is not None:
            trace.guards(cap.guards, check)
            trace.transformed(replacement, cap.source_text)
            trace.status = "compiled"
        if frames is not None and cache_step(_frame_cache.store, *frames, cap, check, template,
                                              context.records.get("graph"), func.__globals__):
            current.graph_cache.frames_stored += 1
            if trace is not None:
                trace.cache("frame", "stored")
        return replacement

    def _frame_record(self, code: types.CodeType, numbers: frozenset[Any], dims: dict[Any, frozenset[int]],
                      graph_breaks: bool) -> tuple[Path, str] | None:
        """Where the disk cache of captured frames keeps ``code``'s frame as the policy
        decided it, or None when that cache is not used (``_frame_cache``: backend
        "inductor" with both disk caches on; not for kiln.explain, which needs the capture)."""
        if not (config.frame_cache and config.graph_cache and self.configs.inductor.graph_cache) \
                or self.observer is not None or self.backend is not backend_rules["inductor"]:
            return None
        key = _frame_cache.frame_key(code, "inductor", self.configs, numbers, dims, graph_breaks)
        return cache_root(self.configs.inductor), key

    def _install_loaded(self, current: Session, loaded: Any, seconds: float,
                        trace: CompileTrace | None = None) -> types.CodeType:
        """Install an entry the disk cache of captured frames gave, and record it as the
        capture it stands for would have been."""
        stats, code = current.stats, loaded.code
        current.graph_cache.frames_loaded += 1
        current.graph_cache.hits += bool(loaded.op_count)
        stats.code_guards.setdefault(code, []).append(Specializations(loaded.guards))
        if self.dynamic is not False:
            inherit_resume_inputs(stats, loaded, dims=self.dynamic is None)
        if loaded.graph_break is not None:
            stats.breaks.append(loaded.graph_break)
            stats.broken_codes[code] = loaded.graph_break
            artifact_logger("graph_breaks").info("graph break in %s: %s", code.co_qualname, loaded.graph_break)
        replacement = loaded.replacement if trace is None else trace.source_file(loaded.replacement)
        stats.originals[id(replacement)] = (replacement, code)
        fe.add_cache_entry(code, loaded.check, replacement)
        stats.entries += 1
        stats.unique_graphs += bool(loaded.op_count)
        artifact_logger("perf").info("%s (%s:%s): loaded from the disk cache of captured frames in %.2f ms",
                                     code.co_qualname, code.co_filename, code.co_firstlineno, seconds * 1e3)
        if trace is not None:
            trace.timings = {"load": seconds}
            trace.transformed(replacement, "")
            trace.status = "loaded"
        return replacement

    def _give_up(self, stats: Stats, code: types.CodeType, entries: list[Any], error: Unsupported | str,
                 trace: CompileTrace | None = None) -> Any:
        stats.failures += 1
        stats.breaks.append(error.detached() if isinstance(error, Unsupported) else error)
        reason = str(error)
        if trace is not None:
            trace.eager(error)
        artifact_logger("graph_breaks").info("%s runs eagerly: %s", code.co_qualname, reason)
        _log.debug("kiln: %s runs eagerly: %s", code.co_qualname, reason)
        if entries:
            stats.eager_codes[code] = reason  # keep its existing entries usable
            return None
        stats.eager_codes[code] = reason
        return fe.SKIP


def _why(code: types.CodeType, L: dict[str, Any], func: Any, entries: list[Any]) -> tuple[str, int, list[str]]:
    """Why ``code``'s frame is compiled (for the trace): its first call, a resume function's,
    or a guard failure (with the first failing guard of each existing entry)."""
    if entries:
        return "guard failure", len(entries), [e.guard.explain(L, func.__globals__) or "(passes now)"
                                               for e in entries]
    return ("resume function" if code.co_name.startswith(RESUME_PREFIX) else "first call"), 0, []


def _log_capture(code: types.CodeType, cap: Any, replacement: types.CodeType, context: CompileContext) -> None:
    perf_log = artifact_logger("perf")
    if perf_log.isEnabledFor(logging.INFO):
        perf_log.info("compile of %s (%s:%s): %s", code.co_qualname, code.co_filename, code.co_firstlineno,
                      ", ".join(f"{phase} {seconds * 1e3:.2f} ms" for phase, seconds in context.timings.items()))
    graph_log = artifact_logger("graph_code")
    if graph_log.isEnabledFor(logging.INFO):
        graph_log.info("graph of %s (%d ops):\n%s", code.co_qualname, cap.op_count,
                       cap.graph_module.code)
    guard_log = artifact_logger("guards")
    if guard_log.isEnabledFor(logging.INFO):
        guard_log.info("guards of %s:\n%s", code.co_qualname,
                       "\n".join(g.describe() for g in cap.guards.ordered()))
    bc_log = artifact_logger("bytecode")
    if bc_log.isEnabledFor(logging.INFO):
        from kiln.symexec.bytecode import disassemble

        bc_log.info("replacement of %s:\n%s\n%s", code.co_qualname, cap.source_text,
                    disassemble(replacement))
