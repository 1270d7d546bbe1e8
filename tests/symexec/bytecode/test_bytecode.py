"""The Bytecode container: copies with fresh labels, exception ranges, localsplus."""

from __future__ import annotations

import inspect

from kiln.symexec.bytecode import Bytecode, Instr, Label, copy_instrs, decode, localsplus_names


def handled(x):
    for i in range(x):
        try:
            x = x // i
        except ZeroDivisionError:
            continue
    return x


def test_copy_has_fresh_labels_and_the_same_code():
    bc = decode(handled.__code__)
    twin = bc.copy()
    old_labels = {id(i) for i in bc.instrs if isinstance(i, Label)}
    assert not any(id(i) in old_labels for i in twin.instrs)
    assert all(a is not b for a, b in zip(bc.instrs, twin.instrs, strict=True))
    for a, b in zip(bc.instructions(), twin.instructions(), strict=True):
        assert a.name == b.name and a.location == b.location and a.offset == b.offset
        if isinstance(a.arg, Label):
            assert b.arg in twin.instrs and b.arg is not a.arg
        if a.handler is not None:
            assert b.handler.target in twin.instrs and b.handler.depth == a.handler.depth
    assert twin.to_code() == handled.__code__
    twin.instrs.insert(1, Instr("NOP"))
    assert bc.to_code() == handled.__code__  # the original is untouched


def test_copied_instructions_splice_into_other_code():
    bc = decode(handled.__code__)
    body = copy_instrs(bc.instrs)
    again = copy_instrs(bc.instrs)
    assert {id(x) for x in body if isinstance(x, Label)}.isdisjoint(id(x) for x in again if isinstance(x, Label))
    shared = Label()
    kept = copy_instrs([Instr("JUMP", shared)])
    assert kept[0].arg is shared  # labels outside the list stay shared


def test_localsplus_and_ranges():
    bc = Bytecode(varnames=["a", "b"], cellvars=["b", "c"], freevars=["d"])
    assert bc.localsplus() == localsplus_names(["a", "b"], ["b", "c"], ["d"]) == ["a", "b", "c", "d"]
    ranges = decode(handled.__code__).exception_ranges()
    assert len(ranges) >= 2 and all(r.first <= r.last for r in ranges)
    assert inspect.getsource(handled).count("try") == 1
