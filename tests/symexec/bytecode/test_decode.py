"""Decoding real functions: argument meanings, labels, handlers and locations."""

from __future__ import annotations

import dis
import inspect
import json
from types import CodeType

import pytest

from kiln.symexec.bytecode import (
    NO_ARG,
    TABLE,
    ArgKind,
    AttrArg,
    CompareArg,
    ConcreteBytecode,
    ConcreteInstr,
    DecodeError,
    GlobalArg,
    Instr,
    Label,
    Location,
    SuperAttrArg,
    decode,
    decode_concrete_bytecode,
    walk_code,
)


def sample(a, b):
    n = len(a)
    r = a.real
    a.conjugate()
    if a < b and a >= 0:
        n = n + 1
    n += 2
    flags = (a is None, a is not b, a in b, a not in b)
    return lambda: (n, r, flags)


class Base:
    def f(self):
        return 1


class Child(Base):
    def f(self):
        return super().f() + super(Child, self).f() + len(super().f.__name__)  # noqa: UP008 (the two-argument form is what is tested)


def guarded(x):
    try:
        return 1 / x
    except ZeroDivisionError:
        return None
    finally:
        x = 0


def instrs(fn) -> list[Instr]:
    return [i for i in decode(fn.__code__).instrs if isinstance(i, Instr)]


def test_names_constants_and_operators_have_meanings():
    ins = instrs(sample)
    args = [i.arg for i in ins]
    assert GlobalArg("len", push_null=True) in args
    assert any(i.name == "LOAD_ATTR" and i.arg == AttrArg("real") for i in ins)
    method_loads = [i for i in ins if i.arg in ("conjugate", AttrArg("conjugate", method=True))]
    assert len(method_loads) == 1
    assert method_loads[0].name in ("LOAD_METHOD", "LOAD_ATTR")
    compares = [i.arg for i in ins if i.name == "COMPARE_OP"]
    assert [c.op for c in compares] == ["<", ">="]
    assert [i.arg for i in ins if i.name == "BINARY_OP"] == ["+", "+="]
    assert [i.arg for i in ins if i.name in ("IS_OP", "CONTAINS_OP")] == [False, True, False, True]
    assert any(i.name == "LOAD_CONST" and i.arg == 2 and type(i.arg) is int for i in ins)
    local_names = {i.arg for i in ins if i.kind is ArgKind.LOCAL}
    local_names |= {n for i in ins if i.kind is ArgKind.LOCAL_PAIR for n in i.arg}
    assert local_names >= {"a", "b", "n", "r", "flags"}


def test_cells_and_free_variables_are_names():
    bc = decode(sample.__code__)
    assert set(bc.cellvars) == {"n", "r", "flags"}
    assert [i.arg for i in bc.instructions() if i.name == "MAKE_CELL"] == bc.cellvars
    inner = next(c for c in sample.__code__.co_consts if isinstance(c, CodeType))
    inner_bc = decode(inner)
    assert inner_bc.freevars == list(inner.co_freevars) == sorted(bc.cellvars, key=inner.co_freevars.index)
    assert {i.arg for i in inner_bc.instructions() if i.name == "LOAD_DEREF"} == {"n", "r", "flags"}


def test_super_attribute_flags():
    ins = instrs(Child.f)
    if "LOAD_SUPER_ATTR" not in TABLE.opmap:
        assert not any(isinstance(i.arg, SuperAttrArg) for i in ins)
        return
    supers = [i.arg for i in ins if i.name == "LOAD_SUPER_ATTR"]
    assert SuperAttrArg("f", method=True, two_arg=False) in supers
    assert SuperAttrArg("f", method=True, two_arg=True) in supers
    assert SuperAttrArg("f", method=False, two_arg=False) in supers


def test_labels_sit_where_dis_says_jumps_go():
    for code in walk_code(compile(inspect.getsource(json.decoder), "d", "exec")):
        bc = decode(code)
        cb = ConcreteBytecode.from_code(code)
        label_at: dict[Label, int] = {}
        position = 0
        for item in bc.instrs:
            if isinstance(item, Label):
                label_at[item] = 2 * cb.instrs[position].offset
            else:
                position += 1
        jumps = [i for i in bc.instructions() if i.kind is ArgKind.JUMP]
        targets = [i.argval for i in dis.get_instructions(code) if i.opcode in dis.hasjrel]
        assert [label_at[i.arg] for i in jumps] == targets
        assert len(label_at) == len({*(i.arg for i in jumps), *(i.handler.target for i in bc.instructions() if i.handler)})


def test_handlers_cover_the_try_body():
    bc = decode(guarded.__code__)
    ins = bc.instructions()
    div = next(i for i in ins if i.name == "BINARY_OP" and i.arg == "/")
    assert div.handler is not None and div.handler.depth == 0 and not div.handler.lasti
    target = bc.instrs.index(div.handler.target)
    assert bc.instrs[target + 1].name == "PUSH_EXC_INFO"
    assert ins[0].handler is None
    entries = dis._parse_exception_table(guarded.__code__)
    assert len({(e.target, e.depth, e.lasti) for e in entries}) == len(
        {i.handler for i in ins if i.handler is not None})


