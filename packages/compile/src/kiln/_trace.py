"""The structured trace: what each compile did, as JSON-lines events, one file per process.

With ``kiln.config.trace_dir`` (or the environment variable ``KILN_TRACE``) set to a folder,
every compile of a frame (a cache miss the policy handles) writes its events there, and
``python -m kiln report DIR`` (``kiln.report``) turns them into one HTML page.

Who owns what:

- ``TraceFiles`` is the process's: the open trace file per folder and the compile counter.
  Every ``kiln.Session`` of the process holds the same one (``Session.traces``), so
  ``kiln.reset()`` keeps writing to the same file and the compile numbers keep going.
- ``CompileTrace`` holds the events of one compile. The policy makes it on a miss and
  hands it to the stages through the frame's ``CompileContext`` (``context.trace``); each
  records what it made; the policy ``finish``-es it, which writes every event of the compile
  in one write, at its end (never one write per event).
- A ``TraceFile`` is named ``kiln-trace-<date>-<time>-pid<pid>[-rank<r>].jsonl``: the rank
  is torch.distributed's where a process group is initialized when the file is made (else
  the ``RANK`` variable torchrun sets, else none). A forked child that compiles writes a
  file of its own.

Cost: nothing on a cache hit (the hit path never reaches the policy), one test per miss
when tracing is off. When on, events hold what the compile already made (generated code as
text, counts, sizes); what is expensive to render (disassembly, decompiling, highlighting)
is left to the report, which gets the code objects marshaled (base64).

Events (one JSON object a line; every event has ``event``, ``compile`` (the number of the
compile in the process; 0 is the file's header) and ``t`` (``time.time()``)):

- ``process``: the file's first line: pid, rank, Python, torch and kiln versions, argv.
- ``frame``: the frame being compiled: ``code`` (name, qualname, file, line), ``why``
  (``first call``, ``guard failure`` with ``failed_guards``, the first failing guard of each
  existing entry, or ``resume function``), ``entries`` (existing cache entries), ``source``
  (its lines as traced, from its first line) and ``code_b64`` (the marshaled code).
- ``cache``: ``kind`` (``frame``: the disk cache of captured frames; ``graph``: of compiled
  graphs) and ``result`` (``hit``, ``miss``, ``stored``, ``uncacheable``).
- ``graph``: the captured graph: name, op_count, ``ops`` (count per op), ``code``.
- ``graph_break``: ``reason``, ``location`` and ``stack`` (file, line, function, text and a
  few lines around it), ``resumes`` (the resume functions the replacement calls).
- ``eager``: the frame runs eagerly from now on (``reason``, ``location`` where known).
- ``recompile_limit``: which limit, its value, the failing guard.
- ``shapes``: symbolic sizes: ``symbols`` (name, source, example, range, value it was
  replaced with, and why it is a symbol), ``specializations`` (symbols the traced Python
  needed as values, with the user's line), ``guards`` (the ShapeEnv's) and ``numbers``
  (numbers taken as graph inputs).
- ``aot_graphs``: kiln.aotgrad's ``joint``, ``forward`` and ``backward`` graphs (code) and
  ``saved`` (name, sizes, dtype and the op that made each saved value).
- ``inductor``: per half (``forward``/``backward``): wrapper, C++ and Triton code, counts,
  fallbacks, ``fused`` (per kernel, the ATen nodes it computes), ``seconds``.
- ``guards``: ``count``, ``guards`` (each as text, in check order) and ``checker`` (its source).
- ``transformed``: the replacement code: ``code_b64`` (marshaled; objects it holds are
  replaced by a string naming them), ``body`` (its source as kiln.symexec wrote it), ``file``
  (where its source was written for debuggers: ``code/`` beside the trace file; the code
  kiln runs has it as its ``co_filename``; ``CompileTrace.source_file``).
- ``compile_end``: ``status`` (``compiled``, ``loaded``, ``eager``, ``error``),
  ``seconds``, ``timings`` (per phase: capture, backend, guards).
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import linecache
import logging
import marshal
import os
import sys
import time
import types
from typing import Any

__all__ = ["CompileTrace", "MemoryTrace", "TraceFile", "TraceFiles", "trace_dir"]

_log = logging.getLogger("kiln")
_CONTEXT_LINES = 3  # lines of source kept on each side of a location
_MARSHALABLE = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis))


def trace_dir() -> str | None:
    """The folder to trace into: ``kiln.config.trace_dir``, else ``KILN_TRACE``, else None."""
    from ._config import config

    return config.trace_dir or os.environ.get("KILN_TRACE") or None


def _rank() -> int | None:
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None)
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # a half-initialized process group: fall back to the variable
        pass
    rank = os.environ.get("RANK")
    return int(rank) if rank is not None and rank.isdigit() else None


def process_header(rank: int | None) -> dict[str, Any]:
    """The ``process`` event: who wrote the trace (the report reads bytecode only under the
    Python version that wrote it)."""
    import torch

    import kiln

    return {"event": "process", "compile": 0, "t": time.time(), "pid": os.getpid(), "rank": rank,
            "python": sys.version.split()[0], "torch": torch.__version__, "kiln": kiln.__version__,
            "argv": list(sys.argv)}


class TraceFile:
    """One process's JSON-lines file in a folder; ``write`` appends one compile's events."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.pid = -1
        self.path = ""

    def _open(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        self.pid = os.getpid()
        rank = _rank()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = f"kiln-trace-{stamp}-pid{self.pid}" + (f"-rank{rank}" if rank is not None else "") + ".jsonl"
        self.path = os.path.join(self.directory, name)
        self._append([process_header(rank)])

    def write(self, events: list[dict[str, Any]]) -> None:
        """Append ``events`` in one write (the file is made at the first; a forked child
        makes its own)."""
        if self.pid != os.getpid():
            self._open()
        self._append(events)

    def _append(self, events: list[dict[str, Any]]) -> None:
        data = "".join(json.dumps(e, default=str) + "\n" for e in events).encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)


