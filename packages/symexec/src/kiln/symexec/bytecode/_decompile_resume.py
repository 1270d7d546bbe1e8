"""Resume functions back to Python: the user's source, continued where the break left it.

A resume function (``make_resume``) is a copy of the user's code behind a prologue that pushes
its ``___stack<i>`` arguments (and NULLs) and jumps to the instruction after the break. Its
Python form is built from the user's own syntax tree:

1. the *interrupted statement*: the statement holding the target instruction, with each
   value on the stack put in place of the expression that computed it (found by the span of
   the instruction that pushed it, ``_decompile_flow``); a method and its ``self`` on the
   stack make a call with ``self`` first; conditional expressions and ``and``/``or`` whose
   branch was decided before the break keep only the branch taken; ``x += v`` whose ``x`` was
   read before the break becomes ``___stack<i> += v`` then ``x = ___stack<i>``;
2. the rest of the function after that statement, nested as the original: the remaining
   statements of an enclosing ``if``/``match`` branch, then those after it; the rest of a
   ``try`` body inside that ``try`` with its handlers; the rest of a ``with`` body inside an
   explicit try/finally that calls the ``__exit__`` on the stack (PEP 343). A resume at an
   exception handler (the exception on the stack) raises it inside the ``try``'s handlers.
3. locals the function has but the resume function does not receive are declared (``if
   False: name = None``) so they stay locals, unbound, as at the break.

Anything outside these shapes (a break inside a loop body or an ``except`` block, a stack
value that no expression of the statement accounts for, a chained comparison half done)
raises ``NotExact`` with the reason: never source that would do something else.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from types import CodeType

from ._bytecode import Bytecode
from ._decode import decode
from ._decompile_flow import OPAQUE, SECOND, Origin, stack_origins
from ._decompile_source import FunctionSource, Span, find_function, location_span, span_of
from ._instr import Instr, Label
from ._resume import RESUME_PREFIX, STACK_PREFIX
from ._stackdepth import depths_before
from .versions import TABLE

__all__ = ["NotExact", "ResumeLayout", "decompile_resume", "resume_layout"]


class NotExact(Exception):
    """The decompiler cannot give source that surely does what the code does; ``str`` says why."""


@dataclass
class ResumeLayout:
    """What a resume function's prologue says: per stack slot (bottom first) its argument name
    (None for a NULL), the index of the target among the body's instructions, the body."""

    slots: list[str | None]
    items: list[Instr | Label]  # the copied body, prologue removed
    target: int
    entry: int  # where the original function starts in ``items`` (older prologues skipped)


def _prologue(items: list[Instr | Label]) -> tuple[list[str | None], Label, int] | None:
    """(slots, jump label, index of the first item after the JUMP) if ``items`` start with a
    resume prologue (after RESUME and friends), else None."""
    k = 0
    while k < len(items) and isinstance(items[k], Instr) and items[k].name in ("RESUME", "NOP", "COPY_FREE_VARS"):
        k += 1
    slots: list[str | None] = []
    while k < len(items):
        ins = items[k]
        if not isinstance(ins, Instr):
            return None
        if ins.name == "PUSH_NULL":
            slots.append(None)
        elif ins.name == "LOAD_FAST" and ins.arg.startswith(STACK_PREFIX):
            slots.append(ins.arg)
        elif ins.name in ("JUMP", "JUMP_FORWARD") and isinstance(ins.arg, Label):
            return slots, ins.arg, k + 1
        else:
            return None
        k += 1
    return None


def resume_layout(code: CodeType) -> ResumeLayout:
    """Read ``code``'s prologue; NotExact if it is not a resume function."""
    if not code.co_name.startswith(RESUME_PREFIX):
        raise NotExact(f"{code.co_qualname} is not a resume function")
    items = decode(code).instrs
    found = _prologue(items)
    if found is None:
        raise NotExact("its prologue is not the one make_resume writes")
    slots, label, after = found
    body = items[after:]
    entry = 0
    while (older := _prologue(body[entry:])) is not None:  # a resume function's resume function
        entry += older[2]
    positions = [k for k, item in enumerate(body) if isinstance(item, Instr)]
    at = body.index(label)
    target = next(i for i, k in enumerate(positions) if k > at)
    entry_index = sum(isinstance(item, Instr) for item in body[:entry])
    return ResumeLayout(slots, body, target, entry_index)


# -- from the stack to the syntax tree ------------------------------------------------------

