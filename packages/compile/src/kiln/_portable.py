"""Portable values: a captured frame's guards and its replacement code's objects, written so
that another process reads back objects that mean the same there, or refuses to write them.

The disk cache of captured frames (``_frame_cache``) keeps what kiln.symexec made of a frame.
Pickle is the format, restricted on both sides:

- Written by value: literals (None, bools, numbers, strings, bytes, slices, ranges,
  Fractions), tuples, frozensets, lists and dicts of portable values (lists and dicts only
  inside guards, where they are data; the replacement's objects may hold none, ``body_objects``),
  torch's dtypes, devices, layouts, memory formats and ``Size``, sympy expressions, and the
  frozen dataclasses of kiln (guards and sources) by their constructor's fields, so that
  what ``__post_init__`` derives (an ``IdMatch``'s ``id``) is derived again in the reading
  process, never copied from the writing one.
- Written by name: classes, functions and builtins reachable by their import path (pickle's
  own check that the path gives the very object), modules by their ``sys.modules`` name,
  enum members by class and value, the frame's globals dict (``("globals",)``), a module's
  ``__dict__``, ``sys.modules``; code objects by ``marshal`` (kiln's generated resume code
  and code the trace made functions of). Reading looks names up in ``sys.modules`` only: a
  module the reading process has not imported is a refusal, never an import.
- A ``FunctionMatch`` (the same code object, defaults and closure as traced) names a code
  object no other process has. It is written as a description (``FunctionDescription``: the
  code's digest, each default and closure cell as a literal, an import path or a nested
  description) and rebuilt in the reading process from the function its source gives now,
  when that function matches the description (``resolve_functions``).
- A ``TorchGlobalState`` is written without its native snapshot (an object of this process);
  the reader takes a fresh one when the recorded state is the state now.
- Anything else (an instance of a user's class, an object without a name, a function
  without an import path) raises ``Unportable``: the frame is not cached.

``dumps`` also answers the modules of every object it wrote by name and the classes among
them: the frame cache keeps the source files of those modules (with the files of the traced
code) to detect an edit, and finds in those classes the methods Python generated (a
dataclass's ``__init__``, whose code has no file).
"""

from __future__ import annotations

import dataclasses
import enum
import fractions
import io
import marshal
import pickle
import sys
import types
from typing import Any

import torch

from kiln.guards import (
    EMPTY_CELL,
    FunctionMatch,
    Source,
    TorchGlobalState,
    cell_values,
    importable_path,
)
from kiln.symexec.bytecode import RESUME_PREFIX  # kiln.symexec's resume functions (_breaks)

__all__ = ["FunctionDescription", "Unportable", "body_objects", "dumps", "loads", "resolve_functions"]

_BY_VALUE = (type(None), bool, int, float, complex, str, bytes, slice, range, fractions.Fraction,
             torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size,
             type(Ellipsis), type(NotImplemented))
_MUTABLE = (list, dict, set, bytearray)
_BUILTIN_CALLABLES = (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodDescriptorType,
                      types.WrapperDescriptorType, types.ClassMethodDescriptorType,
                      types.GetSetDescriptorType, types.MemberDescriptorType)


class Unportable(Exception):
    """A value has no meaning in another process (the message says which and why)."""


@dataclasses.dataclass(frozen=True, slots=True)
class FunctionDescription:
    """A ``FunctionMatch`` as another process can check it: where the function is read from
    (``source``) and what it must be there (``shape``, see ``_describe``)."""

    source: Source
    shape: tuple[Any, ...]


def _construct(cls: type, fields: dict[str, Any]) -> Any:
    return cls(**fields)


def _resume_function(code: types.CodeType, f_globals: dict[str, Any], name: str) -> types.FunctionType:
    return types.FunctionType(code, f_globals, name)


def _state_guard(state: tuple[tuple[str, Any], ...]) -> TorchGlobalState:
    now = TorchGlobalState.capture()
    return now if now.state == state else TorchGlobalState(state)


def _path_ok(obj: Any) -> str:
    """The module name of ``obj``, which its import path reaches (else Unportable)."""
    if importable_path(obj) is None:
        raise Unportable(f"{obj!r:.80} has no import path")
    return obj.__module__


