"""Assembly of generated and modified instruction lists; the results are run."""

from __future__ import annotations

import math
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln.symexec.bytecode import (
    TABLE,
    AssemblyError,
    AttrArg,
    Bytecode,
    CompareArg,
    ConcreteBytecode,
    Instr,
    Label,
    assemble_concrete,
    conditional_jump,
    decode,
    extended_args_needed,
    make_code,
    normalize_jumps,
)


def run(body, *args, argnames=("x",), globals_=None):
    code = make_code(body, name="generated", argnames=argnames)
    return types.FunctionType(code, globals_ or {})(*args)


def jump_args(code):
    cb = ConcreteBytecode.from_code(code)
    return [i for i in cb.instrs if i.name in TABLE.jump_directions]


@pytest.mark.parametrize("filler", [0, 1, 126, 127, 128, 254, 255, 256, 300, 66000])
def test_forward_jump_over_filler(filler):
    skip = Label()
    body = [Instr("LOAD_FAST", "x"), Instr("POP_JUMP_IF_TRUE", skip),
            *[Instr("NOP")] * filler,
            Instr("LOAD_CONST", "fell through"), Instr("RETURN_VALUE"),
            skip, Instr("LOAD_CONST", "jumped"), Instr("RETURN_VALUE")]
    code = make_code(body, argnames=["x"])
    fn = types.FunctionType(code, {})
    assert fn(True) == "jumped"
    assert fn(False) == "fell through"
    (jump,) = jump_args(code)
    assert jump.arg == filler + 2 + TABLE.caches("LOAD_CONST") + TABLE.caches("RETURN_VALUE")
    assert jump.extended == extended_args_needed(jump.arg)


@pytest.mark.parametrize("filler", [0, 200, 260, 70000])
def test_backward_jump_loop(filler):
    top, done = Label(), Label()
    # x counts down to 0; the result is how many times the loop body ran
    body = [Instr("LOAD_CONST", 0), Instr("STORE_FAST", "n"),
            top, Instr("LOAD_FAST", "x"), Instr("LOAD_CONST", 0), Instr("COMPARE_OP", ">"),
            Instr("POP_JUMP_IF_FALSE", done), *[Instr("NOP")] * filler,
            Instr("LOAD_FAST", "x"), Instr("LOAD_CONST", 1), Instr("BINARY_OP", "-="),
            Instr("STORE_FAST", "x"), Instr("LOAD_FAST", "n"), Instr("LOAD_CONST", 1),
            Instr("BINARY_OP", "+"), Instr("STORE_FAST", "n"), Instr("JUMP", top),
            done, Instr("LOAD_FAST", "n"), Instr("RETURN_VALUE")]
    code = make_code(body, argnames=["x"])
    assert types.FunctionType(code, {})(7) == 7
    names = [j.name for j in jump_args(code)]
    assert names[-1] == "JUMP_BACKWARD"


def test_backward_conditional_jump_follows_the_version_table():
    top = Label()
    body = [top, Instr("LOAD_FAST", "x"), Instr("LOAD_CONST", 1), Instr("BINARY_OP", "-"),
            Instr("STORE_FAST", "x"), Instr("LOAD_FAST", "x"), *conditional_jump("POP_JUMP_IF_TRUE", top),
            Instr("LOAD_FAST", "x"), Instr("RETURN_VALUE")]
    backward = TABLE.jump_families["POP_JUMP_IF_TRUE"][1]
    bc = Bytecode(instrs=[Instr("RESUME", 0), *body], varnames=["x"], argcount=1)
    if backward is None:
        with pytest.raises(AssemblyError, match="backward"):
            bc.to_code()
    else:
        assert [j.name for j in jump_args(bc.to_code())] == [backward]
    # make_code rewrites what the version cannot encode; the loop runs either way
    code = make_code(body, argnames=["x"])
    assert types.FunctionType(code, {})(5) == 0  # looped down to zero
    names = [j.name for j in jump_args(code)]
    assert names == ([backward] if backward else ["POP_JUMP_IF_FALSE", "JUMP_BACKWARD"])


def test_normalize_jumps_keeps_forward_jumps():
    end = Label()
    body = [Instr("LOAD_FAST", "x"), Instr("POP_JUMP_IF_NONE", end), end, Instr("RETURN_VALUE")]
    assert normalize_jumps(body) == body


def test_fixed_direction_jump_cannot_go_back():
    top = Label()
    with pytest.raises(AssemblyError):
        make_code([top, Instr("NOP"), Instr("JUMP_FORWARD", top)])


def test_label_errors():
    lab = Label()
    with pytest.raises(AssemblyError, match="twice"):
        make_code([lab, Instr("NOP"), lab, Instr("LOAD_CONST", None), Instr("RETURN_VALUE")])
    with pytest.raises(AssemblyError, match="not in the list"):
        make_code([Instr("JUMP", Label()), Instr("LOAD_CONST", None), Instr("RETURN_VALUE")])


@st.composite
def nested_jumps(draw):
    """Forward jumps whose spans overlap, with filler sizes around the one-byte limit."""
    n = draw(st.integers(1, 6))
    labels = [Label() for _ in range(n)]
    body = [Instr("JUMP", lab) for lab in labels[:1]]
    for i, lab in enumerate(labels):
        body += [Instr("NOP")] * draw(st.integers(120, 140))
        if i + 1 < n:
            body.append(Instr("JUMP", labels[i + 1]))
        body.append(lab)
    body += [Instr("LOAD_CONST", "end"), Instr("RETURN_VALUE")]
    return body


