"""Opcode rules: one function per instruction name, registered in ``opcode_rules``.

Rules see version-neutral instructions (``kiln.symexec.bytecode``: jump targets are labels,
LOAD_GLOBAL/LOAD_ATTR flags are explicit, 3.11's directional jumps are normalized), so the
same rule serves 3.11 and 3.12. Where the two versions differ in what an instruction *does*
(PRECALL exists only on 3.11, RETURN_CONST only on 3.12, ...) each name simply has its own
rule. Imports are in ``_opcodes_imports``; with blocks, raise and try/except in
``_opcodes_exceptions`` (both registered when this module is imported).
"""

from __future__ import annotations

import dis
import operator
from collections.abc import Callable
from typing import Any

from ._translator import NULL, CellVariable, LazyVariable, Translator, opcode_rules
from ._unsupported import Unsupported
from .bytecode import Instr
from .variables._base import VariableTracker
from .variables._builtins import builtin_rules
from .variables._constant import ConstantVariable
from .variables._containers import DictVariable, IteratorVariable, ListVariable, TupleVariable
from .variables._functions import NestedFunctionVariable
from .variables._iterators import GeneratorVariable
from .variables._symnumber import SymNumberVariable, SymSliceVariable
from .variables._wrap import wrap_trace_value

__all__ = ["opcode_rules"]


def rule(*names: str) -> Callable[[Callable[[Translator, Instr], None]], Callable[[Translator, Instr], None]]:
    def register(fn):
        for name in names:
            opcode_rules[name] = fn
        return fn

    return register


def _builtin(tx: Translator, fn: Any, *args: VariableTracker) -> VariableTracker:
    return builtin_rules[fn](tx, list(args), {})


# -- no-ops and stack shuffling ----------------------------------------------------------------

@rule("NOP", "RESUME", "PRECALL", "EXTENDED_ARG", "CACHE", "COPY_FREE_VARS")
def _nop(tx, instr):
    pass


@rule("PUSH_NULL")
def _push_null(tx, instr):
    tx.push(NULL)


@rule("POP_TOP")
def _pop_top(tx, instr):
    tx.pop()


@rule("END_FOR")
def _end_for(tx, instr):
    tx.popn(2)


@rule("COPY")
def _copy(tx, instr):
    tx.push(tx.stack[-instr.arg])


@rule("SWAP")
def _swap(tx, instr):
    s = tx.stack
    s[-1], s[-instr.arg] = s[-instr.arg], s[-1]


# -- loads and stores --------------------------------------------------------------------------

@rule("LOAD_CONST")
def _load_const(tx, instr):
    tx.push(wrap_trace_value(instr.arg))


@rule("RETURN_CONST")
def _return_const(tx, instr):
    tx.do_return(wrap_trace_value(instr.arg))


@rule("RETURN_VALUE")
def _return_value(tx, instr):
    tx.do_return(tx.pop())


@rule("LOAD_FAST", "LOAD_FAST_CHECK")
def _load_fast(tx, instr):
    try:
        value = tx.locals[instr.arg]
    except KeyError:
        raise Unsupported(f"local variable {instr.arg!r} is read before it is assigned") from None
    if isinstance(value, LazyVariable):
        value = tx.locals[instr.arg] = value.realize(tx)
    tx.push(value)


@rule("LOAD_FAST_AND_CLEAR")
def _load_fast_and_clear(tx, instr):
    # 3.12 inlined comprehensions save the outer variable of the same name this way.
    tx.push(tx.locals.pop(instr.arg, NULL))


@rule("STORE_FAST")
def _store_fast(tx, instr):
    value = tx.pop()
    if value is NULL:
        tx.locals.pop(instr.arg, None)
    else:
        tx.locals[instr.arg] = value


@rule("DELETE_FAST")
def _delete_fast(tx, instr):
    tx.locals.pop(instr.arg, None)


@rule("LOAD_GLOBAL")
def _load_global(tx, instr):
    if instr.arg.push_null:
        tx.push(NULL)
    tx.push(tx.load_global(instr.arg.name))


@rule("STORE_GLOBAL")
def _store_global(tx, instr):
    if tx.f_globals is not tx.root().f_globals:
        raise Unsupported(f"assigning the global {instr.arg!r} of another module")
    tx.output.store_global(instr.arg, tx.pop())