_SKIP = frozenset(("NOP", "JUMP", "JUMP_NO_INTERRUPT", "JUMP_FORWARD", "JUMP_BACKWARD_NO_INTERRUPT"))
_METHOD_LOADS = frozenset(("LOAD_METHOD", "LOAD_ATTR", "LOAD_SUPER_ATTR", "LOAD_GLOBAL"))


class _Resume:
    """One resume function being decompiled: its layout, the user's function, stack origins."""

    def __init__(self, code: CodeType) -> None:
        self.code = code
        layout = self.layout = resume_layout(code)
        self.instrs = [i for i in layout.items if isinstance(i, Instr)]
        spans = [s for s in (location_span(i.location) for i in self.instrs[layout.entry:] if i.name != "RESUME")
                 if s is not None]
        self.src: FunctionSource = find_function(code.co_filename, code.co_firstlineno, spans)
        first_item = _item_index(layout.items, layout.entry)
        depths = depths_before(_lower(Bytecode(instrs=list(layout.items[first_item:]),
                                               varnames=list(code.co_varnames))).flow(), TABLE)
        self.states = stack_origins(layout.items, layout.entry, [None] * layout.entry + depths)
        self.label_at: dict[Label, int] = {}
        count = 0
        for item in layout.items:
            if isinstance(item, Label):
                self.label_at[item] = count
            else:
                count += 1

    def span(self, index: int) -> Span | None:
        return location_span(self.instrs[index].location)

    def _second_load(self, k: int) -> ast.expr:
        """The second name a LOAD_FAST_LOAD_FAST loads (its position is the first's): the
        one load of that name in the statement, or NotExact."""
        span = self.span(k)
        stmt = self.src.innermost(span, ast.stmt) if span is not None else None
        name = self.instrs[k].arg[1]
        loads = [n for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id == name
                 and isinstance(n.ctx, ast.Load)] if stmt is not None else []
        if len(loads) != 1:
            raise NotExact(f"the stack value of {name!r} loaded with another local cannot be placed in "
                           "the source")
        return loads[0]

    def node_of(self, origin: Origin) -> ast.expr:
        """The expression that computed a value of this origin; NotExact if none surely did."""
        if origin >= OPAQUE:
            raise NotExact("a value on the stack comes from an instruction the decompiler does not model")
        if len(origin) == 1 and next(iter(origin)) >= SECOND:
            return self._second_load(next(iter(origin)) - SECOND)
        spans = [self.span(k % SECOND) for k in sorted(origin)]
        if any(s is None for s in spans):
            raise NotExact("a value on the stack comes from an instruction without a source position")
        if len(origin) == 1:
            (k,) = origin
            node = self.src.expr_at(spans[0])
            if node is None or not _produces(self.instrs[k], node):
                raise NotExact(f"no expression of the source computes the stack value pushed by "
                               f"{self.instrs[k].name} at line {spans[0][0]}")
            return node
        union = (*min((s[0], s[1]) for s in spans), *max((s[2], s[3]) for s in spans))
        node = self.src.expr_at(union)
        if not isinstance(node, (ast.IfExp, ast.BoolOp)):
            raise NotExact(f"a stack value at line {union[0]} comes from several paths that are not "
                           "one conditional expression")
        return node


def _lower(bc: Bytecode):
    from ._assemble import _lower as lower

    return lower(bc, TABLE)


def _item_index(items: list[Instr | Label], instr_index: int) -> int:
    seen = 0
    for k, item in enumerate(items):
        if isinstance(item, Instr):
            if seen == instr_index:
                return k
            seen += 1
    return len(items)


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_CONST_FOLDED = (ast.Constant, ast.Tuple, ast.UnaryOp, ast.BinOp, ast.Set, ast.List, ast.Subscript, ast.BoolOp,
                 ast.Compare)
