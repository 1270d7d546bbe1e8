"""Whether an error raised where the trace is now could be caught by the traced code.

A graph op that may fail on run-time data (``_run_time_errors.may_raise``: a tensor index out
of range, overlapping memory in an in-place op, ...) raises when the graph runs, outside
every ``try`` of the user's code: an ``except`` that would catch it in eager never sees it,
and a ``finally`` body never runs. So where such an op would be recorded under a handler
that can catch, tracing stops instead (a graph break: the call runs for real inside the
``try``, or the frame runs eagerly).

``errors_caught(tx)`` walks the handlers covering the current instruction of ``tx`` and of
every frame that inlined it, outwards. A handler catches when it can swallow the exception:

- an ``except`` clause (``CHECK_EXC_MATCH``/``CHECK_EG_MATCH`` in its first straight-line
  run, or a bare ``except:``, which pops the exception at once);
- the cleanup of a ``with`` block over a Python context manager whose ``__exit__`` may return
  something true (``contextlib.suppress``).

Every other handler passes the exception on, and the walk goes to the handler covering it:
a ``finally`` body (it ends in ``RERAISE``), the cleanup of an ``except`` body, of a 3.12
inlined comprehension (stack shuffles, ``POP_EXCEPT``, stores, ``RERAISE``) or of a 3.12
generator body (``CALL_INTRINSIC_1`` turning StopIteration into RuntimeError, ``RERAISE``), the cleanup of a
``with`` block over a context manager kiln models (grad mode, autocast: an ``ExitVariable``)
or over a Python one whose ``__exit__`` returns only None or False. A ``finally`` body is not
run when the graph raises: its effects are replayed after the graph like the rest of the
trace's (the limit of ``_capture``'s effect replay, not of this module); a ``finally`` that
swallows (``return`` inside it) is not detected.
"""

from __future__ import annotations

import dis
import types
from typing import TYPE_CHECKING

from .variables._functions import UserMethodVariable
from .variables._torch import ExitVariable

if TYPE_CHECKING:
    from ._translator import Translator
    from .bytecode import ExceptHandler

__all__ = ["errors_caught"]

# Instructions a pass-through handler may run before its RERAISE.
# CALL_INTRINSIC_1: 3.12+ generator bodies are covered by a handler turning a StopIteration
# into a RuntimeError (INTRINSIC_STOPITERATION_ERROR) and re-raising: any other error passes.
_PASS_THROUGH = frozenset(("COPY", "SWAP", "POP_TOP", "POP_EXCEPT", "STORE_FAST", "NOP", "CALL_INTRINSIC_1"))
# Instructions that end a straight-line run of code.
_ENDS_RUN = frozenset(("RERAISE", "RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "JUMP_FORWARD",
                       "JUMP_BACKWARD", "JUMP", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE",
                       "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE",
                       "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE", "POP_JUMP_FORWARD_IF_NONE",
                       "POP_JUMP_FORWARD_IF_NOT_NONE"))


def errors_caught(tx: Translator | None) -> bool:
    """Whether an exception raised at ``tx``'s current instruction could be caught by a
    handler of the traced code (of ``tx`` or of a frame that inlined it)."""
    while tx is not None:
        if tx.current is not None and _catches(tx, tx.current.handler):
            return True
        tx = tx.parent
    return False


def _catches(tx: Translator, handler: ExceptHandler | None) -> bool:
    while handler is not None:
        start = tx.label_index(handler.target)
        code = tx.instructions
        first = code[start]
        if first.name == "PUSH_EXC_INFO":
            second = code[start + 1] if start + 1 < len(code) else None
            if second is not None and second.name == "WITH_EXCEPT_START":
                stack = tx.stack
                exit_ = stack[handler.depth - 1] if 0 < handler.depth <= len(stack) else None
                if not _exit_never_suppresses(exit_):
                    return True
            elif _is_except_clause(code, start):
                return True
            handler = first.handler  # a finally body, or a with block that re-raises
            continue
        reraise = _reraise_after(code, start)
        if reraise is None:
            return True
        handler = reraise.handler
    return False


def _is_except_clause(code: list, start: int) -> bool:
    """Whether the handler at ``start`` (a PUSH_EXC_INFO) is an ``except`` clause rather than
    a ``finally`` body: it pops the exception at once (bare ``except:``) or matches it."""
    if start + 1 < len(code) and code[start + 1].name == "POP_TOP":
        return True
    for instr in code[start + 1:]:
        if instr.name in ("CHECK_EXC_MATCH", "CHECK_EG_MATCH"):
            return True
        if instr.name in _ENDS_RUN:
            return False
    return False


def _exit_never_suppresses(exit_: object) -> bool:
    """Whether a with block's ``__exit__`` returns only None or False (or kiln models it)."""
    if isinstance(exit_, ExitVariable):
        return True
    fn = getattr(exit_, "fn", None) if isinstance(exit_, UserMethodVariable) else None
    if not isinstance(fn, types.FunctionType):
        return False
    previous = None
    for instr in dis.get_instructions(fn.__code__):
        if instr.opname == "RETURN_CONST" and instr.argval not in (None, False):
            return False
        if instr.opname == "RETURN_VALUE" and not (
                previous is not None and previous.opname == "LOAD_CONST" and previous.argval in (None, False)):
            return False
        previous = instr
    return True


def _reraise_after(code: list, start: int):
    """The RERAISE ending a pass-through handler starting at ``start``, or None."""
    for instr in code[start:]:
        if instr.name == "RERAISE":
            return instr
        if instr.name not in _PASS_THROUGH:
            return None
    return None
