"""Readable disassembly for logs."""

from __future__ import annotations

import re

from kiln.symexec.bytecode import GlobalArg, Instr, Label, decode, disassemble


def looped(items):
    total = 0
    for item in items:
        try:
            total += int(item)
        except ValueError:
            print("bad", item)
    return total < 10


def test_code_object_disassembly():
    text = disassemble(looped.__code__)
    lines = text.splitlines()
    assert lines[0].startswith("looped (") and "args=1" in lines[0] and "varnames=(items, total, item)" in lines[0]
    labels = [line[:-1] for line in lines if re.fullmatch(r"L\d+:", line)]
    assert labels == [f"L{i}" for i in range(1, len(labels) + 1)]
    assert any("FOR_ITER" in line and re.search(r"FOR_ITER\s+L\d", line) for line in lines)
    assert any(re.search(r"LOAD_GLOBAL\s+NULL \+ print", line) for line in lines)
    assert any(re.search(r"COMPARE_OP\s+<", line) for line in lines)
    assert any(re.search(r"BINARY_OP\s+\+=", line) for line in lines)
    assert "ExceptionTable:" in lines
    table = lines[lines.index("ExceptionTable:") + 1:]
    assert table and all(re.fullmatch(r"  \d+ to \d+ -> L\d+ \[\d+\]( lasti)?", row) for row in table)
    assert any(line.rstrip().endswith("-> L" + table[0].split("-> L")[1].split()[0]) for line in lines[1:])


def test_line_numbers_shown_where_they_change():
    import inspect

    first = inspect.getsourcelines(looped)[1]
    text = disassemble(decode(looped.__code__))
    shown = [int(m.group(1)) for m in re.finditer(r"^\s+\d+\s+(\d+)\s{4}\S", text, re.M)]
    assert shown[0] == first and first + 1 in shown and first + 7 in shown


def test_instruction_list_disassembly():
    end = Label()
    text = disassemble([Instr("LOAD_GLOBAL", GlobalArg("f")), Instr("JUMP_FORWARD", end), end,
                        Instr("LOAD_CONST", "x" * 100), Instr("RETURN_VALUE")])
    lines = text.splitlines()
    assert re.fullmatch(r"\s+0\s+LOAD_GLOBAL\s+f", lines[0])
    assert lines[1].split()[-1] == "L1" and lines[2] == "L1:"
    assert lines[3].endswith("...") and len(lines[3]) < 120
    assert "ExceptionTable" not in text


def test_functions_are_accepted():
    assert disassemble(looped) == disassemble(looped.__code__)
