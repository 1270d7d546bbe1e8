"""Abstract instructions: validation and normalization of argument meanings."""

from __future__ import annotations

import pytest

from kiln.symexec.bytecode import (
    NO_ARG,
    TABLE,
    ArgKind,
    AttrArg,
    CompareArg,
    ExceptHandler,
    GlobalArg,
    Instr,
    Label,
    Location,
    SuperAttrArg,
)


def test_shorthands_become_argument_objects():
    assert Instr("LOAD_GLOBAL", "len").arg == GlobalArg("len", push_null=False)
    assert Instr("LOAD_ATTR", "x").arg == AttrArg("x", method=False)
    assert Instr("COMPARE_OP", "<=").arg == CompareArg("<=")
    assert Instr("IS_OP", 1).arg is True
    if "LOAD_SUPER_ATTR" in TABLE.opmap:
        assert Instr("LOAD_SUPER_ATTR", "f").arg == SuperAttrArg("f")


@pytest.mark.parametrize(("name", "arg", "error"), [
    ("LOAD_FAST", 1, TypeError),
    ("NOP", 1, TypeError),
    ("LOAD_CONST", NO_ARG, TypeError),
    ("BINARY_OP", "@@", ValueError),
    ("COMPARE_OP", "<>", ValueError),
    ("BUILD_TUPLE", -1, ValueError),
    ("BUILD_TUPLE", True, ValueError),
    ("JUMP_FORWARD", "L1", TypeError),
    ("NOT_AN_OPCODE", NO_ARG, ValueError),
])
def test_invalid_arguments_are_rejected(name, arg, error):
    with pytest.raises(error):
        Instr(name, arg)


def test_version_specific_opcodes_exist_only_where_the_table_has_them():
    for name in ("PRECALL", "KW_NAMES", "RETURN_CONST", "LOAD_FAST_AND_CLEAR", "END_FOR", "CALL_KW",
                 "TO_BOOL", "LOAD_METHOD"):
        if name in TABLE.opmap:
            assert TABLE.knows(name)
        else:
            with pytest.raises(ValueError, match="not an instruction of CPython"):
                Instr(name, 0)


def test_directional_jump_names_become_neutral():
    target = Label()
    for concrete, neutral in TABLE.neutral_names.items():
        assert Instr(concrete, target).name == neutral
    for neutral in TABLE.jump_families:
        ins = Instr(neutral, target)
        assert ins.is_jump() and ins.arg is target and ins.kind is ArgKind.JUMP


def test_fallthrough():
    assert not Instr("RETURN_VALUE").has_fallthrough()
    assert not Instr("JUMP", Label()).has_fallthrough()
    assert not Instr("RAISE_VARARGS", 1).has_fallthrough()
    assert Instr("POP_JUMP_IF_TRUE", Label()).has_fallthrough()
    assert Instr("NOP").has_fallthrough()


def test_location_and_handler_are_keyword_fields():
    h = ExceptHandler(Label(), 2, True)
    ins = Instr("NOP", location=Location(3, 3, 0, 4), handler=h)
    assert ins.lineno == 3 and ins.handler is h and Instr("NOP").lineno is None
    twin = Instr("NOP", location=Location(3, 3, 0, 4), handler=h)
    assert ins.same_as(twin) and ins != twin and len({ins, twin}) == 2
    assert not ins.same_as(Instr("NOP", location=Location(3, 3, 0, 4), handler=ExceptHandler(Label(), 2, True)))
    assert not Instr("LOAD_CONST", 0).same_as(Instr("LOAD_CONST", False))
    assert Instr("LOAD_CONST", (1, "a")).same_as(Instr("LOAD_CONST", (1, "a")))
    target = Label()
    assert Instr("JUMP", target).same_as(Instr("JUMP", target)) and not Instr("JUMP", target).same_as(Instr("JUMP", Label()))
    assert repr(Instr("LOAD_CONST", 1)) == "Instr('LOAD_CONST', 1)"