class MemoryTrace:
    """A trace kept in memory (``kiln.explain``'s, for ``ExplainOutput.report``)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = [process_header(_rank())]

    def write(self, events: list[dict[str, Any]]) -> None:
        self.events.extend(events)


class TraceFiles:
    """The process's trace files (one per folder) and its compile counter; shared by every
    Session of the process (see the module docstring)."""

    def __init__(self) -> None:
        self.files: dict[str, TraceFile] = {}
        self.compiles = 0

    def begin(self, directory: str | None, *extra: Any) -> CompileTrace | None:
        """The trace of a new compile, written to ``directory``'s file and to each of
        ``extra`` (objects with ``write(events)``); None when there is nowhere to write."""
        sinks = [sink for sink in extra if sink is not None]
        if directory:
            path = os.path.abspath(directory)
            file = self.files.get(path)
            if file is None:
                file = self.files[path] = TraceFile(path)
            sinks.insert(0, file)
        if not sinks:
            return None
        self.compiles += 1
        return CompileTrace(self.compiles, sinks)


def _code_info(code: types.CodeType) -> dict[str, Any]:
    return {"name": code.co_name, "qualname": code.co_qualname, "file": code.co_filename,
            "line": code.co_firstlineno}


def _location(loc: Any) -> dict[str, Any] | None:
    """A kiln.symexec SourceLocation as data, with the lines around it."""
    if loc is None:
        return None
    out = {"file": loc.filename, "line": loc.lineno, "function": loc.function, "text": ""}
    if loc.lineno:
        lines = linecache.getlines(loc.filename)
        first = max(1, loc.lineno - _CONTEXT_LINES)
        out["text"] = lines[loc.lineno - 1].rstrip("\n") if loc.lineno <= len(lines) else ""
        out["context"] = [first, [line.rstrip("\n") for line in lines[first - 1:loc.lineno + _CONTEXT_LINES]]]
    return out


def _source_lines(code: types.CodeType) -> list[Any]:
    """``[first line, lines]`` of the function ``code`` comes from, as linecache has them."""
    lines = linecache.getlines(code.co_filename)
    numbers = [line for _, _, line in code.co_lines() if line]
    last = max(numbers, default=code.co_firstlineno)
    first = min(code.co_firstlineno, *numbers) if numbers else code.co_firstlineno
    return [first, [line.rstrip("\n") for line in lines[first - 1:last]]]


def _marshal_safe(code: types.CodeType) -> types.CodeType:
    """``code`` with each constant marshal cannot write (an object the replacement holds: a
    compiled graph, a function) replaced by a string naming it."""
    consts = tuple(_const(c) for c in code.co_consts)
    return code if consts == code.co_consts else code.replace(co_consts=consts)


def _const(c: Any) -> Any:
    if isinstance(c, _MARSHALABLE):
        return c
    if isinstance(c, types.CodeType):
        return _marshal_safe(c)
    if type(c) in (tuple, frozenset) and all(isinstance(x, _MARSHALABLE) for x in c):
        return c
    if type(c) is tuple:
        return tuple(_const(x) for x in c)
    name = getattr(c, "__qualname__", None) or type(c).__qualname__
    return f"<object {name}>"


def code_b64(code: types.CodeType) -> str:
    """``code`` marshaled (``_marshal_safe``), as base64 text."""
    try:
        return base64.b64encode(marshal.dumps(_marshal_safe(code))).decode()
    except ValueError:  # an object inside a nested constant marshal refuses
        return ""


def _graph_code(graph: Any) -> str:
    return graph.python_code().src


def _value_info(node: Any) -> dict[str, Any]:
    val = node.meta.get("val")
    shape = getattr(val, "shape", None)
    target = node.target if node.op == "call_function" else node.op
    return {"name": node.name, "sizes": [str(s) for s in shape] if shape is not None else None,
            "dtype": str(getattr(val, "dtype", type(val).__name__)).removeprefix("torch."),
            "op": "input" if node.op == "placeholder" else str(getattr(target, "__name__", target))}


class CompileTrace:
    """The events of one compile, written together by ``finish`` (see the module docstring)."""

    __slots__ = ("events", "number", "sinks", "start", "status", "timings")

    def __init__(self, number: int, sinks: list[Any]) -> None:
        self.number = number
        self.sinks = sinks
        self.events: list[dict[str, Any]] = []
        self.start = time.perf_counter()
        self.status = "eager"  # what the compile came to; the policy sets it
        self.timings: dict[str, float] = {}  # the frame's CompileContext.timings, once there is one

    def add(self, event: str, **fields: Any) -> None:
        """Record one event."""
        self.events.append({"event": event, "compile": self.number, "t": time.time(), **fields})

    # -- what the policy records ---------------------------------------------------------------
    def frame(self, code: types.CodeType, why: str, entries: int, failed_guards: list[str] | None = None) -> None:
        self.add("frame", code=_code_info(code), why=why, entries=entries, failed_guards=failed_guards or [],
                 source=_source_lines(code), code_b64=code_b64(code))

    def capture(self, cap: Any, dims: dict[Any, frozenset[int]], numbers: frozenset[Any],
                dynamic: bool | None) -> None:
        """The captured graph, its graph break and its symbolic sizes."""
        ops = collections.Counter(cap.op_names)
        self.add("graph", name=cap.graph_name, op_count=cap.op_count, ops=dict(ops), code=cap.graph_module.code)
        if cap.graph_break is not None:
            self.graph_break(cap.graph_break, list(dict.fromkeys(r.code.co_name for r in cap.resumes)))
        env = cap.shape_env
        if env is not None and (numbers or any(env.is_dynamic(s) or env.is_unbacked(s) for s in env.symbols)):
            self._shapes(env, cap.size_specializations, dims, numbers, dynamic)

    def graph_break(self, error: Any, resumes: list[str]) -> None:
        self.add("graph_break", reason=error.reason, location=_location(error.location),
                 stack=[_location(loc) for loc in error.stack], resumes=resumes)

    def eager(self, error: Any) -> None:
        """The frame runs eagerly from now on: ``error`` (a kiln.Unsupported, or the reason)."""
        if isinstance(error, str):
            self.add("eager", reason=error, location=None, stack=[])
        else:
            self.add("eager", reason=error.reason, location=_location(error.location),
                     stack=[_location(loc) for loc in error.stack])
        self.status = "eager"

    def _shapes(self, env: Any, specializations: Any, dims: dict[Any, frozenset[int]],
                numbers: frozenset[Any], dynamic: bool | None) -> None:
        replacements = env.replacements
        symbols = []
        for sym in env.symbols:
            if not (env.is_dynamic(sym) or env.is_unbacked(sym)):
                continue  # a static size (its symbol stands for one value)
            source = env.source_of(sym)
            base, dim = getattr(source, "base", None), getattr(source, "dim", None)
            if env.is_unbacked(sym):
                why = "a value the graph computes (.item(), nonzero)"
            elif dim in dims.get(base, ()):
                why = "automatic dynamic: a size that changed between calls (learned at a recompile, or inherited)"
            elif dynamic is True:
                why = "dynamic=True"
            else:
                why = "marked dynamic (kiln.mark_dynamic) or a number input"
            value = replacements.get(sym)
            symbols.append({"symbol": str(sym), "source": str(source) if source is not None else None,
                            "example": env.hint_of(sym), "range": str(env.range_of(sym)),
                            "replaced_by": str(value) if value is not None else None, "why": why})
        spec = [{"symbols": sorted(str(s) for s in syms),
                 "values": {str(s): env.hint_of(s) for s in syms}, "location": _location(where)}
                for syms, where in specializations]
        self.add("shapes", symbols=symbols, specializations=spec, guards=[str(g) for g in env.guards],
                 numbers=sorted(str(n) for n in numbers))

    def guards(self, guard_set: Any, check: Any) -> None:
        ordered = list(getattr(check, "guards", ()) or guard_set.ordered())
        self.add("guards", count=len(ordered), guards=[g.describe() for g in ordered],
                 checker=getattr(check, "source", ""))

    def transformed(self, replacement: types.CodeType, body: str) -> None:
        self.add("transformed", code_b64=code_b64(replacement), body=body,
                 file=replacement.co_filename if os.path.isabs(replacement.co_filename) else None)

    def source_file(self, replacement: types.CodeType) -> types.CodeType:
        """Where the trace has a folder: the replacement's source (kiln.symexec registers it
        with ``linecache`` under a name that is no file) written to
        ``<folder>/code/kiln-replacement-<qualname>-<digest>.py``, and the replacement with that
        file as its ``co_filename``, its own and its nested code objects', so that a debugger
        (pdb, an IDE's) shows and steps through a real file, line for line. Without a folder,
        or where the file cannot be written (logged), the replacement as it is."""
        folder = next((s.directory for s in self.sinks if isinstance(s, TraceFile)), None)
        old = replacement.co_filename
        lines = linecache.getlines(old) if folder is not None and not os.path.isabs(old) else []
        if not lines:
            return replacement
        from kiln.symexec.bytecode import REPLACEMENT_FILE_PREFIX, map_code

        text = "".join(lines)
        digest = hashlib.sha1(text.encode()).hexdigest()[:10]
        qualname = "".join(c if c.isalnum() or c in "._" else "_" for c in replacement.co_qualname)[:80]
        path = os.path.join(folder, "code", f"{REPLACEMENT_FILE_PREFIX}{qualname}-{digest}.py")
        try:
            if not os.path.exists(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                partial = f"{path}.{os.getpid()}.tmp"
                with open(partial, "w", encoding="utf-8") as f:
                    f.write(text)
                os.replace(partial, path)
        except OSError as e:
            _log.warning("kiln: cannot write the replacement's source beside the trace (%s): %s", path, e)
            return replacement
        return map_code(replacement, lambda c: c.replace(co_filename=path) if c.co_filename == old else c)

    # -- what the backend stages record ----------------------------------------------------------
    def aot_graphs(self, joint: Any, forward: Any, backward: Any, saved: list[Any]) -> None:
        self.add("aot_graphs", joint=_graph_code(joint), forward=_graph_code(forward),
                 backward=_graph_code(backward) if backward is not None else None,
                 saved=[_value_info(n) for n in saved])

    def inductor(self, half: str, compiled: Any, seconds: float) -> None:
        """``compiled``: kiln.inductor's CompiledGraph of one half (None: it ran as Python)."""
        if compiled is None:
            self.add("inductor", half=half, seconds=seconds, compiled=False)
            return
        self.add("inductor", half=half, seconds=seconds, compiled=True, wrapper=compiled.wrapper_code,
                 cpp=compiled.cpp_code, triton=compiled.triton_code, kernels=compiled.kernels,
                 externs=compiled.externs, fallbacks=dict(compiled.fallbacks), fused=dict(compiled.fused),
                 from_cache=compiled.from_cache)

    def cache(self, kind: str, result: str) -> None:
        self.add("cache", kind=kind, result=result)

    def finish(self, error: BaseException | None = None) -> None:
        """Record the end of the compile (``status``, or ``error`` for an exception that
        leaves the policy) and write its events, in one write per sink."""
        status = self.status if error is None else "error"
        self.add("compile_end", status=status, seconds=time.perf_counter() - self.start,
                 timings=dict(self.timings), error=f"{type(error).__name__}: {error}" if error is not None else None)
        events, self.events = self.events, []
        for sink in self.sinks:
            try:
                sink.write(events)
            except OSError as e:  # a full disk or a folder one may not write: the program goes on
                _log.warning("kiln: cannot write the trace (%s): %s", getattr(sink, "directory", sink), e)
