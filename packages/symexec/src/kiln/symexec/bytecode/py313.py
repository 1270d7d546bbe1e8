"""CPython 3.13 bytecode facts (see ``_table`` for the schema).

Differences from 3.12 that live here: opcodes are renumbered and ``opcode.hasarg`` (not
HAVE_ARGUMENT) says which take an argument; the inline-cache table is keyed by name; KW_NAMES
is gone (CALL_KW takes the names tuple from the stack); LOAD_CLOSURE is a pseudo-instruction
(closures load cells with LOAD_FAST); LOAD_FAST_LOAD_FAST, STORE_FAST_LOAD_FAST and
STORE_FAST_STORE_FAST pack two local indices in 4-bit halves; JUMP_BACKWARD and POP_JUMP_IF_*
have a cache entry; COMPARE_OP's oparg is ``(cmp_op index << 5) | to_bool << 4 | mask``.
"""

from __future__ import annotations

import dis
import opcode

from ._table import ArgKind, VersionTable, complete_kinds, real_opmap

__all__ = ["TABLE"]

_CONDITIONS = ("FALSE", "TRUE", "NONE", "NOT_NONE")
COMPARE_MASKS = {"<": 2, "<=": 2 | 8, "==": 8, "!=": 1 | 2 | 4, ">": 4, ">=": 4 | 8}


def _encode_compare(op: str, to_bool: bool) -> int:
    return (opcode.cmp_op.index(op) << 5) | (16 if to_bool else 0) | COMPARE_MASKS[op]


def _decode_compare(oparg: int) -> tuple[str, bool]:
    return opcode.cmp_op[oparg >> 5], bool(oparg & 16)


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
    arg_opcodes = frozenset(op for op in opcode.hasarg if op < 256)
    kinds = complete_kinds(
        opmap,
        arg_opcodes,
        families,
        {
            ArgKind.CONST: ("LOAD_CONST", "RETURN_CONST"),
            ArgKind.NAME: ("STORE_NAME", "DELETE_NAME", "STORE_ATTR", "DELETE_ATTR", "STORE_GLOBAL",
                           "DELETE_GLOBAL", "LOAD_NAME", "IMPORT_NAME", "IMPORT_FROM",
                           "LOAD_FROM_DICT_OR_GLOBALS"),
            ArgKind.GLOBAL: ("LOAD_GLOBAL",),
            ArgKind.ATTR: ("LOAD_ATTR",),
            ArgKind.SUPER_ATTR: ("LOAD_SUPER_ATTR",),
            ArgKind.LOCAL: ("LOAD_FAST", "STORE_FAST", "DELETE_FAST", "LOAD_FAST_CHECK",
                            "LOAD_FAST_AND_CLEAR", "MAKE_CELL", "LOAD_DEREF", "STORE_DEREF",
                            "DELETE_DEREF", "LOAD_FROM_DICT_OR_DEREF"),
            ArgKind.LOCAL_PAIR: ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST",
                                 "STORE_FAST_STORE_FAST"),
            ArgKind.JUMP: tuple(directions),
            ArgKind.COMPARE: ("COMPARE_OP",),
            ArgKind.BINARY_OP: ("BINARY_OP",),
            ArgKind.BOOL: ("IS_OP", "CONTAINS_OP"),
        },
    )
    caches = {name: n for name, n in opcode._inline_cache_entries.items() if n and name in opmap}
    return VersionTable(
        version=(3, 13),
        opmap=opmap,
        opname=tuple(dis.opname[:256]),
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
        stack_effect=dis.stack_effect,
        linetable_merges_runs=True,
        null_after_callable=True,
        jump_if_needs_bool=True,
        extended_arg=opcode.EXTENDED_ARG,
        cache=opmap["CACHE"],
    )


TABLE = _build()
