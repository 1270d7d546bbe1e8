"""Stack depth by flow analysis: equal to the compiler's on real code, errors on underflow."""

from __future__ import annotations

import inspect
import json

import pytest

from kiln.symexec.bytecode import (
    TABLE,
    ExceptHandler,
    FlowInstr,
    Instr,
    Label,
    StackDepthError,
    assemble_concrete,
    basic_block_starts,
    compute_stacksize,
    decode,
    make_code,
    stack_depths,
    walk_code,
)


def deep(a, b, c):
    try:
        with open(a) as f, open(b) as g:
            return [(x, {y: (z, (a, (b, (c, x + y * z)))) for y in g}) for x in f for z in range(3)]
    except (OSError, ValueError) as exc:
        raise RuntimeError(str(exc)) from exc
    finally:
        print(a, b, c, sep=",", end="")


async def coroutine(x):
    async with x as y:
        async for z in y:
            await z


def generator(items):
    yield from items
    yield (yield 1)


@pytest.mark.parametrize("fn", [deep, coroutine, generator, json.dumps, inspect.signature])
def test_matches_the_compiler(fn):
    for code in walk_code(fn.__code__):
        assert assemble_concrete(decode(code)).stacksize == code.co_stacksize, code.co_qualname


def test_handler_depth_counts():
    # a handler entry (depth 3, lasti) needs 5 slots even though the body needs only 1
    h = Label()
    body = [Instr("LOAD_CONST", 1, handler=ExceptHandler(h, 3, True)), Instr("RETURN_VALUE"),
            h, Instr("POP_TOP"), Instr("POP_TOP"), Instr("POP_TOP"), Instr("POP_TOP"), Instr("POP_TOP"),
            Instr("LOAD_CONST", None), Instr("RETURN_VALUE")]
    assert make_code(body, add_prologue=False).co_stacksize == 5


def test_underflow_is_an_error():
    with pytest.raises(StackDepthError):
        make_code([Instr("POP_TOP"), Instr("LOAD_CONST", None), Instr("RETURN_VALUE")])


def test_unreachable_code_does_not_count():
    body = [Instr("LOAD_CONST", None), Instr("RETURN_VALUE"),
            *[Instr("LOAD_CONST", i) for i in range(10)], Instr("BUILD_TUPLE", 10), Instr("RETURN_VALUE")]
    assert make_code(body, add_prologue=False).co_stacksize == 1


def test_basic_blocks_split_at_jumps_targets_and_exits():
    op = TABLE.opmap
    flow = [
        FlowInstr("LOAD_CONST", op["LOAD_CONST"], 0),
        FlowInstr("POP_JUMP_IF_FALSE", op[TABLE.jump_families["POP_JUMP_IF_FALSE"][0]], 0, jump_target=4),
        FlowInstr("LOAD_CONST", op["LOAD_CONST"], 0),
        FlowInstr("RETURN_VALUE", op["RETURN_VALUE"], 0),
        FlowInstr("LOAD_CONST", op["LOAD_CONST"], 0),
        FlowInstr("RETURN_VALUE", op["RETURN_VALUE"], 0),
    ]
    assert basic_block_starts(flow) == [0, 2, 4]
    assert compute_stacksize(flow) == 1


def looping(x):
    for i in x:
        try:  # noqa: SIM105 (the handler's bytecode is what is tested)
            print(i)
        except ValueError:
            pass
    return len(x)


def test_depth_before_each_instruction():
    bc = decode(looping.__code__)
    ins = bc.instructions()
    depths = stack_depths(bc)
    assert len(depths) == len(ins) and depths[0] == 0
    for_iter = next(k for k, i in enumerate(ins) if i.name == "FOR_ITER")
    assert depths[for_iter] == 1  # the iterator
    assert depths[for_iter + 1] == 2  # the item, on the fallthrough
    position = {id(i): k for k, i in enumerate(ins)}
    for i in ins:
        if i.handler is not None:
            at = bc.instrs.index(i.handler.target) + 1
            assert depths[position[id(bc.instrs[at])]] == i.handler.depth + int(i.handler.lasti) + 1
    assert max(d for d in depths if d is not None) <= looping.__code__.co_stacksize


def test_unreachable_instructions_have_no_depth():
    bc = decode(make_code([Instr("LOAD_CONST", None), Instr("RETURN_VALUE"), Instr("NOP"),
                           Instr("LOAD_CONST", None), Instr("RETURN_VALUE")], add_prologue=False))
    assert stack_depths(bc) == [0, 1, None, None, None]
