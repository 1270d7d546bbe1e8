"""Assembly: ``Bytecode`` (abstract level) -> concrete level -> code object.

Steps: (1) give every argument its oparg, growing ``consts``/``names``/``varnames`` with
what the instructions use that the starting tables lack; (2) pick each jump's real opcode
from its direction (a label placed after the jump is forward, anything else backward);
(3) lay out offsets to a fix-point: sizes only grow (an oparg needing more EXTENDED_ARG
prefixes moves every later instruction), so the loop ends; (4) build exception-table
entries from runs of instructions with the same handler; (5) compute the stack size.

Invariants: a jump's oparg counts code units from the end of its caches; literal constants
are shared by (type, value) like the compiler does (so ``0``, ``0.0``, ``False`` and
``-0.0`` stay distinct), other objects by identity (``const_key``); a decoded
compiler-produced function re-assembles to the same ``co_code``, ``co_linetable`` and
``co_exceptiontable`` (the round-trip tests measure this).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import CodeType
from typing import Any

from ._bytecode import Bytecode, localsplus_names
from ._concrete import ConcreteBytecode, ConcreteInstr, extended_args_needed
from ._exctable import ExceptionTableEntry
from ._instr import ExceptHandler, Instr, Label, const_key
from ._stackdepth import FlowInstr, compute_stacksize, depths_before
from ._table import ArgKind, VersionTable
from .versions import TABLE

__all__ = ["AssemblyError", "assemble", "assemble_concrete", "stack_depths"]


class AssemblyError(ValueError):
    """An instruction list that cannot be encoded for the running version."""


class _Pool:
    """An append-only table with index lookup (co_consts, co_names)."""

    def __init__(self, items: list[Any], key=lambda x: x) -> None:
        self.items = list(items)
        self.key = key
        self.index: dict[Any, int] = {}
        for i, item in enumerate(self.items):
            self.index.setdefault(key(item), i)

    def get(self, item: Any) -> int:
        k = self.key(item)
        i = self.index.get(k)
        if i is None:
            i = self.index[k] = len(self.items)
            self.items.append(item)
        return i


def _local_names(instrs: list[Instr]) -> list[str]:
    out: list[str] = []
    for ins in instrs:
        if ins.kind is ArgKind.LOCAL:
            out.append(ins.arg)
        elif ins.kind is ArgKind.LOCAL_PAIR:
            out.extend(ins.arg)
    return out


def _oparg(ins: Instr, kind: ArgKind, consts: _Pool, names: _Pool, slots: dict[str, int],
           table: VersionTable) -> int:
    arg = ins.arg
    # most frequent kinds first
    if kind is ArgKind.NONE:
        return 0
    if kind is ArgKind.LOCAL:
        return slots[arg]
    if kind is ArgKind.CONST:
        return consts.get(arg)
    if kind is ArgKind.INT:
        return arg
    if kind is ArgKind.ATTR:
        bits = table.name_flag_bits["LOAD_ATTR"]
        if arg.method and not bits:
            raise AssemblyError("LOAD_ATTR has no method flag on this version (use LOAD_METHOD)")
        return names.get(arg.name) << bits | int(arg.method)
    if kind is ArgKind.GLOBAL:
        return names.get(arg.name) << 1 | int(arg.push_null)
    if kind is ArgKind.NAME:
        return names.get(arg)
    if kind is ArgKind.SUPER_ATTR:
        return names.get(arg.name) << 2 | int(arg.two_arg) << 1 | int(arg.method)
    if kind is ArgKind.LOCAL_PAIR:
        first, second = slots[arg[0]], slots[arg[1]]
        if first > 15 or second > 15:
            raise AssemblyError(f"{ins.name} needs both local indices < 16, got {arg}")
        return first << 4 | second
    if kind is ArgKind.COMPARE:
        try:
            return table.encode_compare(arg.op, arg.to_bool)
        except ValueError as exc:
            raise AssemblyError(str(exc)) from None
    if kind is ArgKind.BINARY_OP:
        return table.binary_ops.index(arg)
    if kind is ArgKind.BOOL:
        return int(arg)
    raise AssertionError(kind)


@functools.cache
def _opcode_info(table: VersionTable) -> dict[str, tuple[int, int]]:
    """(opcode, cache count) per real opcode name."""
    return {name: (op, table.caches(name)) for name, op in table.opmap.items()}


def _jump_opcode(name: str, forward: bool, table: VersionTable) -> str:
    family = table.jump_families.get(name)
    if family is not None:
        real = family[0] if forward else family[1]
        if real is None:
            direction = "forward" if forward else "backward"
            raise AssemblyError(f"{name} cannot jump {direction} on CPython {table.version} "
                                "(normalize_jumps rewrites it)")
        return real
    if (table.jump_directions[name] > 0) != forward:
        raise AssemblyError(f"{name} cannot jump {'forward' if forward else 'backward'}")
    return name


def _layout(concrete: list[ConcreteInstr], jump_to: dict[int, int], forward: dict[int, bool]) -> None:
    """Set offsets and jump opargs, growing EXTENDED_ARG prefixes until nothing changes."""
    while True:
        offset = 0
        for ins in concrete:
            ins.offset = offset
            offset += ins.size
        changed = False
        for i, t in jump_to.items():
            ins = concrete[i]
            target = concrete[t].offset if t < len(concrete) else offset
            arg = target - ins.end if forward[i] else ins.end - target
            if arg < 0:
                raise AssemblyError(f"jump at instruction {i} has a negative offset")
            ins.arg = arg
            need = extended_args_needed(arg)
            if need > ins.extended:
                ins.extended = need
                changed = True
        if not changed:
            return


def _exception_entries(concrete: list[ConcreteInstr], handlers: list[ExceptHandler | None],
                       label_index: dict[Label, int]) -> list[ExceptionTableEntry]:
    entries: list[ExceptionTableEntry] = []
    run_start = 0
    current: ExceptHandler | None = None
    end = concrete[-1].end if concrete else 0
    for ins, handler in [*zip(concrete, handlers, strict=True), (None, None)]:
        if handler != current:
            stop = ins.offset if ins is not None else end
            if current is not None:
                target = concrete[label_index[current.target]].offset
                entries.append(ExceptionTableEntry(run_start, stop, target, current.depth, current.lasti))
            current = handler
            run_start = stop
    return entries


@dataclass(slots=True)
class _Lowered:
    """An instruction list with opargs chosen but no offsets yet."""

    instrs: list[Instr]
    label_index: dict[Label, int]
    concrete: list[ConcreteInstr]
    jump_to: dict[int, int]
    forward: dict[int, bool]
    consts: _Pool
    names: _Pool
    varnames: list[str]

    def flow(self) -> list[FlowInstr]:
        out = []
        for i, (c, ins) in enumerate(zip(self.concrete, self.instrs, strict=True)):
            h = ins.handler
            if h is not None and h.target not in self.label_index:
                raise AssemblyError("an exception handler targets a label not in the list")
            out.append(FlowInstr(
                c.name, c.opcode, c.arg, self.jump_to.get(i),
                self.label_index[h.target] if h is not None else None,
                h.depth + int(h.lasti) + 1 if h is not None else 0,
            ))
        return out


def _lower(bc: Bytecode, table: VersionTable) -> _Lowered:
    instrs: list[Instr] = []
    label_index: dict[Label, int] = {}
    for item in bc.instrs:
        if isinstance(item, Label):
            if item in label_index:
                raise AssemblyError(f"{item!r} is placed twice")
            label_index[item] = len(instrs)
        else:
            instrs.append(item)
    varnames = list(bc.varnames)
    known = set(localsplus_names(varnames, bc.cellvars, bc.freevars))
    for name in _local_names(instrs):
        if name not in known:
            varnames.append(name)
            known.add(name)
    slots: dict[str, int] = {}
    for i, name in enumerate(localsplus_names(varnames, bc.cellvars, bc.freevars)):
        slots.setdefault(name, i)
    low = _Lowered(instrs, label_index, [], {}, {}, _Pool(bc.consts, const_key), _Pool(bc.names), varnames)
    kinds = table.arg_kinds
    info = _opcode_info(table)
    append = low.concrete.append
    for i, ins in enumerate(instrs):
        name = ins.name
        kind = kinds[name]
        if kind is ArgKind.JUMP:
            if ins.arg not in label_index:
                raise AssemblyError(f"instruction {i} ({name}) jumps to a label not in the list")
            low.jump_to[i] = label_index[ins.arg]
            low.forward[i] = low.jump_to[i] > i
            name = _jump_opcode(name, low.forward[i], table)
            arg = 0
        else:
            arg = _oparg(ins, kind, low.consts, low.names, slots, table)
        opcode, caches = info[name]
        append(ConcreteInstr(name, opcode, arg, 0, 0 if arg < 256 else extended_args_needed(arg), caches))
    return low


def assemble_concrete(bc: Bytecode, table: VersionTable = TABLE) -> ConcreteBytecode:
    """Lower ``bc`` to the concrete level (opargs, offsets, raw tables, stack size)."""
    low = _lower(bc, table)
    _layout(low.concrete, low.jump_to, low.forward)
    flow = low.flow()
    return ConcreteBytecode(
        instrs=low.concrete,
        locations=[ins.location for ins in low.instrs],
        exception_table=_exception_entries(low.concrete, [i.handler for i in low.instrs], low.label_index),
        consts=low.consts.items,
        names=low.names.items,
        varnames=low.varnames,
        cellvars=list(bc.cellvars),
        freevars=list(bc.freevars),
        stacksize=compute_stacksize(flow, table),
        name=bc.name,
        qualname=bc.qualname if bc.qualname is not None else bc.name,
        filename=bc.filename,
        first_lineno=bc.first_lineno,
        flags=bc.flags,
        argcount=bc.argcount,
        posonlyargcount=bc.posonlyargcount,
        kwonlyargcount=bc.kwonlyargcount,
        table=table,
    )


def assemble(bc: Bytecode, table: VersionTable = TABLE) -> CodeType:
    """Assemble ``bc`` into a code object."""
    return assemble_concrete(bc, table).to_code()


def stack_depths(bc: Bytecode, table: VersionTable = TABLE) -> list[int | None]:
    """Value-stack depth before each instruction of ``bc.instructions()``; None if unreachable.

    This is what a resume function needs to know: how many values are on the stack when
    execution reaches an instruction (handlers start at their entry's depth + lasti + 1).
    """
    return depths_before(_lower(bc, table).flow(), table)
