"""Readable disassembly of code objects, ``Bytecode`` and instruction lists (for logs).

One line per instruction: its index, the source line where it changes, the opcode name and
the argument's meaning (labels as L1, L2, ... in order of placement, constants by repr,
``NULL + name`` for LOAD_GLOBAL with push_null, ``name (method)`` for a method load).
A label gets its own ``L<n>:`` line. Instructions covered by an exception handler show
``-> L<n>``; the exception table follows as ranges of instruction indices.
"""

from __future__ import annotations

from types import CodeType
from typing import Any

from ._bytecode import Bytecode, exception_ranges
from ._decode import decode
from ._instr import (
    NO_ARG,
    AttrArg,
    CompareArg,
    GlobalArg,
    Instr,
    Label,
    SuperAttrArg,
)

__all__ = ["disassemble", "format_arg"]


def _short_repr(value: Any, limit: int = 60) -> str:
    if isinstance(value, CodeType):
        return f"<code {value.co_qualname}>"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_arg(ins: Instr, label_names: dict[Label, str]) -> str:
    """The argument of ``ins`` as shown in a disassembly."""
    arg = ins.arg
    if arg is NO_ARG:
        return ""
    if isinstance(arg, Label):
        return label_names.get(arg, repr(arg))
    if isinstance(arg, GlobalArg):
        return f"NULL + {arg.name}" if arg.push_null else arg.name
    if isinstance(arg, AttrArg):
        return f"{arg.name} (method)" if arg.method else arg.name
    if isinstance(arg, SuperAttrArg):
        flags = [f for f, on in (("method", arg.method), ("two-arg", arg.two_arg)) if on]
        return f"{arg.name} ({', '.join(flags)})" if flags else arg.name
    if isinstance(arg, CompareArg):
        return f"{arg.op} (bool)" if arg.to_bool else arg.op
    if ins.name == "IS_OP":
        return "is not" if arg else "is"
    if ins.name == "CONTAINS_OP":
        return "not in" if arg else "in"
    if isinstance(arg, tuple) and ins.name.startswith(("LOAD_FAST", "STORE_FAST")):
        return ", ".join(arg)
    if ins.name in ("LOAD_CONST", "RETURN_CONST", "KW_NAMES"):
        return _short_repr(arg)
    return str(arg)


def _header(bc: Bytecode) -> str:
    parts = [f"{bc.qualname or bc.name} ({bc.filename}:{bc.first_lineno})",
             f"args={bc.argcount}", f"flags={bc.flags:#x}"]
    for title, names in (("varnames", bc.varnames), ("cellvars", bc.cellvars), ("freevars", bc.freevars)):
        if names:
            parts.append(f"{title}=({', '.join(names)})")
    return " ".join(parts)


def disassemble(obj: Any) -> str:
    """Format ``obj`` as text (see the module docstring); nested code objects are not shown.

    ``obj`` is a code object, a function (or anything with ``__code__``), a ``Bytecode`` or
    an iterable of instructions and labels.
    """
    code = getattr(obj, "__code__", obj)
    bc = decode(code) if isinstance(code, CodeType) else obj
    items = list(bc.instrs if isinstance(bc, Bytecode) else bc)
    label_names: dict[Label, str] = {}
    for item in items:
        if isinstance(item, Label):
            label_names[item] = f"L{len(label_names) + 1}"
    lines = [_header(bc)] if isinstance(bc, Bytecode) else []
    instrs: list[Instr] = []
    last_line: int | None = None
    for item in items:
        if isinstance(item, Label):
            lines.append(f"{label_names[item]}:")
            continue
        line = item.lineno
        shown = "" if line == last_line or line is None else str(line)
        last_line = line if line is not None else last_line
        arg = format_arg(item, label_names)
        text = f"{len(instrs):>5} {shown:>5}    {item.name:<24} {arg}".rstrip()
        if item.handler is not None:
            text = f"{text:<60} -> {label_names.get(item.handler.target, '?')}"
        lines.append(text)
        instrs.append(item)
    ranges = exception_ranges(instrs)
    if ranges:
        lines.append("ExceptionTable:")
        for r in ranges:
            lasti = " lasti" if r.handler.lasti else ""
            target = label_names.get(r.handler.target, "?")
            lines.append(f"  {r.first} to {r.last} -> {target} [{r.handler.depth}]{lasti}")
    return "\n".join(lines)