@rule("MAKE_CELL")
def _make_cell(tx, instr):
    name = instr.arg
    if name not in tx.cells:
        tx.cells[name] = CellVariable(tx.locals.pop(name, None), made=True)


@rule("LOAD_CLOSURE")
def _load_closure(tx, instr):
    tx.push(tx.cells[instr.arg])


@rule("LOAD_DEREF")
def _load_deref(tx, instr):
    cell = tx.cells.get(instr.arg)
    if cell is None or cell.contents is None:
        raise Unsupported(f"free variable {instr.arg!r} is read before it is assigned")
    if isinstance(cell.contents, LazyVariable):
        cell.contents = cell.contents.realize(tx)
    tx.push(cell.contents)


@rule("STORE_DEREF")
def _store_deref(tx, instr):
    cell = tx.cells.setdefault(instr.arg, CellVariable(made=True))
    if not cell.made:  # a real cell outside the trace: the write would be lost
        raise Unsupported(f"assigning the enclosing function's variable {instr.arg!r} (nonlocal)")
    cell.contents = tx.pop()


@rule("LOAD_ATTR")
def _load_attr(tx, instr):
    obj = tx.pop()
    if instr.arg.method:
        # 3.12's method load (3.11's LOAD_METHOD): the call goes to call_method.
        tx.push(NULL)
        tx.push(MethodOf(obj, instr.arg.name))
        return
    tx.push(obj.get_attr(tx, instr.arg.name))


@rule("LOAD_METHOD")
def _load_method(tx, instr):
    obj = tx.pop()
    tx.push(NULL)
    tx.push(MethodOf(obj, instr.arg))


class MethodOf(VariableTracker):
    """``obj.name`` about to be called: kept unresolved so the call goes to call_method."""

    __slots__ = ("name", "obj")

    def __init__(self, obj: VariableTracker, name: str) -> None:
        super().__init__(None)
        self.obj = obj
        self.name = name

    def describe(self) -> str:
        return f"method {self.name} of {self.obj.describe()}"

    def call(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)

    def get_attr(self, tx, name):
        return self.obj.get_attr(tx, self.name).get_attr(tx, name)


@rule("LOAD_SUPER_ATTR")
def _load_super_attr(tx, instr):
    # 3.12: super-global, class, self on the stack; the argument says whether a method is
    # loaded and whether super was called with two arguments.
    from .variables._objects import SuperVariable

    obj = tx.realize(tx.pop())
    cls = tx.realize(tx.pop())
    tx.pop()  # the global ``super``
    sup = SuperVariable(cls.as_constant(), obj)
    if instr.arg.method:
        tx.push(NULL)
        tx.push(MethodOf(sup, instr.arg.name))
    else:
        tx.push(sup.get_attr(tx, instr.arg.name))


@rule("STORE_ATTR")
def _store_attr(tx, instr):
    obj = tx.pop()
    value = tx.pop()
    obj.store_attr(tx, instr.arg, value)


@rule("DELETE_ATTR")
def _delete_attr(tx, instr):
    _builtin(tx, delattr, tx.pop(), ConstantVariable(instr.arg))


# -- operators ---------------------------------------------------------------------------------

_BINARY_OPS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
    ">>": operator.rshift,
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift,
    ">>=": operator.irshift,
}
_COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
                ">": operator.gt, ">=": operator.ge}


@rule("BINARY_OP")
def _binary_op(tx, instr):
    b = tx.pop()
    a = tx.pop()
    tx.push(_builtin(tx, _BINARY_OPS[instr.arg], a, b))


@rule("COMPARE_OP")
def _compare_op(tx, instr):
    b = tx.pop()
    a = tx.pop()
    tx.push(_builtin(tx, _COMPARE_OPS[instr.arg.op], a, b))


@rule("IS_OP")
def _is_op(tx, instr):
    b = tx.pop()
    a = tx.pop()
    tx.push(_builtin(tx, operator.is_not if instr.arg else operator.is_, a, b))


@rule("CONTAINS_OP")
def _contains_op(tx, instr):
    container = tx.pop()
    item = tx.pop()
    found = _builtin(tx, operator.contains, container, item)
    tx.push(ConstantVariable(not found.as_constant()) if instr.arg else found)


@rule("UNARY_NEGATIVE")
def _neg(tx, instr):
    tx.push(_builtin(tx, operator.neg, tx.pop()))


@rule("UNARY_POSITIVE")
def _pos(tx, instr):
    tx.push(_builtin(tx, operator.pos, tx.pop()))