_PRODUCED = {
    "CALL": (ast.Call, *_COMPREHENSIONS),  # a comprehension's own function called (3.11)
    "CALL_KW": ast.Call, "CALL_FUNCTION_EX": ast.Call, "LOAD_ATTR": ast.Attribute,
    "LOAD_METHOD": ast.Attribute, "LOAD_SUPER_ATTR": ast.Attribute, "BINARY_OP": ast.BinOp,
    "COMPARE_OP": ast.Compare, "IS_OP": ast.Compare, "CONTAINS_OP": ast.Compare,
    "BINARY_SUBSCR": ast.Subscript, "BINARY_SLICE": ast.Subscript, "BUILD_TUPLE": ast.Tuple,
    "BUILD_LIST": ast.List, "BUILD_SET": ast.Set, "BUILD_MAP": ast.Dict, "BUILD_CONST_KEY_MAP": ast.Dict,
    "BUILD_STRING": ast.JoinedStr, "FORMAT_VALUE": ast.FormattedValue, "FORMAT_SIMPLE": ast.FormattedValue,
    "FORMAT_WITH_SPEC": ast.FormattedValue, "UNARY_NEGATIVE": ast.UnaryOp, "UNARY_NOT": ast.UnaryOp,
    "UNARY_INVERT": ast.UnaryOp, "UNARY_POSITIVE": ast.UnaryOp, "MAKE_FUNCTION": ast.Lambda,
    "SET_FUNCTION_ATTRIBUTE": ast.Lambda, "BUILD_SLICE": ast.Slice, "LOAD_CONST": _CONST_FOLDED,
}
_NAME_LOADS = frozenset(("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_NAME", "LOAD_GLOBAL"))


def _produces(ins: Instr, node: ast.expr) -> bool:
    """Whether ``ins`` is the instruction that computes ``node``'s value."""
    if ins.name == "LOAD_FAST_LOAD_FAST":  # its first name (the second: ``_second_load``)
        return isinstance(node, ast.Name) and node.id == ins.arg[0]
    if ins.name in _NAME_LOADS:
        name = ins.arg.name if ins.name == "LOAD_GLOBAL" else ins.arg
        return isinstance(node, ast.Name) and node.id == name
    if ins.name in ("LOAD_ATTR", "LOAD_METHOD"):
        attr = ins.arg.name if ins.name == "LOAD_ATTR" else ins.arg
        return isinstance(node, ast.Attribute) and node.attr == attr
    if ins.name == "LOAD_SUPER_ATTR":
        return isinstance(node, ast.Attribute) and node.attr == ins.arg.name
    kind = _PRODUCED.get(ins.name)
    return kind is not None and isinstance(node, kind)


def _is_method_load(ins: Instr) -> bool:
    """Whether ``ins`` pushes a callable and its ``self`` (or a NULL) as two slots."""
    if ins.name == "LOAD_METHOD":
        return True
    if ins.name in ("LOAD_ATTR", "LOAD_SUPER_ATTR"):
        return ins.arg.method
    return ins.name == "LOAD_GLOBAL" and ins.arg.push_null


def decompile_resume(code: CodeType) -> ast.Module:
    """``code`` (a resume function) as a module defining one function of the same name and
    arguments, with the user's file positions. Raises NotExact (or SourceUnavailable)."""
    from ._decompile_rewrite import Rewriter, build_function

    if not code.co_name.isidentifier():
        raise NotExact(f"the resume function's name {code.co_name!r} is not an identifier")
    r = _Resume(code)
    layout = r.layout
    target = layout.target
    state = r.states[target]
    handler_entry = r.instrs[target].name == "PUSH_EXC_INFO"
    if state is None and not handler_entry:
        raise NotExact("the resume target is not reached from the function's entry")
    if state is not None and len(state) != len(layout.slots):
        raise NotExact(f"the prologue pushes {len(layout.slots)} values where the code has {len(state)}")
    rw = Rewriter(r.src)
    if handler_entry:
        stmts, at, slots = _handler_resume(r, rw, target)
    else:
        slots = [(name, origin) for name, origin in zip(layout.slots, state, strict=True)]
        stmts, at = _statement_resume(r, rw, target, slots)
    body = rw.nest(stmts, at)
    return build_function(r.src, code, body, at)


def _classify(r: _Resume, rw, slots: list[tuple[str | None, Origin]]) -> None:
    """Tell ``rw`` what each stack slot stands for: a with block's exit, a method and its
    self, or the value of an expression."""
    k = 0
    while k < len(slots):
        name, origin = slots[k]
        single = next(iter(origin)) if len(origin) == 1 and not origin >= OPAQUE else None
        ins = r.instrs[single % SECOND] if single is not None else None
        if ins is not None and ins.name == "MAKE_FUNCTION" and name is not None:
            made = r.src.expr_at(r.span(single)) if r.span(single) is not None else None
            if isinstance(made, _COMPREHENSIONS):
                rw.comprehension(made)  # the source makes the same function again
                k += 1
                continue
        if ins is not None and ins.name == "BEFORE_WITH":
            with_node = r.src.innermost(r.span(single), ast.With)
            if name is None or with_node is None:
                raise NotExact("a with block's exit on the stack has no with statement around it")
            rw.with_exit(with_node, name)
            k += 1
            continue
        if ins is not None and _is_method_load(ins) and k + 1 < len(slots) and slots[k + 1][1] == origin:
            pair = [name, slots[k + 1][0]]
            if TABLE.null_after_callable:  # 3.13: callable then NULL/self
                callable_, self_ = pair
            else:  # NULL/method then callable/self
                callable_, self_ = pair[1], pair[0]
                if callable_ is not None and self_ is not None:
                    callable_, self_ = pair[0], pair[1]
            node = r.node_of(origin)
            if callable_ is not None and self_ is not None:
                rw.method(node, callable_, self_)
            elif callable_ is not None or self_ is not None:
                rw.value(node, callable_ if callable_ is not None else self_)
            k += 2
            continue
        if name is not None:
            rw.value(r.node_of(origin), name)
        k += 1


