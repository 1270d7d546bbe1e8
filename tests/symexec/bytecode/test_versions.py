"""The per-version tables: selected for the running interpreter, consistent with dis."""

from __future__ import annotations

import dis
import opcode
import sys

from kiln.symexec.bytecode import SUPPORTED_VERSIONS, TABLE, ArgKind


def test_the_running_version_is_selected():
    assert TABLE.version == sys.version_info[:2]
    assert TABLE.version in SUPPORTED_VERSIONS


def test_only_opcodes_of_co_code_are_known():
    assert not any(n.startswith("INSTRUMENTED_") for n in TABLE.opmap)
    assert "CACHE" in TABLE.opmap and "EXTENDED_ARG" in TABLE.opmap and "ENTER_EXECUTOR" not in TABLE.opmap


def test_every_real_opcode_has_a_kind():
    for name, op in TABLE.opmap.items():
        assert op < 256 and TABLE.opname[op] == name
        kind = TABLE.arg_kind(name)
        assert (kind is ArgKind.NONE) == (not TABLE.has_arg(op)), name


def test_kinds_agree_with_dis_lists():
    def names(ops):
        return {opcode.opname[o] for o in ops} & set(TABLE.opmap)

    assert {n for n, k in TABLE.arg_kinds.items() if k is ArgKind.CONST} == names(dis.hasconst)
    jumps = {n for n in TABLE.opmap if TABLE.arg_kind(n) is ArgKind.JUMP}
    assert jumps == names(dis.hasjrel) | names(dis.hasjabs)
    assert set(TABLE.jump_directions) == jumps
    name_like = (ArgKind.NAME, ArgKind.GLOBAL, ArgKind.ATTR, ArgKind.SUPER_ATTR)
    assert {n for n in TABLE.opmap if TABLE.arg_kind(n) in name_like} == names(dis.hasname)
    local_like = (ArgKind.LOCAL, ArgKind.LOCAL_PAIR)
    assert {n for n in TABLE.opmap if TABLE.arg_kind(n) in local_like} == names(dis.haslocal) | names(dis.hasfree)


def test_version_differences_live_in_the_table():
    has = TABLE.opmap.__contains__
    assert has("PRECALL") == (TABLE.version == (3, 11))
    assert has("KW_NAMES") == (TABLE.version in ((3, 11), (3, 12)))
    assert has("RETURN_CONST") == (TABLE.version >= (3, 12))
    assert has("LOAD_FAST_AND_CLEAR") == (TABLE.version >= (3, 12))
    assert has("POP_JUMP_FORWARD_IF_TRUE") == (TABLE.version == (3, 11))
    assert (TABLE.jump_families["POP_JUMP_IF_TRUE"][1] is None) == (TABLE.version >= (3, 12))
    assert TABLE.null_after_callable == (TABLE.version >= (3, 13))
    assert TABLE.jump_if_needs_bool == (TABLE.version >= (3, 13))
    assert TABLE.linetable_merges_runs == (TABLE.version >= (3, 12))
    assert TABLE.name_flag_bits["LOAD_ATTR"] == (0 if TABLE.version == (3, 11) else 1)


def test_cache_counts_match_the_interpreter():
    entries = opcode._inline_cache_entries
    for name, op in TABLE.opmap.items():
        expected = entries.get(name, 0) if isinstance(entries, dict) else entries[op]
        assert TABLE.caches(name) == expected, name


def test_binary_and_compare_operators():
    assert TABLE.binary_ops[0] == "+" and "+=" in TABLE.binary_ops and len(set(TABLE.binary_ops)) == len(TABLE.binary_ops)
    assert TABLE.compare_ops == ("<", "<=", "==", "!=", ">", ">=")