def test_locations_are_positions_of_the_instruction():
    code = sample.__code__
    cb = ConcreteBytecode.from_code(code)
    positions = list(code.co_positions())
    for ins, c in zip(decode(code).instructions(), cb.instrs, strict=True):
        expected = positions[c.offset]
        got = (None,) * 4 if ins.location is None else (
            ins.location.lineno, ins.location.end_lineno, ins.location.col_offset, ins.location.end_col_offset)
        assert got == expected
    first_line = inspect.getsourcelines(sample)[1]
    assert decode(code).instructions()[-1].lineno == first_line + 8
    assert decode(code).first_lineno == first_line


def test_metadata_is_kept():
    bc = decode(sample.__code__)
    code = sample.__code__
    assert (bc.name, bc.qualname, bc.argcount, bc.flags) == ("sample", "sample", 2, code.co_flags)
    assert bc.consts == list(code.co_consts) and bc.names == list(code.co_names)
    assert bc.varnames == list(code.co_varnames)


def test_no_argument_instructions_hold_no_arg():
    ins = instrs(guarded)
    assert all((i.arg is NO_ARG) == (i.kind is ArgKind.NONE) for i in ins)
    assert any(i.name == "PUSH_EXC_INFO" for i in ins)


def test_jump_into_the_middle_of_an_instruction_is_rejected():
    op = TABLE.opmap
    call = [ConcreteInstr("RESUME", op["RESUME"], 0),
            ConcreteInstr("JUMP_FORWARD", op["JUMP_FORWARD"], 1),
            ConcreteInstr("LOAD_GLOBAL", op["LOAD_GLOBAL"], 0, caches=TABLE.caches("LOAD_GLOBAL")),
            ConcreteInstr("RETURN_VALUE", op["RETURN_VALUE"], 0)]
    cb = ConcreteBytecode(call, [Location(1)] * 4, [], [None], ["x"], [], [], [], 2)
    with pytest.raises(DecodeError):
        decode(cb.to_code())


def test_compare_meaning_round_trips_through_the_table():
    for op in TABLE.compare_ops:
        assert TABLE.decode_compare(TABLE.encode_compare(op, False)) == (op, False)
    assert CompareArg("==") == Instr("COMPARE_OP", "==").arg


def test_offsets_are_those_dis_and_f_lasti_use():
    ins = decode(sample.__code__).instructions()
    assert [i.offset for i in ins] == [i.offset for i in dis.get_instructions(sample) if i.opname != "EXTENDED_ARG"]
    moved = Instr(ins[0].name, ins[0].arg, location=ins[0].location, handler=ins[0].handler)
    assert moved.same_as(ins[0]) and moved.offset is None and ins[0].offset is not None


def test_exception_ranges_match_the_table():
    from kiln.symexec.bytecode import exception_ranges

    bc = decode(guarded.__code__)
    ranges = bc.exception_ranges()
    entries = dis._parse_exception_table(guarded.__code__)
    assert len(ranges) == len(entries) and ranges == exception_ranges(bc.instrs)
    cb = ConcreteBytecode.from_code(guarded.__code__)
    for r, e in zip(ranges, entries, strict=True):
        assert 2 * cb.instrs[r.first].offset == e.start
        assert 2 * cb.instrs[r.last].end == e.end
        assert (r.handler.depth, r.handler.lasti) == (e.depth, e.lasti)


def test_localsplus_layout_matches_the_interpreter():
    from kiln.symexec.bytecode import localsplus_names

    def inlined(y):
        a = 1
        return [lambda: x + a for x in y]  # noqa: B023 (3.12+: x is a local and a cell of inlined)

    codes = [inlined.__code__, *walk_code(compile(inspect.getsource(json.decoder), "d", "exec"))]
    for code in codes:
        names = localsplus_names(code.co_varnames, code.co_cellvars, code.co_freevars)
        assert names == [code._varname_from_oparg(i) for i in range(len(names))]


def test_unknown_opcodes_are_rejected():
    op = next(o for o in range(1, 256) if TABLE.opname[o] not in TABLE.opmap)
    instrs = [ConcreteInstr("RESUME", TABLE.opmap["RESUME"], 0),
              ConcreteInstr(TABLE.opname[op], op, 0),
              ConcreteInstr("RETURN_VALUE", TABLE.opmap["RETURN_VALUE"], 0)]
    # (a code object cannot carry it: co_code maps specialized opcodes back to their base)
    cb = ConcreteBytecode(instrs, [None] * 3, [], [None], [], [], [], [], 1)
    with pytest.raises(DecodeError, match="not in the CPython"):
        decode_concrete_bytecode(cb)