class _Writer(pickle.Pickler):
    def __init__(self, file: io.BytesIO, f_globals: dict[str, Any] | None) -> None:
        super().__init__(file, protocol=5)
        self.f_globals = f_globals
        self.modules: set[str] = set()
        self.classes: dict[int, type] = {}

    def persistent_id(self, obj: Any) -> Any:
        if self.f_globals is not None and obj is self.f_globals:
            return ("globals",)
        if obj is sys.modules:
            return ("sys.modules",)
        tp = type(obj)
        if tp is types.ModuleType:
            if sys.modules.get(obj.__name__) is not obj:
                raise Unportable(f"module {obj.__name__} is not sys.modules' own")
            self.modules.add(obj.__name__)
            return ("module", obj.__name__)
        if tp is dict and type(obj.get("__name__")) is str and obj.get("__name__") in sys.modules \
                and getattr(sys.modules[obj["__name__"]], "__dict__", None) is obj:
            self.modules.add(obj["__name__"])
            return ("namespace", obj["__name__"])
        if tp is types.CodeType:
            try:
                return ("code", marshal.dumps(obj))
            except ValueError as e:
                raise Unportable(f"code object {obj.co_qualname}: {e}") from None
        return None

    def reducer_override(self, obj: Any) -> Any:
        tp = type(obj)
        if tp in _BY_VALUE or tp in (tuple, frozenset, list, dict, set):
            return NotImplemented
        if isinstance(obj, type) or tp is types.FunctionType or tp in _BUILTIN_CALLABLES:
            if tp is types.FunctionType and obj.__name__.startswith(RESUME_PREFIX):
                return self._resume(obj)
            if tp in _BUILTIN_CALLABLES and not isinstance(obj, types.BuiltinFunctionType):
                owner = getattr(obj, "__objclass__", None)
                if owner is None or getattr(owner, obj.__name__, None) is not obj:
                    raise Unportable(f"{obj!r:.80} has no import path")
                self.modules.add(_path_ok(owner))
                return (getattr, (owner, obj.__name__))
            self.modules.add(_path_ok(obj))
            if isinstance(obj, type):
                self.classes[id(obj)] = obj
            return NotImplemented
        if isinstance(obj, enum.Enum):
            self.modules.add(_path_ok(tp))
            return NotImplemented
        if tp is FunctionMatch:
            shape = _describe(obj.code, obj.defaults, obj.kwdefaults, obj.closure, self, 0)
            return (FunctionDescription, (obj.source, shape))
        if tp is TorchGlobalState:
            return (_state_guard, (obj.state,))
        if dataclasses.is_dataclass(obj) and tp.__module__.startswith("kiln."):
            self.modules.add(_path_ok(tp))
            fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}
            return (_construct, (tp, fields))
        if "sympy" in sys.modules and isinstance(obj, sys.modules["sympy"].Basic):
            return NotImplemented
        raise Unportable(f"a {type(obj).__qualname__} object has no meaning in another process")

    def _resume(self, fn: types.FunctionType) -> Any:
        if fn.__globals__ is not self.f_globals or fn.__closure__ or fn.__defaults__ or fn.__kwdefaults__:
            raise Unportable(f"resume function {fn.__name__} is not one of this frame")
        return (_resume_function, (fn.__code__, fn.__globals__, fn.__name__))


def _describe(code: types.CodeType, defaults: Any, kwdefaults: Any, closure: Any, writer: _Writer,
              depth: int) -> tuple[Any, ...]:
    """``("fn", code digest, defaults, kwdefaults, closure)``: each value described by
    ``_value``; the closure's cell contents as ``FunctionMatch`` holds them."""
    from kiln.inductor import code_digest

    if depth > 4:
        raise Unportable(f"function {code.co_qualname}: closures nested too deep")

    def each(values: Any) -> Any:
        return None if values is None else tuple(_value(v, writer, depth) for v in values)

    return ("fn", code_digest(code), each(defaults),
            None if kwdefaults is None else tuple((k, _value(v, writer, depth)) for k, v in kwdefaults.items()),
            each(closure))


def _value(v: Any, writer: _Writer, depth: int) -> tuple[Any, ...]:
    """What another process's value must be to stand for ``v``: ``("is", v)`` (None, a
    bool, an object by name: the very object there), ``("eq", v)`` (a number, string or
    bytes: equal, of the same type), ``("tuple", ...)``, a nested function, or an empty cell."""
    tp = type(v)
    if v is EMPTY_CELL:
        return ("empty",)
    if v is None or tp is bool:
        return ("is", v)
    if tp in (int, float, complex, str, bytes):
        return ("eq", v)
    if tp is tuple:
        return ("tuple", tuple(_value(x, writer, depth) for x in v))
    if tp is types.FunctionType:
        try:
            writer.modules.add(_path_ok(v))
            return ("is", v)
        except Unportable:
            return _describe(v.__code__, v.__defaults__, v.__kwdefaults__, _cells(v.__closure__), writer, depth + 1)
    if isinstance(v, (type, enum.Enum, types.ModuleType, *_BUILTIN_CALLABLES)):
        return ("is", v)  # the writer checks its name
    raise Unportable(f"a {tp.__qualname__} in a function's defaults or closure")


def _cells(closure: Any) -> Any:
    return cell_values(closure)