@settings(max_examples=40, deadline=None)
@given(nested_jumps())
def test_layout_reaches_a_minimal_fix_point(body):
    code = make_code(body)
    assert types.FunctionType(code, {})() == "end"
    for jump in jump_args(code):
        assert jump.extended == extended_args_needed(jump.arg)
    back = decode(code)
    assert back.instrs[0].name == "RESUME"
    assert jump_structure(back.instrs[1:]) == jump_structure(body)


def jump_structure(items) -> list[int]:
    """For each jump in order, the index of the instruction its label stands before."""
    position: dict[Label, int] = {}
    jumps: list[Label] = []
    count = 0
    for item in items:
        if isinstance(item, Label):
            position[item] = count
        else:
            if isinstance(item.arg, Label):
                jumps.append(item.arg)
            count += 1
    return [position[lab] for lab in jumps]


def test_constants_keep_their_types():
    values = [0, 0.0, -0.0, False, 0j, (0,), (0.0,), None, "0", b"0", float("nan"), frozenset({0})]
    body = [*[Instr("LOAD_CONST", v) for v in values], Instr("BUILD_TUPLE", len(values)), Instr("RETURN_VALUE")]
    code = make_code(body)
    out = types.FunctionType(code, {})()
    assert [type(v) for v in out] == [type(v) for v in values]
    assert math.copysign(1, out[2]) == -1 and math.copysign(1, out[1]) == 1
    assert type(out[5][0]) is int and type(out[6][0]) is float and math.isnan(out[10])
    assert len(code.co_consts) == len(values)  # the None slot is shared, nothing else is


def test_new_locals_and_names_are_added():
    body = [Instr("LOAD_FAST", "x"), Instr("STORE_FAST", "tmp"), Instr("LOAD_GLOBAL", "str"),
            Instr("LOAD_FAST", "tmp"), Instr("LOAD_ATTR", "real"), Instr("BINARY_OP", "*"),
            Instr("RETURN_VALUE")]
    code = make_code(body, argnames=["x"])
    assert code.co_varnames == ("x", "tmp") and code.co_nlocals == 2
    assert code.co_names == ("str", "real")
    assert types.FunctionType(code, {"str": 3})(2) == 6


def test_modified_function_with_handlers_still_catches():
    def divide(x):
        try:
            return 1 / x
        except ZeroDivisionError:
            return "div"

    bc = decode(divide.__code__)
    div = next(i for i in bc.instructions() if i.name == "BINARY_OP")
    at = bc.instrs.index(div)
    padding = [Instr("NOP", handler=div.handler, location=div.location) for _ in range(300)]
    bc.instrs[at:at] = padding
    code = bc.to_code()
    assert len(code.co_code) > len(divide.__code__.co_code) + 500
    divide.__code__ = code
    assert divide(0) == "div" and divide(4) == 0.25


def test_unencodable_flags_are_errors():
    if not TABLE.name_flag_bits["LOAD_ATTR"]:
        with pytest.raises(AssemblyError):
            make_code([Instr("LOAD_FAST", "x"), Instr("LOAD_ATTR", AttrArg("real", method=True)),
                       Instr("RETURN_VALUE")], argnames=["x"])
    body = [Instr("LOAD_FAST", "x"), Instr("LOAD_FAST", "x"), Instr("COMPARE_OP", CompareArg("<", to_bool=True)),
            Instr("RETURN_VALUE")]
    if TABLE.version < (3, 13):
        with pytest.raises(AssemblyError):
            make_code(body, argnames=["x"])
    else:
        assert types.FunctionType(make_code(body, argnames=["x"]), {})(1) is False


def test_local_pair_needs_small_indices():
    if "LOAD_FAST_LOAD_FAST" not in TABLE.opmap:
        with pytest.raises(ValueError, match="not an instruction"):
            Instr("LOAD_FAST_LOAD_FAST", ("a", "b"))
        return
    names = [f"v{i}" for i in range(20)]
    body = [Instr("LOAD_FAST_LOAD_FAST", ("v0", "v19")), Instr("BINARY_OP", "+"), Instr("RETURN_VALUE")]
    with pytest.raises(AssemblyError):
        make_code(body, argnames=names)
    body[0] = Instr("LOAD_FAST_LOAD_FAST", ("v0", "v3"))
    assert types.FunctionType(make_code(body, argnames=names), {})(*range(20)) == 3


def test_assemble_concrete_reports_the_stack_size():
    body = [*[Instr("LOAD_CONST", i) for i in range(5)], Instr("BUILD_TUPLE", 5), Instr("RETURN_VALUE")]
    cb = assemble_concrete(decode(make_code(body)))
    assert cb.stacksize == 5


class Loud:
    """Equal to everything, and refuses to be compared as a bool (like a tensor)."""

    def __eq__(self, other):
        raise AssertionError("constants must not be compared with ==")

    __hash__ = object.__hash__


def test_non_literal_constants_are_kept_by_identity():
    a, b = Loud(), Loud()
    body = [Instr("LOAD_CONST", a), Instr("LOAD_CONST", b), Instr("LOAD_CONST", a),
            Instr("BUILD_TUPLE", 3), Instr("RETURN_VALUE")]
    code = make_code(body)
    out = types.FunctionType(code, {})()
    assert out[0] is a and out[1] is b and out[2] is a
    assert sum(c is a for c in code.co_consts) == 1 and sum(c is b for c in code.co_consts) == 1
