"""The recompile memory on disk: per code object, the numbers and tensor dimensions automatic
dynamic made dynamic (``Stats.dynamic_numbers`` and ``Stats.dynamic_dims``, see
``_automatic_dynamic``), kept across processes so that a restarted program compiles its
dynamic graph on the first call instead of a static one first (torch.compile's
"automatic dynamic PGO").

A record, ``<cache_dir>/dynamic/<code key>.json`` (a kiln.inductor ``EntryStore``): the
sources of the numbers and, per tensor source, the dimensions. The code key hashes what
identifies a code object across processes: its file name, qualified name and first line,
and a digest of its bytecode, constants (nested code objects by their own digest), names
and signature; an edited function is another code (its memory starts empty).

- ``recall`` (the first capture of a code in a Session): the recorded sources and dimensions
  join the Session's memory of that code.
- ``remember`` (after each capture's memory was computed): when it holds something the record
  does not, the record is rewritten with the union of the two (read again just before, so
  processes learning different dimensions at once keep each other's).

Sources are written as their chain of kiln.guards source classes with literal fields; one
that cannot be (an item keyed by a class) is left out of the record. Invariant: the record
only grows, as the in-process memory does; ``kiln.reset`` forgets the Session's memory, not
the record.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import logging
import types
from typing import TYPE_CHECKING, Any

from kiln.guards import Source

from ._logs import artifact_logger

if TYPE_CHECKING:
    from ._stats import Stats

__all__ = ["code_key", "recall", "remember"]

_FORMAT = 1
_LITERALS = (type(None), bool, int, str, bytes)


def code_key(code: types.CodeType) -> str:
    """The key of ``code`` across processes (see the module docstring)."""
    from kiln.inductor import code_digest

    identity = repr((_FORMAT, code.co_filename, code.co_qualname, code.co_firstlineno, code_digest(code)))
    return hashlib.sha256(identity.encode()).hexdigest()[:40]


def encode_source(source: Source) -> list[Any] | None:
    """``source`` as JSON (its chain of classes with their literal fields), or None."""
    import kiln.guards

    out = []
    for step in source.chain():
        name = type(step).__name__
        if getattr(kiln.guards, name, None) is not type(step):
            return None
        fields = {}
        for f in dataclasses.fields(step):
            if not f.init or f.name == "base":
                continue
            value = getattr(step, f.name)
            if not _literal(value):
                return None
            fields[f.name] = repr(value)
        out.append([name, fields])
    return out


def decode_source(data: Any) -> Source:
    """The source ``encode_source`` gave ``data`` for; ValueError (or TypeError) otherwise."""
    import kiln.guards

    source = None
    for name, fields in data:
        cls = getattr(kiln.guards, name, None)
        if not (isinstance(cls, type) and issubclass(cls, Source)):
            raise ValueError(f"not a source class: {name!r}")
        kwargs = {k: ast.literal_eval(v) for k, v in fields.items()}
        source = cls(**kwargs) if source is None else cls(base=source, **kwargs)
    if source is None:
        raise ValueError("an empty source")
    return source


def _literal(value: Any) -> bool:
    return type(value) in _LITERALS or (type(value) is tuple and all(_literal(v) for v in value))


def _store(root: str) -> Any:
    from kiln.inductor import EntryStore

    return EntryStore(root, "dynamic")


def _read(root: str, key: str) -> tuple[frozenset[Source], dict[Source, frozenset[int]]]:
    record = _store(root).read(key)
    numbers: set[Source] = set()
    dims: dict[Source, frozenset[int]] = {}
    if record is None:
        return frozenset(), {}
    try:
        for data in record["numbers"]:
            numbers.add(decode_source(data))
        for data, ds in record["dims"]:
            dims[decode_source(data)] = frozenset(int(d) for d in ds)
    except (KeyError, TypeError, ValueError, SyntaxError) as error:
        logging.getLogger("kiln.cache").warning("kiln: the recompile memory %s does not read (%s); it is "
                                                "ignored", key, error)
        return frozenset(), {}
    return frozenset(numbers), dims


def recall(stats: Stats, code: types.CodeType, root: str) -> None:
    """Once per code and Session: add the recorded memory of ``code`` under ``root`` to
    ``stats``' (see the module docstring)."""
    if code in stats.recorded_memory:
        return
    numbers, dims = _read(root, code_key(code))
    stats.recorded_memory[code] = (numbers, dims)
    if not numbers and not dims:
        return
    stats.dynamic_numbers[code] = stats.dynamic_numbers.get(code, frozenset()) | numbers
    merged = dict(stats.dynamic_dims.get(code, {}))
    for source, ds in dims.items():
        merged[source] = merged.get(source, frozenset()) | ds
    stats.dynamic_dims[code] = merged
    artifact_logger("recompiles").info(
        "%s: dynamic from its first compile, as an earlier process learned: %s", code.co_qualname,
        ", ".join([*map(str, sorted(numbers, key=str)), *(f"{s} dims {sorted(d)}" for s, d in dims.items())]))


def remember(stats: Stats, code: types.CodeType, root: str) -> None:
    """Rewrite the record of ``code`` under ``root`` when ``stats`` knows more of it than the
    record did (see the module docstring)."""
    numbers = stats.dynamic_numbers.get(code, frozenset())
    dims = stats.dynamic_dims.get(code, {})
    known_numbers, known_dims = stats.recorded_memory.get(code, (frozenset(), {}))
    if numbers <= known_numbers and all(d <= known_dims.get(s, frozenset()) for s, d in dims.items()):
        return
    key = code_key(code)
    disk_numbers, disk_dims = _read(root, key)
    numbers = numbers | disk_numbers
    merged = dict(disk_dims)
    for source, ds in dims.items():
        merged[source] = merged.get(source, frozenset()) | ds
    encoded_numbers = [e for e in map(encode_source, numbers) if e is not None]
    encoded_dims = [[e, sorted(ds)] for s, ds in merged.items() if (e := encode_source(s)) is not None]
    record = {"code": f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})",
              "numbers": sorted(encoded_numbers, key=repr), "dims": sorted(encoded_dims, key=repr)}
    _store(root).write(key, record)
    stats.recorded_memory[code] = (frozenset(numbers), merged)
