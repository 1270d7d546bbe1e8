"""Concrete bytecode: real opcodes with integer opargs at code-unit offsets.

This is ``co_code`` taken apart and nothing more: EXTENDED_ARG prefixes are folded into the
instruction they extend (``extended`` counts them) and inline CACHE units are skipped
(``caches`` counts them). Offsets are in code units (2 bytes) and point at the first
EXTENDED_ARG prefix, which is where jumps to the instruction land.

Invariants: ``size == extended + 1 + caches``; ``encode_concrete(decode_concrete(b)) == b``
for any compiler-produced ``b`` (cache units are zero in ``co_code``).
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from ._exctable import ExceptionTableEntry, decode_exception_table, encode_exception_table
from ._instr import Location
from ._linetable import decode_linetable, encode_linetable
from ._table import VersionTable
from .versions import TABLE

__all__ = [
    "ConcreteBytecode",
    "ConcreteInstr",
    "decode_concrete",
    "encode_concrete",
    "extended_args_needed",
]

_TEMPLATE = (lambda: None).__code__


@dataclass(slots=True)
class ConcreteInstr:
    """One real instruction: opcode name, full oparg, offset and size in code units."""

    name: str
    opcode: int
    arg: int
    offset: int = 0
    extended: int = 0
    caches: int = 0

    @property
    def size(self) -> int:
        """Code units taken by the instruction with its EXTENDED_ARG prefixes and caches."""
        return self.extended + 1 + self.caches

    @property
    def end(self) -> int:
        """Offset (code units) of the next instruction."""
        return self.offset + self.size


def extended_args_needed(arg: int) -> int:
    """How many EXTENDED_ARG prefixes an oparg needs (0-3)."""
    if arg < 0 or arg >= 1 << 32:
        raise ValueError(f"oparg {arg} does not fit in 32 bits")
    return 0 if arg < 256 else 1 if arg < 1 << 16 else 2 if arg < 1 << 24 else 3


@functools.cache
def _opcode_info(table: VersionTable) -> tuple[tuple[str, int], ...]:
    """(name, cache count) per opcode number, for the decoding loop."""
    return tuple((name, table.caches(name)) for name in table.opname)


def decode_concrete(code: bytes, table: VersionTable = TABLE) -> list[ConcreteInstr]:
    """Split ``co_code`` bytes into concrete instructions."""
    info = _opcode_info(table)
    extended_arg = table.extended_arg
    out: list[ConcreteInstr] = []
    ext_arg = 0
    ext_count = 0
    start = 0
    unit = 0
    n_units = len(code) // 2
    while unit < n_units:
        op, oparg = code[2 * unit], code[2 * unit + 1]
        if op == extended_arg:
            if ext_count == 0:
                start = unit
            ext_arg = (ext_arg | oparg) << 8
            ext_count += 1
            unit += 1
            continue
        if ext_count == 0:
            start = unit
        name, caches = info[op]
        out.append(ConcreteInstr(name, op, ext_arg | oparg, start, ext_count, caches))
        unit += 1 + caches
        ext_arg = ext_count = 0
    if ext_count:
        raise ValueError("co_code ends with EXTENDED_ARG")
    return out


def encode_concrete(instrs: Iterable[ConcreteInstr], table: VersionTable = TABLE) -> bytes:
    """Write instructions back to ``co_code`` bytes (prefixes and zeroed caches included)."""
    out = bytearray()
    zeros = [bytes(2 * n) for n in range(32)]
    extended_arg = table.extended_arg
    for ins in instrs:
        arg = ins.arg
        if ins.extended or arg > 255:
            if ins.extended < extended_args_needed(arg):
                raise ValueError(f"{ins.name} oparg {arg} needs more than {ins.extended} EXTENDED_ARG")
            for shift in range(ins.extended, 0, -1):
                out += bytes((extended_arg, (arg >> (8 * shift)) & 0xFF))
        out.append(ins.opcode)
        out.append(arg & 0xFF)
        if ins.caches:
            out += zeros[ins.caches]
    return bytes(out)


def _instr_locations(code: CodeType, instrs: list[ConcreteInstr]) -> list[Location | None]:
    entries = decode_linetable(code.co_linetable, code.co_firstlineno)
    starts = [start for start, _, _ in entries]
    out: list[Location | None] = []
    for ins in instrs:
        i = bisect.bisect_right(starts, ins.offset) - 1
        inside = i >= 0 and ins.offset < entries[i][0] + entries[i][1]
        out.append(entries[i][2] if inside else None)
    return out


@dataclass(slots=True)
class ConcreteBytecode:
    """A code object at the concrete level: instructions with opargs and raw tables.

    ``locations[i]`` is the location of ``instrs[i]``; ``exception_table`` holds raw
    entries in code units. ``to_code`` lays the instructions out as given (offsets are
    recomputed from sizes) and encodes the location and exception tables.
    """

    instrs: list[ConcreteInstr]
    locations: list[Location | None]
    exception_table: list[ExceptionTableEntry]
    consts: list[Any]
    names: list[str]
    varnames: list[str]
    cellvars: list[str]
    freevars: list[str]
    stacksize: int
    name: str = "<kiln>"
    qualname: str = "<kiln>"
    filename: str = "<kiln>"
    first_lineno: int = 1
    flags: int = 0
    argcount: int = 0
    posonlyargcount: int = 0
    kwonlyargcount: int = 0
    table: VersionTable = field(default=TABLE, repr=False)

    @classmethod
    def from_code(cls, code: CodeType, table: VersionTable = TABLE) -> ConcreteBytecode:
        """Take ``code`` apart without interpreting opargs."""
        instrs = decode_concrete(code.co_code, table)
        return cls(
            instrs=instrs,
            locations=_instr_locations(code, instrs),
            exception_table=decode_exception_table(code.co_exceptiontable),
            consts=list(code.co_consts),
            names=list(code.co_names),
            varnames=list(code.co_varnames),
            cellvars=list(code.co_cellvars),
            freevars=list(code.co_freevars),
            stacksize=code.co_stacksize,
            name=code.co_name,
            qualname=code.co_qualname,
            filename=code.co_filename,
            first_lineno=code.co_firstlineno,
            flags=code.co_flags,
            argcount=code.co_argcount,
            posonlyargcount=code.co_posonlyargcount,
            kwonlyargcount=code.co_kwonlyargcount,
            table=table,
        )

    def to_code(self) -> CodeType:
        """Encode into a code object (built with ``code.replace`` on a template)."""
        offset = 0
        for ins in self.instrs:
            ins.offset = offset
            offset += ins.size
        linetable = encode_linetable(
            ((ins.size, loc) for ins, loc in zip(self.instrs, self.locations, strict=True)),
            self.first_lineno,
            self.table.linetable_merges_runs,
        )
        return _TEMPLATE.replace(
            co_argcount=self.argcount,
            co_posonlyargcount=self.posonlyargcount,
            co_kwonlyargcount=self.kwonlyargcount,
            co_nlocals=len(self.varnames),
            co_stacksize=self.stacksize,
            co_flags=self.flags,
            co_firstlineno=self.first_lineno,
            co_code=encode_concrete(self.instrs, self.table),
            co_consts=tuple(self.consts),
            co_names=tuple(self.names),
            co_varnames=tuple(self.varnames),
            co_freevars=tuple(self.freevars),
            co_cellvars=tuple(self.cellvars),
            co_filename=self.filename,
            co_name=self.name,
            co_qualname=self.qualname,
            co_linetable=linetable,
            co_exceptiontable=encode_exception_table(self.exception_table),
        )
