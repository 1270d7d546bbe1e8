"""``Bytecode``: an abstract instruction list plus everything else a code object holds.

The instruction list mixes ``Instr`` and ``Label``. ``consts``, ``names`` and ``varnames``
are starting tables: the assembler keeps their order (so a decoded function re-assembles
to the same indices, docstring and unused constants included) and appends whatever the
instructions use that is not there yet.

Invariants:
- Local, cell and free variables share one index space ("localsplus") laid out as
  ``varnames``, then the ``cellvars`` that are not also in ``varnames`` (a captured argument
  keeps its argument slot), then ``freevars`` — the layout ``code.replace`` builds.
- ``argcount + kwonlyargcount`` (+1 for each of CO_VARARGS/CO_VARKEYWORDS) first entries of
  ``varnames`` are the parameters.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from ._instr import ExceptHandler, Instr, Label

__all__ = ["Bytecode", "ExceptionRange", "copy_instrs", "exception_ranges", "localsplus_names"]

DEFAULT_FLAGS = inspect.CO_OPTIMIZED | inspect.CO_NEWLOCALS


def localsplus_names(varnames, cellvars, freevars) -> list[str]:
    """Names of the localsplus slots in index order (see the module docstring)."""
    names = list(varnames)
    names += [c for c in cellvars if c not in varnames]
    names += list(freevars)
    return names


@dataclass(frozen=True, slots=True)
class ExceptionRange:
    """Instructions ``first..last`` (inclusive indices, labels not counted) share ``handler``."""

    first: int
    last: int
    handler: ExceptHandler


def exception_ranges(items) -> list[ExceptionRange]:
    """The exception table at the abstract level: maximal runs of instructions (``Instr``
    among ``items``, labels skipped) with equal handlers, in order; uncovered ones omitted."""
    ranges: list[ExceptionRange] = []
    index = -1
    for item in items:
        if not isinstance(item, Instr):
            continue
        index += 1
        h = item.handler
        if h is None:
            continue
        if ranges and ranges[-1].last == index - 1 and ranges[-1].handler == h:
            ranges[-1] = ExceptionRange(ranges[-1].first, index, h)
        else:
            ranges.append(ExceptionRange(index, index, h))
    return ranges


def copy_instrs(items) -> list[Instr | Label]:
    """A copy of an instruction list with fresh ``Instr`` and ``Label`` objects.

    Jumps and handlers of the copy point at the copy's labels (a label not in ``items``
    stays shared), so the copy can be edited or spliced into other code independently.
    """
    items = list(items)
    fresh = {item: Label(item.hint) for item in items if isinstance(item, Label)}
    handlers: dict[ExceptHandler, ExceptHandler] = {}

    def handler_copy(h: ExceptHandler | None) -> ExceptHandler | None:
        if h is None:
            return None
        if h not in handlers:
            handlers[h] = ExceptHandler(fresh.get(h.target, h.target), h.depth, h.lasti)
        return handlers[h]

    out: list[Instr | Label] = []
    for item in items:
        if isinstance(item, Label):
            out.append(fresh[item])
            continue
        arg = fresh.get(item.arg, item.arg) if isinstance(item.arg, Label) else item.arg
        out.append(Instr(item.name, arg, location=item.location, handler=handler_copy(item.handler),
                         offset=item.offset))
    return out


@dataclass(slots=True)
class Bytecode:
    """A function body at the abstract level, convertible to and from code objects."""

    instrs: list[Instr | Label] = field(default_factory=list)
    name: str = "<kiln>"
    qualname: str | None = None
    filename: str = "<kiln>"
    first_lineno: int = 1
    flags: int = DEFAULT_FLAGS
    argcount: int = 0
    posonlyargcount: int = 0
    kwonlyargcount: int = 0
    varnames: list[str] = field(default_factory=list)
    cellvars: list[str] = field(default_factory=list)
    freevars: list[str] = field(default_factory=list)
    consts: list[Any] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    @classmethod
    def from_code(cls, code: CodeType) -> Bytecode:
        """Decode a code object (see ``decode``)."""
        from ._decode import decode

        return decode(code)

    def to_code(self) -> CodeType:
        """Assemble into a code object (see ``assemble``)."""
        from ._assemble import assemble

        return assemble(self)

    def localsplus(self) -> list[str]:
        """Names of the localsplus slots in index order."""
        return localsplus_names(self.varnames, self.cellvars, self.freevars)

    def instructions(self) -> list[Instr]:
        """The instructions without the labels."""
        return [i for i in self.instrs if isinstance(i, Instr)]

    def copy(self) -> Bytecode:
        """An independent copy: fresh instructions and labels (``copy_instrs``), new lists."""
        return Bytecode(
            instrs=copy_instrs(self.instrs), name=self.name, qualname=self.qualname,
            filename=self.filename, first_lineno=self.first_lineno, flags=self.flags,
            argcount=self.argcount, posonlyargcount=self.posonlyargcount,
            kwonlyargcount=self.kwonlyargcount, varnames=list(self.varnames),
            cellvars=list(self.cellvars), freevars=list(self.freevars), consts=list(self.consts),
            names=list(self.names),
        )

    def exception_ranges(self) -> list[ExceptionRange]:
        """Runs of instructions with the same handler (see ``exception_ranges``)."""
        return exception_ranges(self.instrs)

    def __iter__(self):
        return iter(self.instrs)

    def __len__(self) -> int:
        return len(self.instrs)
