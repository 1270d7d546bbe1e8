"""CPython 3.12 bytecode facts (see ``_table`` for the schema).

Differences from 3.11 that live here: no PRECALL (CALL alone, KW_NAMES before it); LOAD_ATTR
carries the method flag in its low bit (LOAD_METHOD is gone) and LOAD_SUPER_ATTR carries
method and two-argument flags in its two low bits; RETURN_CONST, LOAD_FAST_AND_CLEAR,
LOAD_FAST_CHECK, END_FOR and LOAD_FROM_DICT_OR_* exist; POP_JUMP_IF_* jump forward only
(a backward conditional jump cannot be encoded); COMPARE_OP's oparg is
``(cmp_op index << 4) | mask`` where the mask is the set of orderings that make it true.
FOR_ITER's target is its END_FOR (the interpreter skips over it when exhausted).
"""

from __future__ import annotations

import dis
import opcode

from ._table import ArgKind, VersionTable, complete_kinds, real_opmap, stack_effect_with

__all__ = ["TABLE"]

_CONDITIONS = ("FALSE", "TRUE", "NONE", "NOT_NONE")
# Orderings: 1 unordered, 2 less than, 4 greater than, 8 equal (CPython's compare masks).
COMPARE_MASKS = {"<": 2, "<=": 2 | 8, "==": 8, "!=": 1 | 2 | 4, ">": 4, ">=": 4 | 8}


def _encode_compare(op: str, to_bool: bool) -> int:
    if to_bool:
        raise ValueError("COMPARE_OP has no bool-coercion flag on CPython 3.12")
    return (opcode.cmp_op.index(op) << 4) | COMPARE_MASKS[op]


def _decode_compare(oparg: int) -> tuple[str, bool]:
    return opcode.cmp_op[oparg >> 4], False


def _build() -> VersionTable:
    opmap = real_opmap(opcode.opmap)
    families: dict[str, tuple[str | None, str | None]] = {
        f"POP_JUMP_IF_{c}": (f"POP_JUMP_IF_{c}", None) for c in _CONDITIONS
    }
    families["JUMP"] = ("JUMP_FORWARD", "JUMP_BACKWARD")
    families["JUMP_NO_INTERRUPT"] = ("JUMP_FORWARD", "JUMP_BACKWARD_NO_INTERRUPT")
    directions = {
        name: -1 if "BACKWARD" in name else 1
        for name in (opcode.opname[o] for o in dis.hasjrel)
        if name in opmap
    }
    arg_opcodes = frozenset(op for op in opmap.values() if op >= opcode.HAVE_ARGUMENT)
    kinds = complete_kinds(
        opmap,
        arg_opcodes,
        families,
        {
            ArgKind.CONST: ("LOAD_CONST", "RETURN_CONST", "KW_NAMES"),
            ArgKind.NAME: ("STORE_NAME", "DELETE_NAME", "STORE_ATTR", "DELETE_ATTR", "STORE_GLOBAL",
                           "DELETE_GLOBAL", "LOAD_NAME", "IMPORT_NAME", "IMPORT_FROM",
                           "LOAD_FROM_DICT_OR_GLOBALS"),
            ArgKind.GLOBAL: ("LOAD_GLOBAL",),
            ArgKind.ATTR: ("LOAD_ATTR",),
            ArgKind.SUPER_ATTR: ("LOAD_SUPER_ATTR",),
            ArgKind.LOCAL: ("LOAD_FAST", "STORE_FAST", "DELETE_FAST", "LOAD_FAST_CHECK",
                            "LOAD_FAST_AND_CLEAR", "MAKE_CELL", "LOAD_CLOSURE", "LOAD_DEREF",
                            "STORE_DEREF", "DELETE_DEREF", "LOAD_FROM_DICT_OR_DEREF"),
            ArgKind.JUMP: tuple(directions),
            ArgKind.COMPARE: ("COMPARE_OP",),
            ArgKind.BINARY_OP: ("BINARY_OP",),
            ArgKind.BOOL: ("IS_OP", "CONTAINS_OP"),
        },
    )
    caches = {opcode.opname[op]: n for op, n in enumerate(opcode._inline_cache_entries) if n}
    return VersionTable(
        version=(3, 12),
        opmap=opmap,
        opname=tuple(opcode.opname[:256]),
        arg_opcodes=arg_opcodes,
        cache_entries=caches,
        arg_kinds=kinds,
        jump_directions=directions,
        jump_families=families,
        neutral_names={},
        no_fallthrough=frozenset(
            ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD",
             "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
        ),
        compare_ops=tuple(opcode.cmp_op),
        binary_ops=tuple(symbol for _, symbol in dis._nb_ops),
        encode_compare=_encode_compare,
        decode_compare=_decode_compare,
        name_flag_bits={"LOAD_GLOBAL": 1, "LOAD_ATTR": 1, "LOAD_SUPER_ATTR": 2},
        stack_effect=stack_effect_with({"RETURN_GENERATOR": 1}, tuple(opcode.opname[:256])),
        linetable_merges_runs=True,
        null_after_callable=False,
        jump_if_needs_bool=False,
        extended_arg=opcode.EXTENDED_ARG,
        cache=opmap["CACHE"],
    )


TABLE = _build()
