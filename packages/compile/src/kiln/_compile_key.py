"""Which ``kiln.compile`` configuration compiled a cache entry, as a guard of the entry.

frameeval keeps one list of entries per code object, whatever callback compiled them. So
``kiln.compile(f, backend=a)`` and ``kiln.compile(f, backend=b)`` would share f's entries: the
second would run the first's compiled code and never call its backend. torch.compile
recompiles for another backend; so does kiln: each entry carries ``SameCompile``, which holds
while the thread's current callback has the entry's key (the backend and every stage's
config: ``compile_key``, compared by identity first, then by value) or none at all
(``RUN_ONLY``, or frames run with no kiln callback, which any entry may serve). Two ``kiln.compile`` calls with the same backend and
options share their entries, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kiln import frameeval as fe
from kiln.guards import Guard, Source

__all__ = ["CompileKey", "SameCompile", "compile_key", "current_key"]


class CompileKey:
    """One ``kiln.compile`` configuration: the backend (a name, or the callable itself,
    compared by identity) and the stage configs. The entries of one ``kiln.compile`` see
    the very same key (an identity check); another call with an equal configuration
    compares equal."""

    __slots__ = ("_ident", "backend", "configs")

    def __init__(self, backend: Any, configs: Any) -> None:
        self.backend = backend
        self.configs = configs
        self._ident = ("name", backend) if isinstance(backend, str) else ("object", id(backend))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompileKey) and self._ident == other._ident and self.configs == other.configs

    def __hash__(self) -> int:
        return hash((self._ident, self.configs))

    def __repr__(self) -> str:
        name = self.backend if isinstance(self.backend, str) else getattr(
            self.backend, "__qualname__", type(self.backend).__name__)
        return f"<kiln.compile backend={name}>"


def compile_key(backend: Any, configs: Any) -> CompileKey:
    """The key of ``backend`` with ``configs``."""
    return CompileKey(backend, configs)


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
        if current is None or current == self.key:
            return None
        return f"compiled by {self.key!r}, called under {current!r}"
