"""With blocks, ``raise`` and ``try``/``except``.

A ``with`` block enters and exits a context manager kiln models (grad mode, autocast) or
one written in Python (its ``__enter__``/``__exit__`` inlined); the block is traced on its
normal path. ``raise`` of an exception class or object made in the trace raises a
TracedException; the run loop sends it to the handler covering the instruction (the
exception table, as CPython does), whose code is traced with these rules: PUSH_EXC_INFO,
CHECK_EXC_MATCH, POP_EXCEPT, RERAISE. Uncaught, it stops tracing.
"""

from __future__ import annotations

from ._opcodes import rule
from ._unsupported import MissingAttribute, TracedException, Unsupported
from .variables._builtins import BuiltinVariable
from .variables._constant import ConstantVariable
from .variables._functions import UserMethodVariable
from .variables._objects import ExceptionVariable, user_special_method
from .variables._torch import ContextManagerVariable, ExitVariable


@rule("BEFORE_WITH")
def _before_with(tx, instr):
    manager = tx.pop()
    if isinstance(manager, ContextManagerVariable):
        tx.push(ExitVariable(manager))
        tx.push(manager.enter(tx))
        return
    # A context manager written in Python (contextlib.nullcontext, a user class): its
    # __enter__ and __exit__ are inlined; the block is traced on its normal path only.
    enter = user_special_method(manager, "__enter__")
    exit_ = user_special_method(manager, "__exit__")
    if enter is None or exit_ is None:
        raise Unsupported(f"with-block on {manager.describe()}")
    tx.push(UserMethodVariable(exit_, manager))
    tx.push(UserMethodVariable(enter, manager).call(tx, [], {}))


@rule("LOAD_ASSERTION_ERROR")
def _load_assertion_error(tx, instr):
    tx.push(BuiltinVariable(AssertionError))


@rule("RAISE_VARARGS")
def _raise(tx, instr):
    args = tx.popn(instr.arg)
    if not args:  # a bare ``raise``: the exception being handled
        if tx.exc_info is None:
            raise Unsupported("re-raising with no exception being handled")
        raise _traced(tx.exc_info)
    raised = args[0]
    if isinstance(raised, ExceptionVariable):
        raise _traced(raised)
    if raised.is_constant() and isinstance(raised.as_constant(), type) \
            and issubclass(raised.as_constant(), BaseException):
        raise _traced(ExceptionVariable(raised.as_constant(), []))
    raise Unsupported(f"raising {raised.describe()} inside a compiled region")


def _traced(exc: ExceptionVariable) -> TracedException:
    # AttributeError stays a MissingAttribute: hasattr()/getattr(o, n, default) answer it
    if issubclass(exc.cls, AttributeError):
        return MissingAttribute(f"traced code raised {exc.describe()}", exc)
    return TracedException(f"traced code raised {exc.describe()}", exc.cls, exc)


# -- try/except: a handler entered with the exception the traced code raised ----------------------

@rule("PUSH_EXC_INFO")
def _push_exc_info(tx, instr):
    exc = tx.pop()
    tx.push(tx.exc_info if tx.exc_info is not None else ConstantVariable(None))
    tx.push(exc)
    tx.exc_info = exc


@rule("POP_EXCEPT")
def _pop_except(tx, instr):
    previous = tx.pop()
    tx.exc_info = None if previous.is_constant() and previous.as_constant() is None else previous


@rule("CHECK_EXC_MATCH")
def _check_exc_match(tx, instr):
    wanted = tx.pop().as_constant()
    exc = tx.stack[-1]
    if not isinstance(exc, ExceptionVariable):
        raise Unsupported(f"matching {exc.describe()} against an except clause")
    tx.push(ConstantVariable(issubclass(exc.cls, wanted)))


@rule("RERAISE")
def _reraise(tx, instr):
    exc = tx.pop()
    if instr.arg:
        tx.pop()  # the offset the handler kept (f_lasti)
    if not isinstance(exc, ExceptionVariable):
        raise Unsupported(f"re-raising {exc.describe()}")
    raise _traced(exc)
