"""Graph breaks: where tracing a frame fails, capture what came before and resume after.

When an instruction of the frame itself (not of a function it inlines) cannot be traced, or
it calls a function whose tracing fails, the frame is traced again up to that instruction
(the ``Translator`` stops there) and its replacement does, in order:

1. run the graph of everything before the instruction and replay its side effects;
2. run the instruction for real: the call (``__kiln_r = fn(*args)``), or the branch on a
   value known only at run time (``if <tensor>:``);
3. return what a *resume function* returns: the original body continued after the
   instruction (``kiln.symexec.bytecode.make_resume``), called with the value stack and the
   locals still live there. The resume function is a new frame, which the frame hook
   compiles like any other (and which may break again).

Breakable: a ``CALL``/``CALL_FUNCTION_EX``, a ``BINARY_SUBSCR`` or a conditional jump of the frame

- inside ``with torch.no_grad()`` / ``enable_grad()`` / ``set_grad_enabled(b)`` blocks: the
  resume function gets a ``GradModeExit`` where the block's ``__exit__`` was;
- inside ``try`` blocks: the replacement runs the instruction in a ``try`` whose ``except``
  exits the grad-mode blocks inside the try, then returns a second resume function's
  result, continuing at the try's handler with the exception;
- not in a loop (a break in a loop body would resume into the loop and chain a new frame
  per iteration: the frame runs eagerly instead, as torch.compile does, and the functions
  it calls are still compiled as frames of their own), nor inside other ``with`` blocks;
- in a function that ``bytecode.resumable`` accepts (free variables only read: they are
  passed as arguments; no cell variables), and that does not read its namespace
  (``locals()``, ``vars()``, ``dir()``, ``eval``, ``exec``).

Anything else still falls back to eager for the frame.

Resume functions are cached by (code, instruction, stack layout, locals passed) in the
``SymexecCaches`` the capture is given, so that recompiling a frame reuses them and their
cache entries.

Each call of a resume function the replacement makes is described by a ``ResumeInputs``
(``Capture.resumes``): which of its arguments hold tensors with dimensions that are symbols
in this capture, which hold graph-input numbers, and which hold values known only at run
time (the instruction's result, the exception). The compile policy's automatic-dynamic memory
of the resume function inherits the first two, so it compiles dynamic from its first compile
after its parent learned a dimension or a number is dynamic.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kiln.guards import ItemSource, LocalSource, Source

from ._caches import SymexecCaches
from ._translator import NULL, Translator
from ._unsupported import TracedException, Unsupported
from .bytecode import (
    RESUME_PREFIX,
    STACK_PREFIX,
    Bytecode,
    ExceptHandler,
    Instr,
    decode,
    in_loop,
    live_locals,
    make_resume,
    resumable,
)
from .variables._base import VariableTracker
from .variables._containers import ListVariable, TupleVariable
from .variables._symnumber import SymNumberVariable
from .variables._tensor import TensorVariable
from .variables._torch import ExitVariable

if TYPE_CHECKING:
    from ._capture import _Writer
    from ._output_graph import OutputGraph

__all__ = ["ResumeInputs", "break_point", "break_tail"]

_CALLS = frozenset(("CALL", "CALL_FUNCTION_EX"))
_JUMPS = frozenset(("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"))
# ``container[key]``: run for real like a call (``x[idx[0]]``: indexing by a tensor's value)
_SUBSCRIPTS = frozenset(("BINARY_SUBSCR",))


def _analysis(code: types.CodeType, caches: SymexecCaches) -> tuple[Bytecode, list[frozenset[str]]]:
    """``code`` decoded and the locals live at each instruction, kept per code object in
    ``caches.analyses`` (every break of a code, and its recompiles, read the same)."""
    found = caches.analyses.get(code)
    if found is None:
        bc = decode(code)
        found = caches.analyses[code] = (bc, live_locals(bc))
    return found


@dataclass(frozen=True, slots=True)
class ResumeInputs:
    """The arguments one capture passes to a resume function it calls, by the source that
    reads them in the resume function's frame (``L['x']``, ``L['___stack0'][1]``).

    ``dims``: tensors and the dimensions of each that are (unspecialized) symbols in the
    capture; ``numbers``: graph-input numbers (unspecialized); ``runtime``: the names of
    arguments whose values exist only at run time (the result of the instruction run for
    real, the exception a handler receives), of which the capture knows nothing."""

    code: types.CodeType
    dims: Mapping[Source, frozenset[int]]
    numbers: frozenset[Source]
    runtime: frozenset[str]


# Builtins that may read every variable of the frame: a resume function holds only the
# variables live after the break (and its own names for the stack), so such code never breaks.
_NAMESPACE_READERS = frozenset({"locals", "vars", "dir", "eval", "exec"})


def break_point(code: types.CodeType, error: Unsupported, caches: SymexecCaches) -> tuple[int, int] | None:
    """Where a graph break can replace the failure ``error`` of tracing ``code``:
    ``(instruction index, visit)`` for ``Translator.stop_at``, or None."""
    if isinstance(error, TracedException) or error.root_position is None:
        return None
    if resumable(code) is not None or not _NAMESPACE_READERS.isdisjoint(code.co_names):
        return None
    index, _ = error.root_position
    bc, _ = _analysis(code, caches)
    instr = bc.instructions()[index]
    if instr.name not in _CALLS | _JUMPS | _SUBSCRIPTS:
        return None
    if in_loop(bc, index):
        return None
    return error.root_position


def break_tail(tx: Translator, f_globals: dict[str, Any],
               resumes: list[ResumeInputs]) -> Callable[[_Writer], list[str]]:
    """The replacement's last lines at ``tx``'s stop: the instruction run for real, then
    the resume function's result returned. Rendered by the capture's writer, which appends
    a ``ResumeInputs`` to ``resumes`` for each resume function call it renders.

    Inside blocks, what the instruction raises takes the path it would have taken: the
    grad-mode with blocks around it exit (innermost first), then either the exception goes on
    or, inside a ``try``, a resume function continues at the handler with the exception.
    Raises Unsupported where the instruction is inside a block no break can cross."""
    index = tx.ip
    instr = tx.instructions[index]
    exits, catch = _enclosing_blocks(tx, instr)
    resume = _Resumer(tx, f_globals, resumes)
    tail = _call_tail if instr.name in _CALLS else _subscript_tail if instr.name in _SUBSCRIPTS else _jump_tail

    def render(writer: _Writer) -> list[str]:
        run, rest = tail(writer, tx, instr, resume, index)
        if not exits and catch is None:
            return run + rest
        on_error = [f"    {writer.expr(e)}(None, None, None)" for e in exits]
        if catch is None:
            on_error.append("    raise")
        else:
            handler = catch
            extra = ([repr(instr.offset)] if handler.lasti else []) + ["__kiln_e"]
            target = tx.label_index(handler.target)
            on_error.append(f"    return {resume.call(writer, target, tx.stack[:handler.depth], extra)}")
        return ["try:", *[f"    {line}" for line in run], "except BaseException as __kiln_e:", *on_error,
                *rest]

    return render


def _enclosing_blocks(tx: Translator, instr: Instr) -> tuple[list[ExitVariable], ExceptHandler | None]:
    """The ``__exit__`` trackers of the with blocks around ``instr`` up to the innermost
    ``try`` block (innermost first), and that try block's handler (None: not in one). A with
    block on anything but grad mode is Unsupported (its exit cannot run outside the frame)."""
    exits: list[ExitVariable] = []
    handler = instr.handler
    while handler is not None:
        at = tx.label_index(handler.target)
        cleanup, following = [*tx.instructions[at:at + 2], None, None][:2]
        exit_ = tx.stack[handler.depth - 1] if 0 < handler.depth <= len(tx.stack) else None
        if cleanup is None or cleanup.name != "PUSH_EXC_INFO":
            raise Unsupported("a graph break inside a block whose handler is not understood")
        if following is None or following.name != "WITH_EXCEPT_START":
            return exits, handler  # a try block (except or finally): resumed at its handler
        if not isinstance(exit_, ExitVariable):
            raise Unsupported("a graph break inside a with block on an object kiln does not model")
        exit_.runtime_exit()  # Unsupported unless a grad-mode block
        exits.append(exit_)
        # the block's cleanup code is covered by its own handler (re-raise), which the
        # next enclosing block's handler covers in turn
        inner = cleanup.handler
        reraise = tx.instruction_at(inner.target) if inner is not None else None
        handler = reraise.handler if reraise is not None else None
    return exits, None


def _call_tail(writer: _Writer, tx: Translator, instr: Instr, resume: _Resumer,
               index: int) -> tuple[list[str], list[str]]:
    stack = tx.stack
    if instr.name == "CALL":
        items = stack[len(stack) - instr.arg - 2:]
        below = stack[:len(stack) - instr.arg - 2]
        fn, args = (items[1], items[2:]) if items[0] is NULL else (items[0], items[1:])
        kw_names = tx.kw_names
        positional = args[:len(args) - len(kw_names)]
        parts = [writer.expr(a) for a in positional]
        parts += [f"{k}={writer.expr(v)}" for k, v in zip(kw_names, args[len(positional):], strict=True)]
    else:  # CALL_FUNCTION_EX: NULL, callable, args (, kwargs)
        depth = 4 if instr.arg & 1 else 3
        items = stack[len(stack) - depth:]
        below = stack[:len(stack) - depth]
        fn = items[1]
        parts = [f"*{writer.expr(items[2])}"] + ([f"**{writer.expr(items[3])}"] if depth == 4 else [])
    call = f"{writer.expr(fn)}({', '.join(parts)})"
    return [f"__kiln_r = {call}"], [f"return {resume.call(writer, index + 1, below, ['__kiln_r'])}"]


def _subscript_tail(writer: _Writer, tx: Translator, instr: Instr, resume: _Resumer,
                    index: int) -> tuple[list[str], list[str]]:
    *below, container, key = tx.stack
    return ([f"__kiln_r = {writer.expr(container)}[{writer.expr(key)}]"],
            [f"return {resume.call(writer, index + 1, below, ['__kiln_r'])}"])


def _jump_tail(writer: _Writer, tx: Translator, instr: Instr, resume: _Resumer,
               index: int) -> tuple[list[str], list[str]]:
    *below, cond = tx.stack
    target = tx.label_index(instr.arg)
    following = index + 1
    if instr.name == "POP_JUMP_IF_TRUE":
        if_true, if_false = resume.call(writer, target, below), resume.call(writer, following, below)
    elif instr.name == "POP_JUMP_IF_FALSE":
        if_true, if_false = resume.call(writer, following, below), resume.call(writer, target, below)
    elif instr.name == "JUMP_IF_TRUE_OR_POP":
        if_true, if_false = resume.call(writer, target, [*below, cond]), resume.call(writer, following, below)
    else:  # JUMP_IF_FALSE_OR_POP
        if_true, if_false = resume.call(writer, following, below), resume.call(writer, target, [*below, cond])
    return [f"__kiln_r = bool({writer.expr(cond)})"], ["if __kiln_r:", f"    return {if_true}", f"return {if_false}"]


class _Resumer:
    """Calls of resume functions of one frame, rendered with the capture's writer."""

    def __init__(self, tx: Translator, f_globals: dict[str, Any], resumes: list[ResumeInputs]) -> None:
        self.tx = tx
        self.code = tx.code
        self.f_globals = f_globals
        self.live = _analysis(tx.code, tx.output.caches)[1]
        self.resume_functions = tx.output.caches.resume_functions
        self.break_line = tx.instructions[tx.ip].lineno
        self.resumes = resumes

    def call(self, writer: _Writer, target: int, stack: list[VariableTracker], extra: list[str] | None = None) -> str:
        """``resume(<stack values>, <extra>, <live locals>)`` continuing at ``target``."""
        extra = extra or []
        layout = tuple([v is NULL for v in stack] + [False] * len(extra))
        # the resume function's arguments (bytecode.make_resume): the stack values and the
        # extras as ___stack<i>, then the live locals and the free variables by name
        on_stack = [v for v in stack if v is not NULL]
        stack_names = [f"{STACK_PREFIX}{i}" for i in range(len(on_stack) + len(extra))]
        names = tuple(sorted(n for n in self.live[target] if n in self.tx.locals))
        passed = list(zip(stack_names, on_stack, strict=False))
        passed += [(n, self.tx.locals[n]) for n in names]
        for n in self.code.co_freevars:
            contents = self.tx.cells[n].contents
            if contents is None:
                raise Unsupported(f"the free variable {n!r} is empty")
            passed.append((n, contents))
        values = [writer.expr(v) for v in on_stack] + extra + [writer.expr(v) for _, v in passed[len(on_stack):]]
        fn = self._function(target, layout, names)
        self.resumes.append(_resume_inputs(self.tx.output, fn.__code__, passed,
                                           frozenset(stack_names[len(on_stack):])))
        return f"{writer.body.ref(fn, 'resume')}({', '.join(values)})"

    def _function(self, target: int, layout: tuple[bool, ...], names: tuple[str, ...]) -> types.FunctionType:
        key = (self.code, target, layout, names)
        fn = self.resume_functions.get(key)
        if fn is None or fn.__globals__ is not self.f_globals:
            base = self.code.co_name if self.code.co_name.isidentifier() else "fn"
            name = f"{RESUME_PREFIX}{base.removeprefix(RESUME_PREFIX)}_at_{self.break_line}"
            code = make_resume(self.code, target, layout, names, name=name)
            fn = types.FunctionType(code, self.f_globals, name)
            self.resume_functions[key] = fn
        return fn


