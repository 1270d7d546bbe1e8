"""The disk cache of captured frames: what kiln made of a frame (its guards, its replacement
code, the record of its compiled graph), kept so that a new process runs a frame it has seen
before without capturing it again (backend ``"inductor"``, ``kiln.config.frame_cache`` and
``graph_cache``).

A record (``<cache_dir>/frames/<key>.json``, a kiln.inductor ``EntryStore``) holds up to
``_VARIANTS`` variants, the latest last; each is what one compile of the frame made:

- ``blob``: the guards in check order (less ``SameCompile``, which the loading process puts
  back for its own ``kiln.compile``), the checker's compiled code with a digest of its source
  (used when the loading process generates the same source: no ``compile``), the replacement
  body's lines and objects with its compiled template (``Capture.replacement_template``), the graph's
  name and op count, the graph break's text, and the resume functions' inputs, written by
  ``_portable`` (which refuses what has no meaning in another process: the frame is then not
  recorded);
- ``graph``: the compiled graph's variant in the disk cache of compiled graphs
  (``_compiled_cache.runtime_of``); none for a graph without ops;
- ``files``: the source files the trace depended on, each with its size and modification
  time: the file of every code object the trace ran (the frame's and each inlined
  function's) and of every module whose objects the record names (a class whose attributes
  the trace read under a type guard). A changed file makes the variant unusable, as a
  changed ``.py`` makes CPython's ``.pyc`` stale;
- ``methods``: each method of a class the record names (an attribute its MRO resolves to a
  function, or that function's ``__wrapped__``) whose code the trace ran, with the code's
  digest, checked again on loading: a method patched or overridden in the loading process
  (at import, by a flag) makes the variant stale where no file changed. A traced code
  without a file must be one of them (a dataclass's generated ``__init__``); code made by the
  user's exec makes the frame not recorded.

The key (``frame_key``) hashes the code (file, qualified name, first line, ``code_digest``),
kiln's sources, torch's and Python's versions, the configs (kiln's and each stage's), and
what the policy decided before the capture (the numbers and dimensions made dynamic,
whether graph breaks are allowed).

Loading (``load``) takes the newest variant whose files are unchanged, whose objects read
in this process, whose functions match (``_portable.resolve_functions``) and whose guards
hold for this call, then rebuilds the compiled graph and the replacement code; anything
missing, corrupt or refused is a miss and the frame is captured as usual (and recorded
again). Invariant: a loaded entry is only used where its guards hold, checked by the same
compiled checker a captured entry gets.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import json
import logging
import marshal
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kiln.guards import GuardSet, compile_guards

from . import _portable
from ._compile_key import SameCompile

__all__ = ["Loaded", "frame_key", "load", "store"]

_FORMAT = 1
_VARIANTS = 8
_log = logging.getLogger("kiln.cache")


@dataclass(slots=True)
class Loaded:
    """A frame's entry rebuilt from disk: what the policy installs, and what its Stats learn."""

    replacement: types.CodeType
    check: Any
    guards: GuardSet
    op_count: int
    graph_break: str | None
    resumes: tuple[Any, ...]
    code: types.CodeType


@functools.cache
def _kiln_digest() -> str:
    from kiln.inductor import source_digest

    own = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        own.update(path.name.encode() + b"\0" + path.read_bytes())
    packages = ("frameeval", "fxgraph", "guards", "symshapes", "symexec", "aotgrad", "inductor")
    return source_digest(*packages) + own.hexdigest()


def frame_key(code: types.CodeType, backend: str, configs: Any, numbers: frozenset[Any],
              dims: dict[Any, frozenset[int]], graph_breaks: bool) -> str:
    """The key of ``code``'s frame compiled by ``backend`` with ``configs`` after the policy
    decided ``numbers``, ``dims`` and ``graph_breaks`` (see the module docstring)."""
    from kiln.inductor import code_digest

    from ._config import config

    parts = [_FORMAT, _kiln_digest(), torch.__version__, sys.version, code.co_filename, code.co_qualname,
             code.co_firstlineno, code_digest(code), backend, repr(configs),
             [[f.name, repr(getattr(config, f.name))] for f in dataclasses.fields(config)],
             sorted(map(str, numbers)), sorted([str(s), sorted(d)] for s, d in dims.items()), graph_breaks]
    return hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()[:40]


