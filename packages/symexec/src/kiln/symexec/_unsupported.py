"""Unsupported: the structured signal that tracing cannot go on.

Raised anywhere in the symbolic interpreter (a handler, a variable tracker, a torch call on
fake tensors) with a reason a user can act on. The interpreter fills in *where*: the
instruction and the user's source line. The caller decides what it means: with
``fullgraph=True`` it is an error shown to the user; otherwise the frame falls back to eager
today, and becomes a graph break once graph breaks exist.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass
from typing import Any

__all__ = ["MissingAttribute", "SourceLocation", "TracedException", "Unsupported"]


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A line of the user's source: file, line number, function name and the line's text."""

    filename: str
    lineno: int | None
    function: str

    @property
    def text(self) -> str:
        if self.lineno is None:
            return ""
        return linecache.getline(self.filename, self.lineno).strip()

    def __str__(self) -> str:
        where = f"{self.filename}:{self.lineno} in {self.function}"
        return f"{where}\n    {self.text}" if self.text else where


class Unsupported(Exception):
    """Tracing cannot continue here; ``reason`` says why, ``location`` where (if known)."""

    def __init__(self, reason: str, *, instruction: Any = None,
                 location: SourceLocation | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.instruction = instruction
        self.location = location
        self.stack: list[SourceLocation] = []  # inlined callers, innermost last
        # (instruction index, times reached) of the root frame when this was raised.
        self.root_position: tuple[int, int] | None = None
        # the failed trace had taken ``.item()``/``.tolist()`` values into the graph
        self.data_dependent = False

    def locate(self, instruction: Any, location: SourceLocation) -> Unsupported:
        """Record where the error happened unless a deeper frame already did."""
        if self.location is None:
            self.instruction = instruction
            self.location = location
        else:
            self.stack.insert(0, location)
        return self

    def detached(self) -> Unsupported:
        """This error without its traceback or chained exceptions, to be kept (in a capture,
        counters, logs). A traceback holds its frames and, through them, every caller's frame
        and locals: user tensors, and torch's RAII guards (``_DisableFuncTorch``, dispatch-key
        guards) that would stay in force until the error is freed."""
        self.__traceback__ = None
        self.__context__ = self.__cause__ = None
        return self

    def __str__(self) -> str:
        if self.location is None:
            return self.reason
        lines = [self.reason, f"  at {self.location}"]
        lines += [f"  called from {loc}" for loc in reversed(self.stack)]
        return "\n".join(lines)


class TracedException(Unsupported):
    """A Python exception the traced code raises (``KeyError`` of a missing key, a ``raise``
    statement, ...): a ``try``/``except`` of the traced code that catches it runs its handler
    at trace time; uncaught, tracing cannot go on (eager raises it for real).

    ``exc_type`` is the exception class; ``exc`` the exception's tracker once made."""

    def __init__(self, reason: str, exc_type: type[BaseException] = Exception, exc: Any = None, **kw: Any) -> None:
        super().__init__(reason, **kw)
        self.exc_type = exc_type
        self.exc = exc


class MissingAttribute(TracedException):
    """An attribute read that raises AttributeError when the code runs (the attribute is
    missing, or traced code raised AttributeError): ``hasattr`` and ``getattr`` with a
    default answer it at trace time, as does an ``except AttributeError``."""

    def __init__(self, reason: str, exc: Any = None, **kw: Any) -> None:
        super().__init__(reason, AttributeError, exc, **kw)
