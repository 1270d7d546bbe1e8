"""The location table codec against CPython's own decoder (co_positions) and itself."""

from __future__ import annotations

import ast
import inspect
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from kiln.symexec.bytecode import (
    TABLE,
    Instr,
    Location,
    decode_linetable,
    encode_linetable,
    make_code,
    walk_code,
)

CODES = [c for m in (json, ast) for c in walk_code(compile(inspect.getsource(m), m.__file__, "exec"))]


def per_unit(entries) -> list:
    out = []
    for _, n, loc in entries:
        pos = (None, None, None, None) if loc is None else (
            loc.lineno, loc.end_lineno, loc.col_offset, loc.end_col_offset)
        out += [pos] * n
    return out


def test_decoding_agrees_with_co_positions():
    for code in CODES:
        entries = decode_linetable(code.co_linetable, code.co_firstlineno)
        assert per_unit(entries) == list(code.co_positions()), code.co_qualname
        assert sum(n for _, n, _ in entries) == len(code.co_code) // 2


def test_entries_are_contiguous_and_at_most_eight_units():
    for code in CODES:
        entries = decode_linetable(code.co_linetable, code.co_firstlineno)
        assert all(1 <= n <= 8 for _, n, _ in entries)
        assert [s for s, _, _ in entries] == [sum(n for _, n, _ in entries[:i]) for i in range(len(entries))]


def test_reencoding_compiler_entries_gives_the_same_bytes():
    for code in CODES:
        entries = decode_linetable(code.co_linetable, code.co_firstlineno)
        runs = [(n, loc) for _, n, loc in entries]
        assert encode_linetable(runs, code.co_firstlineno, merge=False) == code.co_linetable


def test_merge_joins_equal_neighbours_and_splits_long_runs():
    loc = Location(3, 3, 4, 9)
    merged = encode_linetable([(5, loc), (6, loc)], 1, merge=True)
    assert [n for _, n, _ in decode_linetable(merged, 1)] == [8, 3]
    separate = encode_linetable([(5, loc), (6, loc)], 1, merge=False)
    assert [n for _, n, _ in decode_linetable(separate, 1)] == [5, 6]


def test_every_form_is_used_and_decodes_back():
    first = 10
    locs = [
        Location(10, 10, 3, 7),  # short form
        Location(11, 11, 100, 120),  # one-line form (delta 1, wide columns)
        Location(11, 11, 200, 3),  # long form (columns >= 128)
        Location(5, 5, None, None),  # no-column form, negative delta
        None,  # no location
        Location(7, 12, 0, 1),  # long form spanning lines
        Location(7, 9, None, None),  # long form without columns
    ]
    table = encode_linetable([(1, loc) for loc in locs], first, merge=False)
    codes = [(b >> 3) & 15 for b in table if b & 0x80]
    assert codes[:2] == [0, 11] and codes[2] == 14 and 13 in codes and 15 in codes
    assert [loc for _, _, loc in decode_linetable(table, first)] == locs


columns = st.one_of(
    st.tuples(st.none(), st.none()),
    st.tuples(st.integers(0, 300), st.integers(0, 300)),
)


@st.composite
def locations(draw):
    if draw(st.integers(0, 9)) == 0:
        return None
    line = draw(st.integers(1, 5000))
    end = line + draw(st.sampled_from([0, 0, 0, 1, 40]))
    col, end_col = draw(columns)
    return Location(line, end, col, end_col)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4000), st.lists(st.tuples(st.integers(1, 20), locations()), max_size=30),
       st.booleans())
def test_encode_then_decode_keeps_every_unit_location(first, runs, merge):
    table = encode_linetable(runs, first, merge=merge)
    expected = per_unit([(0, n, loc) for n, loc in runs])
    assert per_unit(decode_linetable(table, first)) == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(locations(), min_size=1, max_size=25))
def test_cpython_reads_our_tables(locs):
    body = [Instr("NOP", location=loc) for loc in locs]
    body += [Instr("LOAD_CONST", None), Instr("RETURN_VALUE")]
    code = make_code(body, first_lineno=1, add_prologue=False)
    positions = list(code.co_positions())
    assert positions[: len(locs)] == per_unit([(0, 1, loc) for loc in locs])
    assert TABLE.version == tuple(__import__("sys").version_info[:2])
