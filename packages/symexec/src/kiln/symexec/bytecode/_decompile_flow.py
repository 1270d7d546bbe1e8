"""Where each value on the stack came from: the decompiler's stack-origin dataflow.

For every instruction of a function body, the value stack before it, each slot described by
its *origin*: the indices of the instructions that may have pushed that value (one for a
plain expression, several where paths merge, as after ``a or b`` or ``x if c else y``).
``OPAQUE`` marks a slot whose producer is not modelled. Only normal control flow is
followed (exception edges are not), and copies (``COPY``/``SWAP``) keep their origin.

How many values an instruction pops and pushes is written here for the instructions that
appear inside statements; the count of a ``CALL`` and friends is the same on CPython
3.11-3.13, and an opcode that exists in one version only is simply never met in another.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._instr import Instr, Label, label_positions
from .versions import TABLE

__all__ = ["OPAQUE", "SECOND", "Origin", "stack_origins"]

Origin = frozenset[int]
OPAQUE: Origin = frozenset({-1})
# added to the index of an instruction that pushes two values of different expressions
# (3.13's LOAD_FAST_LOAD_FAST) for the origin of the second
SECOND = 1 << 40

_LOADS = frozenset((
    "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_CONST", "LOAD_DEREF", "LOAD_NAME",
    "LOAD_CLOSURE", "LOAD_ASSERTION_ERROR", "LOAD_BUILD_CLASS", "PUSH_NULL", "LOAD_LOCALS",
))
_NOTHING = frozenset((
    "NOP", "RESUME", "PRECALL", "KW_NAMES", "EXTENDED_ARG", "CACHE", "COPY_FREE_VARS", "MAKE_CELL",
    "JUMP", "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_NO_INTERRUPT", "JUMP_BACKWARD_NO_INTERRUPT",
    "DELETE_FAST", "DELETE_GLOBAL", "DELETE_NAME", "DELETE_DEREF", "RETURN_CONST",
))
_ONE_TO_ONE = frozenset((
    "UNARY_NEGATIVE", "UNARY_NOT", "UNARY_INVERT", "UNARY_POSITIVE", "TO_BOOL", "GET_ITER",
    "LIST_TO_TUPLE", "FORMAT_SIMPLE", "CONVERT_VALUE", "CALL_INTRINSIC_1", "GET_YIELD_FROM_ITER",
))
_TWO_TO_ONE = frozenset((
    "BINARY_OP", "COMPARE_OP", "IS_OP", "CONTAINS_OP", "BINARY_SUBSCR", "FORMAT_WITH_SPEC",
    "CALL_INTRINSIC_2",
))
_BUILDS = frozenset(("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_STRING", "BUILD_SLICE"))
# pop the top into a container that stays below it
_INTO = frozenset(("LIST_APPEND", "SET_ADD", "LIST_EXTEND", "SET_UPDATE", "DICT_UPDATE", "DICT_MERGE"))
_STORES = {"STORE_FAST": 1, "STORE_NAME": 1, "STORE_GLOBAL": 1, "STORE_DEREF": 1, "STORE_ATTR": 2,
           "STORE_SUBSCR": 3, "DELETE_SUBSCR": 2, "DELETE_ATTR": 1, "STORE_SLICE": 4, "POP_TOP": 1,
           "RETURN_VALUE": 1, "STORE_FAST_STORE_FAST": 2, "MAP_ADD": 2}
_COND_JUMPS = frozenset(("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE"))
_KEEP_IF_JUMP = frozenset(("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"))


def _effect(ins: Instr) -> tuple[int, int] | None:
    """(values popped, values pushed) on the fall-through path; None if not modelled."""
    name, arg = ins.name, ins.arg
    if name in _LOADS:
        return 0, 1
    if name in _NOTHING:
        return 0, 0
    if name in _ONE_TO_ONE:
        return 1, 1
    if name in _TWO_TO_ONE:
        return 2, 1
    if name in _BUILDS:
        return arg, 1
    if name in _INTO:
        return 1, 0
    if name in _STORES:
        return _STORES[name], 0
    if name in _COND_JUMPS or name in _KEEP_IF_JUMP:
        return 1, 0
    effects = {
        "LOAD_GLOBAL": lambda: (0, 1 + arg.push_null),
        "LOAD_ATTR": lambda: (1, 1 + arg.method),
        "LOAD_METHOD": lambda: (1, 2),
        "LOAD_SUPER_ATTR": lambda: (3, 1 + arg.method),
        "LOAD_FAST_LOAD_FAST": lambda: (0, 2),
        "STORE_FAST_LOAD_FAST": lambda: (1, 1),
        "BINARY_SLICE": lambda: (3, 1),
        "CALL": lambda: (arg + 2, 1),
        "CALL_KW": lambda: (arg + 3, 1),
        "CALL_FUNCTION_EX": lambda: (3 + (arg & 1), 1),
        "BUILD_MAP": lambda: (2 * arg, 1),
        "BUILD_CONST_KEY_MAP": lambda: (arg + 1, 1),
        "FORMAT_VALUE": lambda: (2 if arg & 4 else 1, 1),
        "UNPACK_SEQUENCE": lambda: (1, arg),
        "UNPACK_EX": lambda: (1, (arg & 0xFF) + (arg >> 8) + 1),
        "BEFORE_WITH": lambda: (1, 2),
        "SET_FUNCTION_ATTRIBUTE": lambda: (2, 1),
        "IMPORT_NAME": lambda: (2, 1),
        "RAISE_VARARGS": lambda: (arg, 0),
    }
    if name in effects:
        return effects[name]()
    if name == "MAKE_FUNCTION":  # 3.11/3.12: the flags say which extras are below the code
        extras = bin(arg & 0xF).count("1") if TABLE.version < (3, 13) else 0
        return 1 + extras, 1
    return None


def _step(ins: Instr, index: int, state: tuple[Origin, ...], jumping: bool) -> tuple[Origin, ...] | None:
    """The stack after ``ins`` (on its jump when ``jumping``), or None when not modelled."""
    name = ins.name
    if name == "COPY":
        return (*state, state[-ins.arg]) if len(state) >= ins.arg else None
    if name == "SWAP":
        if len(state) < ins.arg:
            return None
        out = list(state)
        out[-1], out[-ins.arg] = out[-ins.arg], out[-1]
        return tuple(out)
    if name == "LOAD_FAST_LOAD_FAST":
        return (*state, frozenset({index}), frozenset({index + SECOND}))
    if name == "IMPORT_FROM":
        return (*state, frozenset({index}))
    if jumping and name in _KEEP_IF_JUMP:
        return state
    effect = _effect(ins)
    if effect is None:
        return None
    pops, pushes = effect
    if pops > len(state):
        return None
    kept = state[:len(state) - pops]
    return kept + tuple(frozenset({index}) for _ in range(pushes))


def stack_origins(items: Sequence[Instr | Label], start: int,
                  depths: Sequence[int | None]) -> list[tuple[Origin, ...] | None]:
    """Per instruction of ``items`` (labels not counted): the stack before it as origins,
    following normal control flow from instruction ``start`` (an index among instructions)
    with an empty stack. ``depths`` are the assembler's stack depths: where the model loses
    track, the slots become ``OPAQUE`` at the depth they say. None: not reached."""
    instrs = [i for i in items if isinstance(i, Instr)]
    label_at = label_positions(items)
    states: list[tuple[Origin, ...] | None] = [None] * len(instrs)
    todo = [start]
    states[start] = ()

    def merge(at: int, state: tuple[Origin, ...] | None) -> None:
        if at >= len(instrs):
            return
        if state is None:
            depth = depths[at]
            state = (OPAQUE,) * depth if depth is not None else None
            if state is None:
                return
        old = states[at]
        if old is None:
            states[at] = state
        elif old != state:
            if len(old) != len(state):
                merged = (OPAQUE,) * len(old)
            else:
                merged = tuple(a | b for a, b in zip(old, state, strict=True))
            if merged == old:
                return
            states[at] = merged
        else:
            return
        todo.append(at)

    while todo:
        k = todo.pop()
        ins, state = instrs[k], states[k]
        assert state is not None
        if isinstance(ins.arg, Label):
            merge(label_at[ins.arg], _step(ins, k, state, jumping=True))
        if ins.name not in TABLE.no_fallthrough and ins.name not in ("JUMP", "JUMP_NO_INTERRUPT"):
            merge(k + 1, _step(ins, k, state, jumping=False))
    return states
