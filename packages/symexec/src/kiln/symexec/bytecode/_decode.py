"""Decoding: code object -> ``Bytecode`` (abstract level).

Steps: split ``co_code`` into concrete instructions, give each the location of the
location-table entry its first code unit falls in, turn jump and handler offsets into
``Label``s placed before their target instruction, translate opargs into meanings, and
attach to each instruction the handler of the exception-table entry covering it.

Invariant: every jump target and handler target is the start of an instruction (otherwise
``DecodeError``); one ``Label`` per distinct target offset, placed once.
"""

from __future__ import annotations

import bisect
from types import CodeType
from typing import Any

from ._bytecode import Bytecode, localsplus_names
from ._concrete import ConcreteBytecode, ConcreteInstr
from ._instr import (
    NO_ARG,
    AttrArg,
    CompareArg,
    ExceptHandler,
    GlobalArg,
    Instr,
    Label,
    SuperAttrArg,
    unchecked_instr,
)
from ._table import ArgKind, VersionTable
from .versions import TABLE

__all__ = ["DecodeError", "decode", "decode_concrete_bytecode", "jump_target_offset"]


class DecodeError(ValueError):
    """A code object whose bytecode this layer cannot take apart."""


def jump_target_offset(ins: ConcreteInstr, table: VersionTable = TABLE) -> int:
    """Code-unit offset a concrete jump goes to (relative to the end of its caches)."""
    return ins.end + table.jump_directions[ins.name] * ins.arg


def _meaning(ins: ConcreteInstr, kind: ArgKind, code: ConcreteBytecode, localsplus: list[str],
             labels: dict[int, Label], table: VersionTable) -> Any:
    arg = ins.arg
    if kind is ArgKind.NONE:
        return NO_ARG
    if kind is ArgKind.INT:
        return arg
    if kind is ArgKind.CONST:
        return code.consts[arg]
    if kind is ArgKind.NAME:
        return code.names[arg]
    if kind is ArgKind.GLOBAL:
        return GlobalArg(code.names[arg >> 1], bool(arg & 1))
    if kind is ArgKind.ATTR:
        bits = table.name_flag_bits["LOAD_ATTR"]
        return AttrArg(code.names[arg >> bits], bool(arg & 1) if bits else False)
    if kind is ArgKind.SUPER_ATTR:
        return SuperAttrArg(code.names[arg >> 2], bool(arg & 1), bool(arg & 2))
    if kind is ArgKind.LOCAL:
        return localsplus[arg]
    if kind is ArgKind.LOCAL_PAIR:
        return (localsplus[arg >> 4], localsplus[arg & 15])
    if kind is ArgKind.JUMP:
        return labels[jump_target_offset(ins, table)]
    if kind is ArgKind.COMPARE:
        return CompareArg(*table.decode_compare(arg))
    if kind is ArgKind.BINARY_OP:
        return table.binary_ops[arg]
    if kind is ArgKind.BOOL:
        return bool(arg)
    raise AssertionError(kind)


def decode(code: CodeType, table: VersionTable = TABLE) -> Bytecode:
    """Decode ``code`` (not its nested code objects, which stay constants) into a Bytecode."""
    return decode_concrete_bytecode(ConcreteBytecode.from_code(code, table))


def decode_concrete_bytecode(cb: ConcreteBytecode) -> Bytecode:
    """The abstract level of a concrete-level code object."""
    table = cb.table
    concrete = cb.instrs
    unknown = sorted({i.name for i in concrete if i.name not in table.arg_kinds})
    if unknown:
        raise DecodeError(f"{cb.qualname}: opcodes {unknown} are not in the CPython {table.version} table")
    offsets = [ins.offset for ins in concrete]
    starts = set(offsets)
    targets = {jump_target_offset(i, table) for i in concrete if i.name in table.jump_directions}
    targets |= {e.target for e in cb.exception_table}
    bad = sorted(t for t in targets if t not in starts)
    if bad:
        raise DecodeError(f"{cb.qualname}: jump/handler targets {bad} are not instruction starts")
    labels = {offset: Label() for offset in sorted(targets)}
    localsplus = localsplus_names(cb.varnames, cb.cellvars, cb.freevars)
    handlers: list[ExceptHandler | None] = [None] * len(concrete)
    for e in cb.exception_table:
        handler = ExceptHandler(labels[e.target], e.depth, e.lasti)
        for k in range(bisect.bisect_left(offsets, e.start), bisect.bisect_left(offsets, e.end)):
            handlers[k] = handler
    instrs: list[Instr | Label] = []
    for k, (ins, loc) in enumerate(zip(concrete, cb.locations, strict=True)):
        if ins.offset in labels:
            instrs.append(labels[ins.offset])
        name = table.neutral_names.get(ins.name, ins.name)
        arg = _meaning(ins, table.arg_kind(name), cb, localsplus, labels, table)
        instrs.append(unchecked_instr(name, arg, loc, handlers[k], 2 * (ins.offset + ins.extended)))
    return Bytecode(
        instrs=instrs,
        name=cb.name,
        qualname=cb.qualname,
        filename=cb.filename,
        first_lineno=cb.first_lineno,
        flags=cb.flags,
        argcount=cb.argcount,
        posonlyargcount=cb.posonlyargcount,
        kwonlyargcount=cb.kwonlyargcount,
        varnames=list(cb.varnames),
        cellvars=list(cb.cellvars),
        freevars=list(cb.freevars),
        consts=list(cb.consts),
        names=list(cb.names),
    )
