"""The exception table (``co_exceptiontable``) of CPython 3.11+.

Each entry is four varints: start, length, target (all in code units) and
``depth << 1 | lasti``. Varints here are big-endian 6-bit groups with 0x40 as continuation;
the first byte of an entry carries 0x80. Entries are sorted by start and do not overlap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ExceptionTableEntry", "decode_exception_table", "encode_exception_table"]


@dataclass(frozen=True, slots=True)
class ExceptionTableEntry:
    """Instructions starting in code units ``[start, end)`` go to ``target`` on exception."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool


def _read(data: bytes, pos: int) -> tuple[int, int]:
    b = data[pos]
    pos += 1
    value = b & 63
    while b & 64:
        b = data[pos]
        pos += 1
        value = (value << 6) | (b & 63)
    return value, pos


def decode_exception_table(table: bytes) -> list[ExceptionTableEntry]:
    """Parse ``co_exceptiontable`` into entries (offsets in code units)."""
    entries = []
    pos = 0
    while pos < len(table):
        start, pos = _read(table, pos)
        length, pos = _read(table, pos)
        target, pos = _read(table, pos)
        depth_lasti, pos = _read(table, pos)
        entries.append(
            ExceptionTableEntry(start, start + length, target, depth_lasti >> 1, bool(depth_lasti & 1))
        )
    return entries


def _write(out: bytearray, value: int, first: bool) -> None:
    groups = [value & 63]
    value >>= 6
    while value:
        groups.append(value & 63)
        value >>= 6
    groups.reverse()
    for i, group in enumerate(groups):
        byte = group | (64 if i < len(groups) - 1 else 0)
        if i == 0 and first:
            byte |= 128
        out.append(byte)


def encode_exception_table(entries: Iterable[ExceptionTableEntry]) -> bytes:
    """Encode entries into ``co_exceptiontable`` bytes."""
    out = bytearray()
    for e in entries:
        if e.end <= e.start:
            raise ValueError(f"empty exception table range {e}")
        _write(out, e.start, True)
        _write(out, e.end - e.start, False)
        _write(out, e.target, False)
        _write(out, (e.depth << 1) | int(e.lasti), False)
    return bytes(out)