def _checker_digest(source: str) -> str:
    """A digest of a guard checker's code, less its comments (they show objects' ids)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    return hashlib.sha256(code.encode()).hexdigest()


def _entries(root: Path) -> Any:
    from kiln.inductor import EntryStore

    return EntryStore(root, "frames")


def _file_state(path: str) -> list[Any] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [path, st.st_size, st.st_mtime_ns]


def _module_file(name: str) -> str:
    """The file of module ``name``, or of the nearest package above it that has one (an
    extension's submodule, ``torch._C._nn``, changes with its package); Unportable for none."""
    parts = name.split(".")
    while parts:
        path = getattr(sys.modules.get(".".join(parts)), "__file__", None)
        if isinstance(path, str):
            return path
        parts.pop()
    raise _portable.Unportable(f"module {name} has no file")


def _static_lookup(cls: type, name: str) -> Any:
    """What ``cls.name`` finds in the classes of its MRO's ``__dict__`` (no descriptor run, no
    metaclass ``__getattr__``): a staticmethod's or classmethod's function, else the value."""
    for base in cls.__mro__:
        namespace = vars(base)
        if name in namespace:
            value = namespace[name]
            return value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
    return None


def _function_at(cls: type, attr: str) -> Any:
    name, _, wrapped = attr.partition(".")
    fn = _static_lookup(cls, name)
    if wrapped:  # functools.wraps: the function a wrapper stands for
        fn = vars(fn).get("__wrapped__") if type(fn) is types.FunctionType else None
    return fn if type(fn) is types.FunctionType else None


def _methods(codes: tuple[types.CodeType, ...], classes: list[type]) -> list[Any]:
    """``[module, class qualname, attribute, code digest]`` for each method of ``classes`` (each
    attribute their MRO resolves to a function, or its ``__wrapped__`` function) whose code the
    trace ran: checked again on loading, so that a method patched or overridden in another
    process (at import, by a flag) makes the record stale even where no file changed.
    Unportable when a traced code without a file (made by exec) is none of them; a dataclass's
    generated ``__init__`` is one."""
    from kiln.inductor import code_digest

    traced = {id(code): code for code in codes if not code.co_filename.startswith("<frozen ")}
    found: set[int] = set()
    out = []
    for cls in classes:
        if "<" in cls.__qualname__:
            continue
        resolved: dict[str, Any] = {}  # each attribute as the MRO resolves it (``_static_lookup``), in one pass
        for base in cls.__mro__:
            for name, value in vars(base).items():
                resolved.setdefault(name, value)
        for name, value in resolved.items():
            fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if type(fn) is not types.FunctionType:
                continue
            wrapped = vars(fn).get("__wrapped__")
            for attr, f in ((name, fn), (f"{name}.__wrapped__", wrapped)):
                if type(f) is types.FunctionType and id(f.__code__) in traced:
                    found.add(id(f.__code__))
                    out.append([cls.__module__, cls.__qualname__, attr, code_digest(f.__code__)])
    for key, code in traced.items():
        if key not in found and not os.path.isabs(code.co_filename):
            raise _portable.Unportable(f"{code.co_qualname} ({code.co_filename}) has no file and is no method of a "
                                       "class the record names")
    return out


def _method_unchanged(entry: list[Any]) -> bool:
    from kiln.inductor import code_digest

    module, qualname, attr, digest = entry
    value: Any = sys.modules.get(module)
    for part in qualname.split("."):
        value = getattr(value, part, None)
    fn = _function_at(value, attr) if isinstance(value, type) else None
    return fn is not None and code_digest(fn.__code__) == digest


def _files(codes: tuple[types.CodeType, ...], modules: set[str]) -> list[Any]:
    """The files the record depends on, with their state now: each traced code's file and the
    file of each module the record names."""
    paths = {code.co_filename for code in codes if os.path.isabs(code.co_filename)}
    paths.update(_module_file(name) for name in modules if name not in sys.builtin_module_names)
    out = []
    for path in sorted(paths):
        state = _file_state(path)
        if state is None:
            raise _portable.Unportable(f"{path} is not a file")
        out.append(state)
    return out


def store(root: Path, key: str, cap: Any, check: Any, template: types.CodeType, graph: dict[str, Any] | None,
          f_globals: dict[str, Any]) -> bool:
    """Record what ``cap`` (a kiln.symexec Capture) became: ``check``, the frame's compiled
    guard checker (its guards in check order, its source and code), ``template``, its
    replacement's (``Capture.replacement_template``), and ``graph``, its compiled graph's
    variant (None: it has no ops). False when it is not recorded (the reason logged)."""
    if cap.op_count and graph is None:
        _log.info("kiln: the frame %s is not cached on disk: its graph has no disk record", cap.code.co_qualname)
        return False
    order = list(check.guards)
    same = [i for i, g in enumerate(order) if type(g) is SameCompile]
    kept = [g for g in order if type(g) is not SameCompile]
    objects = dict(cap.body.objects)
    content = {"guards": kept, "same_compile": same[0] if same else None,
               "checker": [_checker_digest(check.source), marshal.dumps(check.code)],
               "template": marshal.dumps(template), "lines": list(cap.body.lines), "objects": objects,
               "graph_name": cap.graph_name, "op_count": cap.op_count,
               "graph_break": None if cap.graph_break is None else str(cap.graph_break),
               "resumes": list(cap.resumes)}
    try:
        _portable.body_objects(content["objects"], f_globals)
        blob, modules, classes = _portable.dumps(content, f_globals)
        files, methods = _files(cap.traced_codes, modules), _methods(cap.traced_codes, classes)
    except _portable.Unportable as why:
        _log.info("kiln: the frame %s is not cached on disk: %s", cap.code.co_qualname, why)
        return False
    variant = {"blob": base64.b64encode(blob).decode(), "graph": graph, "files": files, "methods": methods}
    entries = _entries(root)
    old = entries.read(key)
    others = [v for v in old.get("variants", [])] if isinstance(old, dict) and old.get("format") == _FORMAT else []
    others = [v for v in others if v.get("blob") != variant["blob"]]
    return entries.write(key, {"format": _FORMAT, "variants": [*others[-(_VARIANTS - 1):], variant]})


def load(root: Path, key: str, code: types.CodeType, L: dict[str, Any], f_globals: dict[str, Any],
         compile_key: Any, context: Any) -> Loaded | None:
    """The newest recorded variant of ``code``'s frame that serves this call (see the module
    docstring), rebuilt; None when none does. ``context``: a CompileContext giving the stage
    configs and the Session's kernel libraries."""
    record = _entries(root).read(key)
    if not isinstance(record, dict) or record.get("format") != _FORMAT:
        return None
    for variant in reversed(record.get("variants", [])):
        loaded = _variant(variant, code, L, f_globals, compile_key, context)
        if loaded is not None:
            return loaded
    return None


def _variant(variant: dict[str, Any], code: types.CodeType, L: dict[str, Any], f_globals: dict[str, Any],
             compile_key: Any, context: Any) -> Loaded | None:
    from kiln.symexec import ReplacementSource, build_replacement

    from ._backends import loaded_runtime
    from ._compiled_cache import runtime_of

    name = code.co_qualname
    try:
        changed = [path for path, size, mtime in variant["files"] if _file_state(path) != [path, size, mtime]]
        changed += [".".join(entry[1:3]) for entry in variant["methods"] if not _method_unchanged(entry)]
        if changed:
            _log.info("kiln: a cached entry of the frame %s is stale: %s changed", name, ", ".join(changed))
            return None
        content = _portable.loads(base64.b64decode(variant["blob"]), f_globals)
    except (_portable.Unportable, KeyError, TypeError, ValueError) as why:
        _log.info("kiln: a cached entry of the frame %s does not read here (%s)", name, why)
        return None
    guards = _portable.resolve_functions(content["guards"], L, f_globals)
    if guards is None:
        _log.info("kiln: a cached entry of the frame %s traced other functions than this call reaches", name)
        return None
    if compile_key is not None:  # where the cold compile's checker had it: the same checker source
        guards.insert(content["same_compile"] or 0, SameCompile(compile_key))
    digest, checker = content["checker"]

    def code_of(source: str) -> types.CodeType:
        if _checker_digest(source) == digest:
            return marshal.loads(checker)
        return compile(source, "<kiln.guards checker>", "exec")

    check = compile_guards(guards, f_globals, code_of=code_of)
    if not check(L):
        if _log.isEnabledFor(logging.INFO):
            _log.info("kiln: a cached entry of the frame %s does not hold for this call: %s", name,
                      check.explain(L, f_globals))
        return None
    compiled = None
    if variant["graph"] is not None:
        runtime = runtime_of(variant["graph"], context)
        if runtime is None:
            return None
        compiled = loaded_runtime(runtime)
    body = ReplacementSource(list(content["lines"]), dict(content["objects"]))
    body.objects[content["graph_name"]] = compiled
    replacement = build_replacement(code, body, marshal.loads(content["template"]))
    return Loaded(replacement, check, GuardSet(guards), content["op_count"], content["graph_break"],
                  tuple(content["resumes"]), code)
