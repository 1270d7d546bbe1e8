"""Building fresh code objects and version-neutral calls; the results are run."""

from __future__ import annotations

import inspect
import types

import pytest

from kiln.symexec.bytecode import (
    TABLE,
    Instr,
    Label,
    call_instrs,
    conditional_jump,
    decode,
    disassemble,
    make_code,
    prologue,
    with_null,
)


def test_parameters_and_signature():
    body = [Instr("LOAD_FAST", n) for n in ("a", "b", "c", "args", "kw")]
    body += [Instr("BUILD_TUPLE", 5), Instr("RETURN_VALUE")]
    code = make_code(body, name="f", argnames=["a", "b"], posonlyargcount=1, kwonlyargnames=["c"],
                     varargs="args", varkw="kw")
    fn = types.FunctionType(code, {}, "f", None, None)
    fn.__kwdefaults__ = {"c": 3}
    assert str(inspect.signature(fn)) == "(a, /, b, *args, c=3, **kw)"
    assert fn(1, 2, 9, z=0) == (1, 2, 3, (9,), {"z": 0})
    assert code.co_flags & inspect.CO_VARARGS and code.co_flags & inspect.CO_VARKEYWORDS


def test_free_variables_read_the_closure():
    body = [Instr("LOAD_DEREF", "outer"), Instr("LOAD_FAST", "x"), Instr("BINARY_OP", "*"), Instr("RETURN_VALUE")]
    code = make_code(body, argnames=["x"], freevars=["outer"])
    assert decode(code).instrs[0].name == "COPY_FREE_VARS"
    fn = types.FunctionType(code, {}, "f", None, (types.CellType(6),))
    assert fn(7) == 42


def test_cells_are_made():
    # the argument x becomes a cell in its own slot; y is a new cell after the locals
    body = [Instr("LOAD_DEREF", "x"), Instr("LOAD_CONST", 2), Instr("BINARY_OP", "*"),
            Instr("STORE_DEREF", "y"), Instr("LOAD_DEREF", "y"), Instr("RETURN_VALUE")]
    code = make_code(body, argnames=["x"], cellvars=["x", "y"])
    assert [i.name for i in decode(code).instructions()[:3]] == ["MAKE_CELL", "MAKE_CELL", "RESUME"]
    assert code.co_cellvars == ("x", "y") and code.co_nlocals == 1
    assert types.FunctionType(code, {})(5) == 10


def test_generator_prologue():
    instrs = prologue([], ["a"], inspect.CO_GENERATOR)
    assert [i.name for i in instrs] == ["COPY_FREE_VARS", "RETURN_GENERATOR", "POP_TOP", "RESUME"]


def target(a, b=0, *, c=0):
    return (a, b, c)


@pytest.mark.parametrize(("args", "kw", "expected"), [
    ((1,), (), (1, 0, 0)),
    ((1, 2), (), (1, 2, 0)),
    ((1, 2, 3), ("c",), (1, 2, 3)),
    ((1, 2, 3), ("b", "c"), (1, 2, 3)),
])
def test_calls_in_the_running_layout(args, kw, expected):
    body = with_null([Instr("LOAD_GLOBAL", "target")])
    body += [Instr("LOAD_CONST", a) for a in args]
    body += call_instrs(len(args), kw)
    body.append(Instr("RETURN_VALUE"))
    code = make_code(body)
    assert types.FunctionType(code, {"target": target})() == expected
    assert "CALL" in disassemble(code)


def test_method_call_through_push_null_flag():
    body = with_null([Instr("LOAD_FAST", "s"), Instr("LOAD_ATTR", "upper")])
    body += [*call_instrs(0), Instr("RETURN_VALUE")]
    assert types.FunctionType(make_code(body, argnames=["s"]), {})("ab") == "AB"


def test_too_many_keyword_names():
    with pytest.raises(ValueError):
        call_instrs(1, ("a", "b"))


def test_conditional_jump_tests_truth_of_any_value():
    out = Label()
    body = [Instr("LOAD_FAST", "x"), *conditional_jump("POP_JUMP_IF_FALSE", out),
            Instr("LOAD_CONST", "truthy"), Instr("RETURN_VALUE"),
            out, Instr("LOAD_CONST", "falsy"), Instr("RETURN_VALUE")]
    fn = types.FunctionType(make_code(body, argnames=["x"]), {})
    assert [fn(v) for v in (0, 3, "", "a", [], [0], None)] == [
        "falsy", "truthy", "falsy", "truthy", "falsy", "truthy", "falsy"]
    assert ("TO_BOOL" in disassemble(fn.__code__)) == TABLE.jump_if_needs_bool
    with pytest.raises(ValueError):
        conditional_jump("POP_JUMP_IF_NONE", out)