@rule("UNARY_INVERT")
def _invert(tx, instr):
    tx.push(_builtin(tx, operator.invert, tx.pop()))


@rule("UNARY_NOT")
def _not(tx, instr):
    tx.push(ConstantVariable(not tx.pop().truth(tx)))


@rule("BINARY_SUBSCR")
def _binary_subscr(tx, instr):
    key = tx.pop()
    obj = tx.pop()
    tx.push(_builtin(tx, operator.getitem, obj, key))


@rule("STORE_SUBSCR")
def _store_subscr(tx, instr):
    key = tx.pop()
    obj = tx.pop()
    value = tx.pop()
    _builtin(tx, operator.setitem, obj, key, value)


@rule("DELETE_SUBSCR")
def _delete_subscr(tx, instr):
    key = tx.pop()
    obj = tx.pop()
    _builtin(tx, operator.delitem, obj, key)


def _slice_of(start: VariableTracker, stop: VariableTracker, step: VariableTracker | None = None) -> VariableTracker:
    parts = [start, stop] + ([step] if step is not None else [])
    if not all(p.is_constant() for p in parts):
        raise Unsupported("a slice with bounds unknown at trace time")
    if any(isinstance(p, SymNumberVariable) and p.symbolic for p in parts):
        return SymSliceVariable(parts)  # a size of a dynamic tensor as a bound
    return ConstantVariable(slice(*[p.as_constant() for p in parts]))


@rule("BUILD_SLICE")
def _build_slice(tx, instr):
    parts = tx.popn(instr.arg)
    tx.push(_slice_of(*parts))


@rule("BINARY_SLICE")
def _binary_slice(tx, instr):
    stop = tx.pop()
    start = tx.pop()
    obj = tx.pop()
    tx.push(_builtin(tx, operator.getitem, obj, _slice_of(start, stop)))


@rule("STORE_SLICE")
def _store_slice(tx, instr):
    stop = tx.pop()
    start = tx.pop()
    obj = tx.pop()
    value = tx.pop()
    _builtin(tx, operator.setitem, obj, _slice_of(start, stop), value)


# -- building containers -----------------------------------------------------------------------

@rule("BUILD_TUPLE")
def _build_tuple(tx, instr):
    tx.push(TupleVariable(tx.popn(instr.arg)))


@rule("BUILD_LIST")
def _build_list(tx, instr):
    tx.push(ListVariable(tx.popn(instr.arg)))


@rule("BUILD_MAP")
def _build_map(tx, instr):
    flat = tx.popn(2 * instr.arg)
    items = {}
    for k, v in zip(flat[::2], flat[1::2], strict=True):
        items[_key(k)] = v
    tx.push(DictVariable(items))


def _key(k: VariableTracker) -> Any:
    if not k.is_constant():
        raise Unsupported(f"a dict key that is {k.describe()}")
    return k.as_constant()


@rule("BUILD_CONST_KEY_MAP")
def _build_const_key_map(tx, instr):
    keys = tx.pop().as_constant()
    values = tx.popn(instr.arg)
    tx.push(DictVariable(dict(zip(keys, values, strict=True))))


@rule("BUILD_SET")
def _build_set(tx, instr):
    from .variables._containers import SetVariable

    tx.push(SetVariable(tx.popn(instr.arg)))


@rule("SET_ADD")
def _set_add(tx, instr):
    value = tx.pop()
    tx.stack[-instr.arg].call_method(tx, "add", [value], {})


@rule("SET_UPDATE")
def _set_update(tx, instr):
    other = tx.pop()
    tx.stack[-instr.arg].call_method(tx, "update", [other], {})


@rule("BUILD_STRING")
def _build_string(tx, instr):
    parts = tx.popn(instr.arg)
    tx.push(ConstantVariable("".join(p.as_constant() for p in parts)))


@rule("FORMAT_VALUE")
def _format_value(tx, instr):
    flags = instr.arg
    spec = tx.pop().as_constant() if flags & 0x04 else ""
    value = tx.pop()
    if not value.is_constant() and not spec:
        from .variables._builtins_text import format_object

        value = format_object(tx, value, flags & 0x03)
        if value.is_constant():
            flags &= ~0x03  # the text, its conversion applied
    if not value.is_constant():
        raise Unsupported(f"formatting {value.describe()} into a string")
    v = value.as_constant()
    conv = flags & 0x03
    v = {0: v, 1: str(v), 2: repr(v), 3: ascii(v)}[conv]
    tx.push(ConstantVariable(format(v, spec)))


