"""Concrete level: instruction boundaries, opargs and caches agree with dis."""

from __future__ import annotations

import ast
import dis
import inspect

import pytest

from kiln.symexec.bytecode import (
    TABLE,
    ConcreteBytecode,
    ConcreteInstr,
    decode_concrete,
    encode_concrete,
    extended_args_needed,
    walk_code,
)

CODES = list(walk_code(compile(inspect.getsource(ast), ast.__file__, "exec")))


def test_instructions_agree_with_dis():
    for code in CODES:
        ours = [(i.name, i.arg, 2 * (i.offset + i.extended)) for i in decode_concrete(code.co_code)]
        theirs = [(i.opname, i.arg or 0, i.offset) for i in dis.get_instructions(code)
                  if i.opname not in ("EXTENDED_ARG", "CACHE")]
        assert ours == theirs, code.co_qualname


def test_sizes_cover_co_code_with_caches():
    for code in CODES:
        instrs = decode_concrete(code.co_code)
        assert sum(i.size for i in instrs) == len(code.co_code) // 2
        assert all(i.caches == TABLE.caches(i.name) for i in instrs)
        assert encode_concrete(instrs) == code.co_code


def test_extended_arg_prefixes_are_folded():
    instrs = [ConcreteInstr("LOAD_CONST", TABLE.opmap["LOAD_CONST"], 0x12345, extended=2)]
    data = encode_concrete(instrs)
    assert data[0] == TABLE.extended_arg and data[2] == TABLE.extended_arg
    (back,) = decode_concrete(data)
    assert (back.name, back.arg, back.extended, back.offset) == ("LOAD_CONST", 0x12345, 2, 0)


def test_too_few_prefixes_is_an_error():
    with pytest.raises(ValueError):
        encode_concrete([ConcreteInstr("LOAD_CONST", TABLE.opmap["LOAD_CONST"], 300)])


@pytest.mark.parametrize(("arg", "n"), [(0, 0), (255, 0), (256, 1), (65535, 1), (65536, 2),
                                        ((1 << 24) - 1, 2), (1 << 24, 3), ((1 << 32) - 1, 3)])
def test_extended_args_needed(arg, n):
    assert extended_args_needed(arg) == n


def test_out_of_range_oparg():
    with pytest.raises(ValueError):
        extended_args_needed(1 << 32)


def test_concrete_bytecode_keeps_tables():
    code = ast.literal_eval.__code__
    cb = ConcreteBytecode.from_code(code)
    assert cb.stacksize == code.co_stacksize and len(cb.locations) == len(cb.instrs)
    assert cb.to_code() == code
