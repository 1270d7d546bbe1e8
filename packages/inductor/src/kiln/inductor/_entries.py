"""EntryStore: small JSON records on disk, one file per explicit key, safe to share between
processes and never trusted unchecked.

kiln keeps whole compiled graphs (``_graph_cache``) and, in the umbrella, aotgrad's split of
captured graphs and the recompile memory, as records of this kind. Layout, under
``<cache_dir>/<kind>/``:

- ``<key>.json``: a header line ``kiln-entry <format> <sha256 of the body>`` and the body, the
  record as UTF-8 JSON;
- ``*.tmp``: files being written (pid and a random suffix in the name); a killed writer may
  leave one behind, and nothing ever reads them.

Invariants:
- The key is the caller's: a hash of everything the record depends on. The store only
  checks that a file holds the record that was written under its name.
- A record is returned only when its header names this format and its body matches the
  digest (a truncated, torn or altered file never is); such a file counts as ``corrupt``,
  is logged, and reads as absent, so the caller rebuilds it and its write replaces the file.
- Files reach their names by ``os.replace`` of a complete temporary file: concurrent writers
  of one key each write their own temporary file and the last rename wins, with a record
  as valid as the other's. A cache directory that cannot be written is logged, never an
  error of the compile.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["EntryStats", "EntryStore"]

# Bump when the header or the meaning of the body changes for every kind.
_FORMAT = 1
_MAGIC = b"kiln-entry"
_log = logging.getLogger("kiln.cache")


@dataclass(slots=True)
class EntryStats:
    """What a store has done: reads that found a valid record, reads that found none, files
    that failed their check, records written."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0
    stored: int = 0


class EntryStore:
    """The records of one ``kind`` under ``root`` (see the module docstring)."""

    def __init__(self, root: str | os.PathLike, kind: str) -> None:
        self.directory = Path(root) / kind
        self.kind = kind
        self.stats = EntryStats()

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def read(self, key: str) -> Any:
        """The record stored under ``key``, or None (absent, or corrupt: logged)."""
        try:
            data = self.path(key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            self.stats.misses += 1
            return None
        except OSError as error:
            _log.warning("kiln: cannot read the %s cache entry %s (%s); it is rebuilt", self.kind, key, error)
            self.stats.misses += 1
            return None
        record = _decode(data)
        if record is _CORRUPT:
            self.stats.corrupt += 1
            self.stats.misses += 1
            _log.warning("kiln: the %s cache entry %s is corrupt (truncated or altered); it is rebuilt",
                         self.kind, self.path(key))
            return None
        self.stats.hits += 1
        return record

    def write(self, key: str, record: Any) -> bool:
        """Store ``record`` (JSON-serializable) under ``key``; False (logged) when the
        directory cannot be written."""
        body = json.dumps(record, separators=(",", ":"), sort_keys=True).encode()
        data = b"%s %d %s\n" % (_MAGIC, _FORMAT, hashlib.sha256(body).hexdigest().encode()) + body
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path(key), data)
        except OSError as error:
            _log.warning("kiln: cannot write the %s cache entry %s (%s)", self.kind, key, error)
            return False
        self.stats.stored += 1
        return True


_CORRUPT = object()


def _decode(data: bytes) -> Any:
    header, sep, body = data.partition(b"\n")
    parts = header.split(b" ")
    if not sep or len(parts) != 3 or parts[0] != _MAGIC or parts[1] != str(_FORMAT).encode():
        return _CORRUPT
    if hashlib.sha256(body).hexdigest().encode() != parts[2]:
        return _CORRUPT
    try:
        return json.loads(body)
    except ValueError:  # pragma: no cover - the digest matched: only a writer's bug gets here
        return _CORRUPT


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old content or all of the new."""
    temp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        temp.write_bytes(data)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