def _resume_inputs(output: OutputGraph, code: types.CodeType, passed: list[tuple[str, VariableTracker]],
                   runtime: frozenset[str]) -> ResumeInputs:
    """What the trackers ``passed`` (argument name, tracker) say about a resume function's
    arguments: see ``ResumeInputs``. Items of tuples and lists are described too."""
    dims: dict[Source, frozenset[int]] = {}
    numbers: set[Source] = set()
    todo: list[tuple[Source, VariableTracker]] = [(LocalSource(name), v) for name, v in passed]
    while todo:
        source, v = todo.pop()
        if isinstance(v, TensorVariable):
            symbolic = _symbolic_dims(output, v.fake)
            if symbolic:
                dims[source] = symbolic
        elif isinstance(v, SymNumberVariable):
            specialized = any(leaf.specialized for leaf in v.inputs) or \
                (v.symbolic and _is_constant(output, v.example))
            if not specialized:
                numbers.add(source)
        elif isinstance(v, (TupleVariable, ListVariable)):
            todo += [(ItemSource(source, i), item) for i, item in enumerate(v.items)]
    return ResumeInputs(code, dims, frozenset(numbers), runtime)


def _symbolic_dims(output: OutputGraph, fake: Any) -> frozenset[int]:
    """The dimensions of ``fake`` whose sizes are symbols the capture did not specialize."""
    return frozenset(d for d, size in enumerate(fake.shape) if not _is_constant(output, size))


def _is_constant(output: OutputGraph, value: Any) -> bool:
    """Whether ``value`` (a number, or a torch.SymInt/SymFloat of the capture's ShapeEnv) is
    one value: a plain number, or a symbol the capture specialized."""
    if type(value) in (int, float, bool):
        return True
    from kiln.symshapes.bridge import from_torch

    try:
        expr = from_torch(value).expr
    except TypeError:  # not kiln-backed: nothing known about it
        return True
    return bool(output.shape_env.simplify(expr).is_Number)
