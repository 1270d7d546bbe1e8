"""Building new code: fresh code objects from instruction lists, and call sequences.

``make_code`` is what the symbolic interpreter uses for resume functions and for the code
that calls a captured graph: it lays out parameters, adds the prologue CPython expects
(COPY_FREE_VARS, MAKE_CELL per cell, RETURN_GENERATOR + POP_TOP for generators, RESUME 0 —
the same order on 3.11-3.13) and assembles. ``call_instrs`` and ``with_null`` emit a call in
the running version's layout (PRECALL on 3.11, KW_NAMES on 3.11/3.12, CALL_KW on 3.13, NULL
below or above the callable) so that code generators stay version-neutral.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from types import CodeType
from typing import Any

from ._bytecode import DEFAULT_FLAGS, Bytecode
from ._instr import Instr, Label
from .versions import TABLE

__all__ = ["call_instrs", "conditional_jump", "make_code", "normalize_jumps", "prologue", "with_null"]

_INVERSE = {
    "POP_JUMP_IF_FALSE": "POP_JUMP_IF_TRUE",
    "POP_JUMP_IF_TRUE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_IF_NONE": "POP_JUMP_IF_NOT_NONE",
    "POP_JUMP_IF_NOT_NONE": "POP_JUMP_IF_NONE",
}

_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def prologue(cellvars: Sequence[str], freevars: Sequence[str], flags: int) -> list[Instr]:
    """The instructions CPython puts before a function's first line."""
    out: list[Instr] = []
    if freevars:
        out.append(Instr("COPY_FREE_VARS", len(freevars)))
    out += [Instr("MAKE_CELL", name) for name in cellvars]
    if flags & _GENERATOR_FLAGS:
        out += [Instr("RETURN_GENERATOR"), Instr("POP_TOP")]
    out.append(Instr("RESUME", 0))
    return out


def normalize_jumps(items: Iterable[Instr | Label]) -> list[Instr | Label]:
    """Rewrite conditional jumps that go backward where the version cannot encode them.

    ``POP_JUMP_IF_X L`` with ``L`` placed before it becomes ``POP_JUMP_IF_<not X> skip;
    JUMP L; skip:`` (what CPython 3.12's compiler emits). Other items are returned as they
    are; on 3.11, which has backward conditional jumps, nothing changes.
    """
    items = list(items)
    seen: set[Label] = set()
    out: list[Instr | Label] = []
    for item in items:
        if isinstance(item, Label):
            seen.add(item)
        elif (item.name in _INVERSE and item.arg in seen
              and TABLE.jump_families[item.name][1] is None):
            skip = Label()
            out += [Instr(_INVERSE[item.name], skip, location=item.location, handler=item.handler),
                    Instr("JUMP", item.arg, location=item.location, handler=item.handler), skip]
            continue
        out.append(item)
    return out


def make_code(
    instrs: Iterable[Instr | Label],
    *,
    name: str = "<kiln>",
    qualname: str | None = None,
    filename: str = "<kiln>",
    first_lineno: int = 1,
    argnames: Sequence[str] = (),
    posonlyargcount: int = 0,
    kwonlyargnames: Sequence[str] = (),
    varargs: str | None = None,
    varkw: str | None = None,
    cellvars: Sequence[str] = (),
    freevars: Sequence[str] = (),
    flags: int = 0,
    consts: Sequence[Any] = (None,),
    add_prologue: bool = True,
) -> CodeType:
    """Assemble a new function code object.

    ``argnames`` are the positional parameters (the first ``posonlyargcount`` positional
    only), then ``kwonlyargnames``, ``*varargs`` and ``**varkw``; any other local the
    instructions use becomes a local variable. ``flags`` are added to CO_OPTIMIZED |
    CO_NEWLOCALS (and CO_VARARGS / CO_VARKEYWORDS as needed). ``consts`` seeds co_consts
    (its first entry is the docstring slot). Backward conditional jumps are rewritten where
    the version needs it (``normalize_jumps``). Returns the code object; attach it to a
    function with ``types.FunctionType(code, globals, name, defaults, closure)``.
    """
    varnames = [*argnames, *kwonlyargnames]
    all_flags = DEFAULT_FLAGS | flags
    if varargs is not None:
        varnames.append(varargs)
        all_flags |= inspect.CO_VARARGS
    if varkw is not None:
        varnames.append(varkw)
        all_flags |= inspect.CO_VARKEYWORDS
    body = normalize_jumps(instrs)
    if add_prologue:
        body = [*prologue(cellvars, freevars, all_flags), *body]
    bc = Bytecode(
        instrs=body,
        name=name,
        qualname=qualname or name,
        filename=filename,
        first_lineno=first_lineno,
        flags=all_flags,
        argcount=len(argnames),
        posonlyargcount=posonlyargcount,
        kwonlyargcount=len(kwonlyargnames),
        varnames=varnames,
        cellvars=list(cellvars),
        freevars=list(freevars),
        consts=list(consts),
    )
    return bc.to_code()


def with_null(load_callable: Sequence[Instr]) -> list[Instr]:
    """``load_callable`` plus the NULL that CALL expects next to a plain callable."""
    if TABLE.null_after_callable:
        return [*load_callable, Instr("PUSH_NULL")]
    return [Instr("PUSH_NULL"), *load_callable]


def conditional_jump(name: str, target: Label) -> list[Instr]:
    """``POP_JUMP_IF_TRUE``/``FALSE`` on any value's truth: TO_BOOL first where the version's
    conditional jumps only accept an exact bool (3.13)."""
    if name not in ("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE"):
        raise ValueError(f"{name} is not a truth-testing jump")
    prefix = [Instr("TO_BOOL")] if TABLE.jump_if_needs_bool else []
    return [*prefix, Instr(name, target)]


def call_instrs(nargs: int, kw_names: Sequence[str] = ()) -> list[Instr]:
    """Call with ``nargs`` arguments on the stack, the last ``len(kw_names)`` by keyword.

    Expects the callable and its NULL/self below the arguments (see ``with_null``); leaves
    the result.
    """
    if len(kw_names) > nargs:
        raise ValueError(f"{len(kw_names)} keyword names for {nargs} arguments")
    out: list[Instr] = []
    if kw_names and "CALL_KW" in TABLE.opmap:
        return [Instr("LOAD_CONST", tuple(kw_names)), Instr("CALL_KW", nargs)]
    if kw_names:
        out.append(Instr("KW_NAMES", tuple(kw_names)))
    if "PRECALL" in TABLE.opmap:
        out.append(Instr("PRECALL", nargs))
    out.append(Instr("CALL", nargs))
    return out
