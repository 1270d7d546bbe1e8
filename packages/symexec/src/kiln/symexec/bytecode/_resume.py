"""Resume functions: code that continues a function at one of its instructions.

A graph break ends a captured graph in the middle of a function. The replacement code runs
the graph, runs the instruction that could not be traced, and then calls a *resume
function*: a copy of the original body whose prologue rebuilds the value stack from its
arguments and jumps to the instruction after the break. Its other arguments are the local
variables still needed there (``live_locals``); it returns what the original would have.

    def f(x):                          def resume_in_f_at_3(___stack0, y):
        y = x.sin()                        <push ___stack0>; jump to L
        print(y)        # break            ...the body of f, unchanged...
        return y.cos()                  L: POP_TOP; LOAD_FAST y; ...; RETURN_VALUE

The copy keeps every instruction of the original (the part before the jump target is
unreachable but keeps backward jumps of loops valid), its line numbers and its exception
table. Free variables that the code only reads become arguments too (their LOAD_DEREFs read
the argument), so the resume function needs no closure. Functions with cell variables,
writes to free variables, and generators are not supported here (``resumable`` says).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from types import CodeType

from ._build import make_code
from ._bytecode import Bytecode
from ._decode import decode
from ._instr import Instr, Label, SuperAttrArg, label_positions
from .versions import TABLE

__all__ = ["RESUME_PREFIX", "STACK_PREFIX", "in_loop", "live_locals", "make_resume", "resumable"]

STACK_PREFIX = "___stack"  # the arguments holding the value stack
RESUME_PREFIX = "__kiln_resume_in_"  # the name of every resume function starts so

_READS = frozenset(("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST"))
_PAIRS = {  # 3.13's two-variable forms: (reads, writes) as positions in the arg pair
    "LOAD_FAST_LOAD_FAST": ((0, 1), ()),
    "STORE_FAST_LOAD_FAST": ((1,), (0,)),
    "STORE_FAST_STORE_FAST": ((), (0, 1)),
}
_UNSUPPORTED_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _successors(items: list[Instr | Label]) -> list[list[int]]:
    """Per instruction (labels not counted): the indices control may go to next."""
    index_of_label = label_positions(items)
    count = sum(1 for item in items if not isinstance(item, Label))
    out: list[list[int]] = []
    position = 0
    for item in items:
        if isinstance(item, Label):
            continue
        nexts = []
        if item.name not in TABLE.no_fallthrough and position + 1 < count:
            nexts.append(position + 1)
        if isinstance(item.arg, Label):
            nexts.append(index_of_label[item.arg])
        if item.handler is not None:
            nexts.append(index_of_label[item.handler.target])
        out.append(nexts)
        position += 1
    return out


def live_locals(bc: Bytecode) -> list[frozenset[str]]:
    """Per instruction of ``bc`` (labels not counted): the fast locals that some path from
    there reads before writing them (the variables a resume function there must receive)."""
    instrs = bc.instructions()
    succ = _successors(bc.instrs)
    reads: list[frozenset[str]] = []
    writes: list[frozenset[str]] = []
    for ins in instrs:
        r: tuple[str, ...] = ()
        w: tuple[str, ...] = ()
        if ins.name in _READS:
            r = (ins.arg,)
        elif ins.name == "STORE_FAST":
            w = (ins.arg,)
        elif ins.name in _PAIRS:
            rs, ws = _PAIRS[ins.name]
            r, w = tuple(ins.arg[i] for i in rs), tuple(ins.arg[i] for i in ws)
        reads.append(frozenset(r))
        writes.append(frozenset(w))
    live = [frozenset[str]() for _ in instrs]
    changed = True
    while changed:  # backward dataflow to the fixed point
        changed = False
        for i in range(len(instrs) - 1, -1, -1):
            out: set[str] = set()
            for j in succ[i]:
                out |= live[j]
            new = reads[i] | (out - writes[i])
            if new != live[i]:
                live[i] = frozenset(new)
                changed = True
    return live


_FREE_WRITES = frozenset(("STORE_DEREF", "DELETE_DEREF", "LOAD_CLOSURE", "MAKE_CELL"))


def resumable(code: CodeType) -> str | None:
    """None if ``make_resume`` can continue ``code``; else why not."""
    if code.co_flags & _UNSUPPORTED_FLAGS:
        return "it is a generator or coroutine"
    if code.co_cellvars:
        return f"its variables {', '.join(code.co_cellvars)} are captured by inner functions"
    if not code.co_freevars:
        return None
    instrs = decode(code).instructions()
    if any(i.name in _FREE_WRITES for i in instrs):
        return "it writes to a variable of an enclosing function"
    if "__class__" in code.co_freevars and _calls_frame_super(instrs):
        return "it calls super() without arguments"
    return None


def _calls_frame_super(instrs: list[Instr]) -> bool:
    """Whether some ``super()`` call finds its class and instance in the calling frame (the
    __class__ cell, the first local): every zero-argument ``super()`` on 3.11, a bare one on
    3.12+. ``super().name`` on 3.12+ loads both onto the stack for LOAD_SUPER_ATTR, whose
    two-argument form a resume function uses instead (``_read_free_as_local``)."""
    for k, ins in enumerate(instrs):
        if ins.name == "LOAD_GLOBAL" and ins.arg.name == "super":
            following = instrs[k + 1] if k + 1 < len(instrs) else None
            if following is None or following.name != "LOAD_DEREF" or following.arg != "__class__":
                return True
    return False


def make_resume(code: CodeType, target: int, stack: Sequence[bool], local_names: Sequence[str],
                *, name: str) -> CodeType:
    """A function continuing ``code`` at its instruction ``target`` (an index among the
    decoded instructions, labels not counted).

    ``stack`` describes the value stack there, bottom first: True for a NULL (pushed by the
    prologue), False for a value passed as argument ``___stack<i>`` (``i`` counting values
    only). ``local_names`` are the fast locals passed after the stack values, under their own
    names, then come ``code``'s free variables. The new code takes exactly those positional
    arguments and is named ``name``. Raises ValueError for code ``resumable`` refuses.
    """
    why = resumable(code)
    if why is not None:
        raise ValueError(f"{code.co_qualname} cannot be resumed: {why}")
    instrs = decode(code).instrs
    positions = [k for k, item in enumerate(instrs) if isinstance(item, Instr)]
    if not 0 <= target < len(positions):
        raise ValueError(f"{code.co_qualname} has no instruction {target}")
    at = positions[target]
    if at > 0 and isinstance(instrs[at - 1], Label):
        label = instrs[at - 1]
    else:
        label = Label("resume")
        instrs.insert(at, label)
    instrs = [_read_free_as_local(item) for item in instrs if not _copies_free_vars(item)]
    values = [f"{STACK_PREFIX}{i}" for i in range(sum(not null for null in stack))]
    push: list[Instr] = []
    names = iter(values)
    for null in stack:
        push.append(Instr("PUSH_NULL") if null else Instr("LOAD_FAST", next(names)))
    push.append(Instr("JUMP", label))
    flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    qualname = code.co_qualname.rsplit(".", 1)[0] + "." + name if "." in code.co_qualname else name
    return make_code(
        [*push, *instrs],
        name=name,
        qualname=qualname,
        filename=code.co_filename,
        first_lineno=code.co_firstlineno,
        argnames=[*values, *local_names, *code.co_freevars],
        flags=flags & ~(inspect.CO_OPTIMIZED | inspect.CO_NEWLOCALS),
        consts=list(code.co_consts),
    )


def in_loop(bc: Bytecode, index: int) -> bool:
    """Whether control can come back to instruction ``index`` (it lies on a cycle)."""
    succ = _successors(bc.instrs)
    seen: set[int] = set()
    todo = list(succ[index])
    while todo:
        i = todo.pop()
        if i == index:
            return True
        if i not in seen:
            seen.add(i)
            todo.extend(succ[i])
    return False


def _copies_free_vars(item: Instr | Label) -> bool:
    return isinstance(item, Instr) and item.name == "COPY_FREE_VARS"


def _read_free_as_local(item: Instr | Label) -> Instr | Label:
    # Only free variables can be dereferenced here (no cells): each is now an argument.
    if isinstance(item, Instr) and item.name == "LOAD_DEREF":
        return Instr("LOAD_FAST", item.arg, location=item.location, handler=item.handler, offset=item.offset)
    if isinstance(item, Instr) and item.name == "LOAD_SUPER_ATTR" and not item.arg.two_arg:
        # ``super().name``: the class and instance are on the stack already; the two-argument
        # form uses them instead of looking for a __class__ cell in the (resume) frame
        arg = SuperAttrArg(item.arg.name, item.arg.method, two_arg=True)
        return Instr(item.name, arg, location=item.location, handler=item.handler, offset=item.offset)
    return item
