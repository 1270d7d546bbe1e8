"""The location table (``co_linetable``) of CPython 3.11+ (PEP 626/657 format).

The table is a sequence of entries, each covering 1 to 8 code units with one location. The
first byte of an entry is ``0x80 | code << 3 | (units - 1)``; the code picks the form:
0-9 short (same line, small columns), 10-12 one-line (line delta 0-2), 13 no columns,
14 long, 15 no location. Line deltas are relative to the previous entry's line, starting from
``co_firstlineno``. Varints are little-endian 6-bit groups with 0x40 as continuation.

``encode_linetable`` picks forms exactly as CPython's assembler does, so decoding then
encoding a compiler-produced table gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._instr import Location

__all__ = ["decode_linetable", "encode_linetable"]


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    b = data[pos]
    pos += 1
    value = b & 63
    shift = 0
    while b & 64:
        b = data[pos]
        pos += 1
        shift += 6
        value |= (b & 63) << shift
    return value, pos


def _read_svarint(data: bytes, pos: int) -> tuple[int, int]:
    value, pos = _read_varint(data, pos)
    return (-(value >> 1) if value & 1 else value >> 1), pos


def decode_linetable(table: bytes, first_lineno: int) -> list[tuple[int, int, Location | None]]:
    """Entries of ``table`` as ``(start_unit, n_units, location)``; None means no location."""
    entries: list[tuple[int, int, Location | None]] = []
    # one Location object per distinct location: 3.11 writes one entry per instruction
    seen: dict[tuple, Location] = {}
    line = first_lineno
    pos = unit = 0
    while pos < len(table):
        first = table[pos]
        pos += 1
        code = (first >> 3) & 15
        length = (first & 7) + 1
        loc: Location | None
        if code == 15:
            loc = None
        elif code == 14:
            delta, pos = _read_svarint(table, pos)
            end_delta, pos = _read_varint(table, pos)
            col, pos = _read_varint(table, pos)
            end_col, pos = _read_varint(table, pos)
            line += delta
            loc = Location(line, line + end_delta, col - 1 if col else None,
                           end_col - 1 if end_col else None)
        elif code == 13:
            delta, pos = _read_svarint(table, pos)
            line += delta
            loc = Location(line, line, None, None)
        elif code >= 10:
            line += code - 10
            loc = Location(line, line, table[pos], table[pos + 1])
            pos += 2
        else:
            second = table[pos]
            pos += 1
            col = code * 8 + (second >> 4)
            loc = Location(line, line, col, col + (second & 15))
        if loc is not None:
            key = (loc.lineno, loc.end_lineno, loc.col_offset, loc.end_col_offset)
            loc = seen.setdefault(key, loc)
        entries.append((unit, length, loc))
        unit += length
    return entries


def _write_varint(out: bytearray, value: int) -> None:
    while value >= 64:
        out.append(64 | (value & 63))
        value >>= 6
    out.append(value)


def _write_svarint(out: bytearray, value: int) -> None:
    _write_varint(out, ((-value) << 1) | 1 if value < 0 else value << 1)


def _write_entry(out: bytearray, loc: Location | None, units: int, line: int) -> int:
    """Append one entry of ``units`` (1-8) code units; return the new current line."""
    header = 0x80 | (units - 1)
    if loc is None or loc.lineno is None or loc.lineno < 0:
        out.append(header | 15 << 3)
        return line
    delta = loc.lineno - line
    end_line = loc.lineno if loc.end_lineno is None else loc.end_lineno
    col = -1 if loc.col_offset is None else loc.col_offset
    end_col = -1 if loc.end_col_offset is None else loc.end_col_offset
    if col < 0 or end_col < 0:
        if end_line == loc.lineno:
            out.append(header | 13 << 3)
            _write_svarint(out, delta)
            return loc.lineno
    elif end_line == loc.lineno:
        if delta == 0 and col < 80 and 0 <= end_col - col < 16:
            out.append(header | (col >> 3) << 3)
            out.append(((col & 7) << 4) | (end_col - col))
            return line
        if 0 <= delta < 3 and col < 128 and end_col < 128:
            out.append(header | (10 + delta) << 3)
            out += bytes((col, end_col))
            return loc.lineno
    out.append(header | 14 << 3)
    _write_svarint(out, delta)
    _write_varint(out, end_line - loc.lineno)
    _write_varint(out, col + 1)
    _write_varint(out, end_col + 1)
    return loc.lineno


def encode_linetable(runs: Iterable[tuple[int, Location | None]], first_lineno: int,
                     merge: bool = True) -> bytes:
    """Encode ``(n_units, location)`` runs (one per instruction).

    With ``merge`` (the 3.12+ compiler's way) adjacent runs with equal locations become one;
    without it (3.11's) each instruction gets its own entries.
    """
    out = bytearray()
    line = first_lineno
    merged: list[list] = []
    for units, loc in runs:
        if units == 0:
            continue
        if merge and merged and merged[-1][1] == loc:
            merged[-1][0] += units
        else:
            merged.append([units, loc])
    for units, loc in merged:
        while units > 8:
            line = _write_entry(out, loc, 8, line)
            units -= 8
        line = _write_entry(out, loc, units, line)
    return bytes(out)