@rule("LIST_APPEND")
def _list_append(tx, instr):
    value = tx.pop()
    tx.stack[-instr.arg].call_method(tx, "append", [value], {})


@rule("LIST_EXTEND")
def _list_extend(tx, instr):
    value = tx.pop()
    tx.stack[-instr.arg].call_method(tx, "extend", [value], {})


@rule("MAP_ADD")
def _map_add(tx, instr):
    value = tx.pop()
    key = tx.pop()
    tx.stack[-instr.arg].call_method(tx, "__setitem__", [key, value], {})


@rule("DICT_UPDATE", "DICT_MERGE")
def _dict_update(tx, instr):
    from .variables._builtins_mapping import merge_mapping

    other = tx.pop()
    callee = tx.stack[-instr.arg - 2] if instr.name == "DICT_MERGE" else None
    merge_mapping(tx, tx.stack[-instr.arg], other, callee)


@rule("LIST_TO_TUPLE")
def _list_to_tuple(tx, instr):
    tx.push(TupleVariable(tx.pop().iterate(tx)))


_INTRINSICS = {name: i for i, name in enumerate(getattr(dis, "_intrinsic_1_descs", ()))}


@rule("CALL_INTRINSIC_1")
def _call_intrinsic_1(tx, instr):
    if instr.arg == _INTRINSICS.get("INTRINSIC_LIST_TO_TUPLE"):
        _list_to_tuple(tx, instr)
    elif instr.arg == _INTRINSICS.get("INTRINSIC_UNARY_POSITIVE"):
        _pos(tx, instr)
    else:
        raise Unsupported(f"intrinsic {instr.arg} is not supported")


@rule("UNPACK_SEQUENCE")
def _unpack_sequence(tx, instr):
    items = tx.pop().iterate(tx)
    if len(items) != instr.arg:
        raise Unsupported(f"unpacking {len(items)} values into {instr.arg} names")
    for item in reversed(items):
        tx.push(item)


@rule("UNPACK_EX")
def _unpack_ex(tx, instr):
    before, after = instr.arg & 0xFF, instr.arg >> 8
    items = tx.pop().iterate(tx)
    if len(items) < before + after:
        raise Unsupported(f"unpacking {len(items)} values into at least {before + after} names")
    middle = ListVariable(items[before:len(items) - after])
    for item in reversed([*items[:before], middle, *items[len(items) - after:]]):
        tx.push(item)


# -- control flow ------------------------------------------------------------------------------

