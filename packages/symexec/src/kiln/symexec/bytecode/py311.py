"""CPython 3.11 bytecode facts (see ``_table`` for the schema).

3.11 is the first version with inline CACHE entries, the location table and the exception
table. Its jumps are all relative and carry their direction in the opcode
(POP_JUMP_FORWARD_IF_* / POP_JUMP_BACKWARD_IF_*); decoding names both directions with the
neutral POP_JUMP_IF_* and the assembler picks the direction from the label's position.
Calls are PRECALL + CALL, with KW_NAMES before them; LOAD_METHOD is its own opcode and
LOAD_ATTR has no method flag. COMPARE_OP's oparg is the index into ``cmp_op``.
"""

from __future__ import annotations

import dis
import opcode

from ._table import ArgKind, VersionTable, complete_kinds, real_opmap, stack_effect_with

__all__ = ["TABLE"]

_CONDITIONS = ("FALSE", "TRUE", "NONE", "NOT_NONE")


def _encode_compare(op: str, to_bool: bool) -> int:
    if to_bool:
        raise ValueError("COMPARE_OP has no bool-coercion flag on CPython 3.11")
    return opcode.cmp_op.index(op)


def _decode_compare(oparg: int) -> tuple[str, bool]:
    return opcode.cmp_op[oparg], False


def _build() -> VersionTable:
    opmap = real_opmap(opcode.opmap)
    families: dict[str, tuple[str | None, str | None]] = {
        f"POP_JUMP_IF_{c}": (f"POP_JUMP_FORWARD_IF_{c}", f"POP_JUMP_BACKWARD_IF_{c}")
        for c in _CONDITIONS
    }
    families["JUMP"] = ("JUMP_FORWARD", "JUMP_BACKWARD")
    families["JUMP_NO_INTERRUPT"] = ("JUMP_FORWARD", "JUMP_BACKWARD_NO_INTERRUPT")
    neutral = {f"POP_JUMP_{d}_IF_{c}": f"POP_JUMP_IF_{c}" for c in _CONDITIONS for d in ("FORWARD", "BACKWARD")}
    directions = {name: -1 if "BACKWARD" in name else 1 for name in (opcode.opname[o] for o in dis.hasjrel)}
    arg_opcodes = frozenset(op for op in opmap.values() if op >= opcode.HAVE_ARGUMENT)
    kinds = complete_kinds(
        opmap,
        arg_opcodes,
        families,
        {
            ArgKind.CONST: ("LOAD_CONST", "KW_NAMES"),
            ArgKind.NAME: ("STORE_NAME", "DELETE_NAME", "STORE_ATTR", "DELETE_ATTR", "STORE_GLOBAL",
                           "DELETE_GLOBAL", "LOAD_NAME", "IMPORT_NAME", "IMPORT_FROM", "LOAD_METHOD"),
            ArgKind.GLOBAL: ("LOAD_GLOBAL",),
            ArgKind.ATTR: ("LOAD_ATTR",),
            ArgKind.LOCAL: ("LOAD_FAST", "STORE_FAST", "DELETE_FAST", "MAKE_CELL", "LOAD_CLOSURE",
                            "LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "LOAD_CLASSDEREF"),
            ArgKind.JUMP: tuple(directions),
            ArgKind.COMPARE: ("COMPARE_OP",),
            ArgKind.BINARY_OP: ("BINARY_OP",),
            ArgKind.BOOL: ("IS_OP", "CONTAINS_OP"),
        },
    )
    caches = {opcode.opname[op]: n for op, n in enumerate(opcode._inline_cache_entries) if n}
    return VersionTable(
        version=(3, 11),
        opmap=opmap,
        opname=tuple(opcode.opname[:256]),
        arg_opcodes=arg_opcodes,
        cache_entries=caches,
        arg_kinds=kinds,
        jump_directions=directions,
        jump_families=families,
        neutral_names=neutral,
        no_fallthrough=frozenset(
            ("RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
             "JUMP_BACKWARD_NO_INTERRUPT")
        ),
        compare_ops=tuple(opcode.cmp_op),
        binary_ops=tuple(symbol for _, symbol in dis._nb_ops),
        encode_compare=_encode_compare,
        decode_compare=_decode_compare,
        name_flag_bits={"LOAD_GLOBAL": 1, "LOAD_ATTR": 0},
        stack_effect=stack_effect_with({"RETURN_GENERATOR": 1}, tuple(opcode.opname[:256])),
        linetable_merges_runs=False,
        null_after_callable=False,
        jump_if_needs_bool=False,
        extended_arg=opcode.EXTENDED_ARG,
        cache=opmap["CACHE"],
    )


TABLE = _build()
