"""Which ``kiln.compile`` configuration compiled a cache entry, as a guard of the entry.

frameeval keeps one list of entries per code object, whatever callback compiled them. So
``kiln.compile(f, backend=a)`` and ``kiln.compile(f, backend=b)`` would share f's entries: the
second would run the first's compiled code and never call its backend. torch.compile
recompiles for another backend; so does kiln: each entry carries ``SameCompile``, which holds
while the thread's current callback has the entry's key (the backend and every stage's
config, interned: ``compile_key``) or none at all (``RUN_ONLY``, or frames run with no kiln
callback, which any entry may serve). Two ``kiln.compile`` calls with the same backend and
options share their entries, as before.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from kiln import frameeval as fe
from kiln.guards import Guard, Source

__all__ = ["SameCompile", "compile_key", "current_key"]

_KEYS: dict[Any, CompileKey] = {}
_LOCK = threading.Lock()


class CompileKey:
    """One ``kiln.compile`` configuration (compared by identity)."""

    __slots__ = ("description",)

    def __init__(self, description: str) -> None:
        self.description = description

    def __repr__(self) -> str:
        return f"<kiln.compile {self.description}>"


def compile_key(backend: Any, configs: Any) -> CompileKey:
    """The key of ``backend`` (a name, or a callable by identity) with ``configs``: the same
    object for the same pair."""
    ident = ("name", backend) if isinstance(backend, str) else ("object", backend)
    try:
        hash(ident)
    except TypeError:  # an unhashable callable: its own key
        ident = ("id", id(backend))
    with _LOCK:
        key = _KEYS.get((ident, configs))
        if key is None:
            name = backend if isinstance(backend, str) else getattr(backend, "__qualname__", type(backend).__name__)
            key = _KEYS[(ident, configs)] = CompileKey(f"backend={name}")
        return key


def current_key() -> CompileKey | None:
    """The key of the thread's current kiln callback (None: none, or run-only)."""
    return getattr(fe.get_callback(), "key", None)


@dataclass(frozen=True, slots=True)
class SameCompile(Guard):
    """The frame runs under the ``kiln.compile`` configuration that compiled the entry (or
    under none)."""

    key: CompileKey
    cost = 1

    @property
    def sources(self) -> tuple[Source, ...]:
        return ()

    def describe(self) -> str:
        return f"compiled by {self.key!r}"

    def emit(self, ctx: Any) -> list[str]:
        return [f"{ctx.const(current_key, 'compile_key')}() in ({ctx.const(self.key, 'key')}, None)"]

    def explain(self) -> str | None:
        current = current_key()
        if current is None or current is self.key:
            return None
        return f"compiled by {self.key!r}, called under {current!r}"