@rule("JUMP", "JUMP_NO_INTERRUPT", "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
def _jump(tx, instr):
    tx.jump(instr.arg)


def _conditional(test: Callable[[Translator, VariableTracker], bool]):
    def apply(tx, instr):
        if test(tx, tx.pop()):
            tx.jump(instr.arg)

    return apply


def _is_none(tx: Translator, v: VariableTracker) -> bool:
    return _builtin(tx, operator.is_, v, ConstantVariable(None)).as_constant()


opcode_rules["POP_JUMP_IF_TRUE"] = _conditional(lambda tx, v: v.truth(tx))
opcode_rules["POP_JUMP_IF_FALSE"] = _conditional(lambda tx, v: not v.truth(tx))
opcode_rules["POP_JUMP_IF_NONE"] = _conditional(_is_none)
opcode_rules["POP_JUMP_IF_NOT_NONE"] = _conditional(lambda tx, v: not _is_none(tx, v))


@rule("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP")
def _jump_or_pop(tx, instr):
    want = instr.name == "JUMP_IF_TRUE_OR_POP"
    if tx.stack[-1].truth(tx) == want:
        tx.jump(instr.arg)
    else:
        tx.pop()


@rule("GET_ITER")
def _get_iter(tx, instr):
    tx.push(_builtin(tx, iter, tx.pop()))


def _leave_loop(tx, instr, end: str) -> None:
    """An exhausted iterator: jump to the loop's exit, past its ``end`` instruction (3.12+:
    ``END_FOR``/``END_SEND``, whose pops the trace already did)."""
    tx.jump(instr.arg)
    target = tx.instruction_at(instr.arg)
    if target is not None and target.name == end:
        tx.ip += 1


@rule("FOR_ITER")
def _for_iter(tx, instr):
    it = tx.stack[-1]
    if not isinstance(it, IteratorVariable):
        raise Unsupported(f"iterating over {it.describe()}")
    item = it.next_item(tx)
    if item is not None:
        tx.push(item)
        return
    tx.pop()
    _leave_loop(tx, instr, "END_FOR")  # 3.12: an exhausted FOR_ITER skips its END_FOR


# -- calls -------------------------------------------------------------------------------------

@rule("KW_NAMES")
def _kw_names(tx, instr):
    tx.kw_names = tuple(instr.arg)


@rule("CALL")
def _call(tx, instr):
    args = tx.popn(instr.arg)
    callable_ = tx.pop()
    below = tx.pop()
    if below is not NULL:  # (method, self) pair: self is the first argument
        args = [callable_, *args]
        callable_ = below
    kw_names, tx.kw_names = tx.kw_names, ()
    kwargs = {}
    if kw_names:
        kwargs = dict(zip(kw_names, args[-len(kw_names):], strict=True))
        args = args[:-len(kw_names)]
    tx.push(tx.call(callable_, args, kwargs))


@rule("CALL_FUNCTION_EX")
def _call_function_ex(tx, instr):
    kwargs_v = tx.pop() if instr.arg & 1 else None
    args_v = tx.pop()
    fn = tx.pop()
    null = tx.pop()
    if null is not NULL:
        raise Unsupported("CALL_FUNCTION_EX without the NULL below the callable")
    args = args_v.iterate(tx)
    kwargs = {}
    if kwargs_v is not None:
        if not isinstance(kwargs_v, DictVariable):
            raise Unsupported(f"** of {kwargs_v.describe()}")
        kwargs = dict(kwargs_v.items)
    tx.push(tx.call(fn, args, kwargs))


@rule("MAKE_FUNCTION")
def _make_function(tx, instr):
    code = tx.pop().as_constant()
    flags = instr.arg
    closure = tuple(tx.pop().iterate(tx)) if flags & 0x08 else ()
    annotations = tx.pop() if flags & 0x04 else None
    kwdefaults = {}
    if flags & 0x02:
        kw = tx.pop()
        kwdefaults = dict(kw.items) if isinstance(kw, DictVariable) else {
            k: wrap_trace_value(v) for k, v in kw.as_constant().items()}
    defaults = tuple(tx.pop().iterate(tx)) if flags & 0x01 else ()
    tx.push(NestedFunctionVariable(code, code.co_qualname, tx.f_globals, defaults, kwdefaults, closure,
                                   annotations))


# -- generators: traced to completion, their yields collected --------------------------------------

@rule("RETURN_GENERATOR")
def _return_generator(tx, instr):
    if tx.yields is None:
        raise Unsupported("a generator frame can only be traced when it is called")
    tx.push(ConstantVariable(None))  # the value the first next() sends


@rule("YIELD_VALUE")
def _yield_value(tx, instr):
    if tx.yields is None:
        raise Unsupported("yield outside a traced generator")
    tx.yields.append(tx.pop())
    tx.push(ConstantVariable(None))  # what next() sends back


@rule("GET_YIELD_FROM_ITER")
def _get_yield_from_iter(tx, instr):
    v = tx.pop()
    tx.push(v if isinstance(v, IteratorVariable) else _builtin(tx, iter, v))


@rule("SEND")
def _send(tx, instr):
    # ``yield from`` (the loop SEND / YIELD_VALUE / JUMP_BACKWARD_NO_INTERRUPT): what is sent
    # is what a traced yield receives, None; the delegate's next item is yielded, and once it
    # is exhausted its return value replaces it (3.12+: then END_SEND, skipped as FOR_ITER
    # skips END_FOR).
    sent = tx.pop()
    if not (sent.is_constant() and sent.as_constant() is None):
        raise Unsupported("send() of a value into a traced generator")
    it = tx.stack[-1]
    if not isinstance(it, IteratorVariable):
        raise Unsupported(f"yield from {it.describe()}")
    item = it.next_item(tx)
    if item is not None:
        tx.push(item)
        return
    tx.pop()
    tx.push(it.value if isinstance(it, GeneratorVariable) else ConstantVariable(None))
    _leave_loop(tx, instr, "END_SEND")


from . import _opcodes_exceptions, _opcodes_imports  # noqa: E402, F401  (register their rules)
