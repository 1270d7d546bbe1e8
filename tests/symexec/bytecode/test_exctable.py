"""The exception table codec against dis's parser and itself."""

from __future__ import annotations

import dis
import inspect
import json

from hypothesis import given
from hypothesis import strategies as st

from kiln.symexec.bytecode import (
    ExceptionTableEntry,
    decode_exception_table,
    encode_exception_table,
    walk_code,
)

CODES = [c for m in (json, inspect) for c in walk_code(compile(inspect.getsource(m), m.__file__, "exec"))]


def test_decoding_agrees_with_dis():
    seen = 0
    for code in CODES:
        ours = decode_exception_table(code.co_exceptiontable)
        theirs = dis._parse_exception_table(code)
        assert [(2 * e.start, 2 * e.end, 2 * e.target, e.depth, e.lasti) for e in ours] == [
            (e.start, e.end, e.target, e.depth, e.lasti) for e in theirs
        ]
        seen += len(ours)
    assert seen > 100


def test_reencoding_gives_the_same_bytes():
    for code in CODES:
        assert encode_exception_table(decode_exception_table(code.co_exceptiontable)) == code.co_exceptiontable


entries = st.lists(
    st.builds(lambda s, n, t, d, lasti: ExceptionTableEntry(s, s + n, t, d, lasti),
              st.integers(0, 1 << 30), st.integers(1, 1 << 26), st.integers(0, 1 << 30),
              st.integers(0, 1 << 20), st.booleans()),
    max_size=20,
)


@given(entries)
def test_encode_then_decode_is_identity(items):
    data = encode_exception_table(items)
    assert decode_exception_table(data) == items
    assert sum(1 for b in data if b & 0x80) == len(items)


def test_empty_range_is_rejected():
    import pytest

    with pytest.raises(ValueError):
        encode_exception_table([ExceptionTableEntry(4, 4, 8, 0, False)])