def _statement_resume(r: _Resume, rw, target: int, slots: list[tuple[str | None, Origin]]):
    """The interrupted statement rewritten from ``target`` on, and the statement it stands at."""
    # instructions that change nothing the source shows: the value an expression statement
    # drops, a jump over the other branch of a conditional expression
    while True:
        ins = r.instrs[target]
        if ins.name in _SKIP:
            target = r.label_at[ins.arg] if isinstance(ins.arg, Label) else target + 1
        elif ins.name == "POP_TOP" and slots:
            slots = slots[:-1]
            target += 1
        else:
            break
    _classify(r, rw, slots)
    ins = r.instrs[target]
    anchor = r.span(target)
    following = r.instrs[target + 1] if target + 1 < len(r.instrs) else None
    implicit_return = (ins.name == "RETURN_CONST" and ins.arg is None) or (
        ins.name == "LOAD_CONST" and ins.arg is None and following is not None and following.name == "RETURN_VALUE")
    if anchor is None and ins.name == "RETURN_VALUE" and isinstance(r.src.node, ast.Lambda):
        anchor = span_of(r.src.node.body)  # a lambda's return: the value of its body
    if anchor is None:
        if implicit_return and not rw.values:
            return [ast.Return(value=None)], None
        raise NotExact(f"the resume target {ins.name} has no source position")
    stmt = r.src.innermost(anchor, ast.stmt)
    if implicit_return and not rw.values and not rw.exits:
        return [ast.Return(value=None)], None  # the end of the function (or ``return None``)
    if stmt is None:
        if isinstance(r.src.node, ast.Lambda):
            stmt = rw.lambda_return()
        else:
            raise NotExact(f"no statement of the source holds the resume target at line {anchor[0]}")
    if isinstance(stmt, ast.With) and rw.exits_of(stmt) is not None \
            and len(rw.exits_of(stmt)) == len(stmt.items) and not rw.values:
        return [], ("exit", stmt)  # the end of the with body: its exit runs next
    if isinstance(stmt, ast.Assert) and ins.name == "LOAD_ASSERTION_ERROR":
        return rw.assert_fails(stmt), stmt
    return rw.statement(stmt, anchor), stmt


def _handler_resume(r: _Resume, rw, target: int):
    """A resume at a try statement's handler, the exception the last stack value."""
    layout = r.layout
    label = next((item for k, item in enumerate(layout.items) if isinstance(item, Label)
                  and _item_index(layout.items, target) == k + 1), None)
    handler = next((i.handler for i in r.instrs if i.handler is not None and i.handler.target is label), None)
    if handler is None:
        raise NotExact("no instruction is covered by the handler the resume function starts at")
    expected = handler.depth + handler.lasti + 1
    if len(layout.slots) != expected or layout.slots[-1] is None:
        raise NotExact("the stack at the handler is not the one its exception table entry says")
    covered = next((k for k, i in enumerate(r.instrs) if i.handler is handler and r.states[k] is not None), None)
    if covered is None:
        raise NotExact("no path from the function's entry reaches the try block of the handler")
    below = list(zip(layout.slots[:handler.depth], r.states[covered][:handler.depth], strict=True))
    _classify(r, rw, below)
    if rw.values:
        raise NotExact("values other than with blocks' exits are on the stack at the handler")
    where = next((s for s in (r.span(k) for k in range(target + 1, len(r.instrs))) if s is not None), None)
    if where is None:
        raise NotExact("the handler's code has no source position")
    stmts, at = rw.handler_entry(where, layout.slots[-1])
    return stmts, at, below