def _matches(shape: Any, v: Any) -> bool:
    kind = shape[0]
    if kind == "empty":
        return v is EMPTY_CELL
    if kind == "is":
        return v is shape[1]
    if kind == "eq":
        return type(v) is type(shape[1]) and repr(v) == repr(shape[1])  # repr: -0.0 and nan too
    if kind == "tuple":
        return type(v) is tuple and len(v) == len(shape[1]) and all(map(_matches, shape[1], v))
    return type(v) is types.FunctionType and _function_matches(shape, v, _cells(v.__closure__))


def _function_matches(shape: tuple[Any, ...], fn: types.FunctionType, closure: Any) -> bool:
    from kiln.inductor import code_digest

    _, digest, defaults, kwdefaults, cells = shape

    def same(shapes: Any, values: Any) -> bool:
        if shapes is None or values is None:
            return shapes is None and values is None
        return len(shapes) == len(values) and all(map(_matches, shapes, values))

    kw = fn.__kwdefaults__
    return (code_digest(fn.__code__) == digest and same(defaults, fn.__defaults__)
            and same(None if kwdefaults is None else [s for _, s in kwdefaults], None if kw is None else list(kw.values()))
            and (kwdefaults is None or [k for k, _ in kwdefaults] == list(kw or ()))
            and same(cells, closure))


class _Reader(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, f_globals: dict[str, Any] | None) -> None:
        super().__init__(file)
        self.f_globals = f_globals
        self.codes: dict[bytes, types.CodeType] = {}  # one object per code written (a resume's twice)

    def persistent_load(self, pid: Any) -> Any:
        kind = pid[0]
        if kind == "globals" and self.f_globals is not None:
            return self.f_globals
        if kind == "sys.modules":
            return sys.modules
        if kind in ("module", "namespace"):
            module = sys.modules.get(pid[1])
            if module is None:
                raise Unportable(f"module {pid[1]} is not imported")
            return module if kind == "module" else module.__dict__
        if kind == "code":
            code = self.codes.get(pid[1])
            if code is None:
                code = self.codes[pid[1]] = marshal.loads(pid[1])
            return code
        raise Unportable(f"unknown reference {kind!r}")

    def find_class(self, module: str, name: str) -> Any:
        value: Any = sys.modules.get(module)
        if value is None:
            raise Unportable(f"module {module} is not imported")
        for part in name.split("."):
            value = getattr(value, part)
        return value


def dumps(value: Any, f_globals: dict[str, Any] | None = None) -> tuple[bytes, set[str], list[type]]:
    """``value`` written (see the module docstring), the modules it names and the classes it
    names; Unportable when something in it cannot be."""
    buffer = io.BytesIO()
    writer = _Writer(buffer, f_globals)
    try:
        writer.dump(value)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise Unportable(f"{type(e).__name__}: {e}") from None
    return buffer.getvalue(), writer.modules, list(writer.classes.values())


def loads(data: bytes, f_globals: dict[str, Any] | None = None) -> Any:
    """What ``dumps`` wrote, read in this process; Unportable when a name it holds means
    nothing here."""
    try:
        return _Reader(io.BytesIO(data), f_globals).load()
    except Unportable:
        raise
    except Exception as e:
        raise Unportable(f"{type(e).__name__}: {e}") from None


def body_objects(objects: dict[str, Any], f_globals: dict[str, Any]) -> None:
    """Refuse replacement-code objects whose identity another process could not keep: a
    mutable container written by value would be a copy where the code used the object
    (``sys.modules``, the frame's globals and a module's namespace are written by name)."""
    def walk(v: Any) -> None:
        if v is sys.modules or v is f_globals:
            return
        if type(v) is dict and type(v.get("__name__")) is str \
                and getattr(sys.modules.get(v["__name__"]), "__dict__", None) is v:
            return
        if isinstance(v, _MUTABLE):
            raise Unportable(f"the replacement code holds a {type(v).__name__} object")
        if type(v) in (tuple, frozenset):
            for x in v:
                walk(x)

    for value in objects.values():
        walk(value)


def resolve_functions(guards: list[Any], L: dict[str, Any], G: dict[str, Any]) -> list[Any] | None:
    """``guards`` with each ``FunctionDescription`` turned back into a ``FunctionMatch`` of
    the function its source gives now, or None when one gives none that matches."""
    out = []
    for guard in guards:
        if type(guard) is FunctionDescription:
            try:
                fn = guard.source.fetch(L, G)
            except Exception:
                return None
            if type(fn) is not types.FunctionType or not _function_matches(guard.shape, fn, _cells(fn.__closure__)):
                return None
            guard = FunctionMatch.from_function(guard.source, fn)
        out.append(guard)
    return out
