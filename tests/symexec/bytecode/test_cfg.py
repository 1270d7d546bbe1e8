"""The control-flow graph level: block splitting, edges, and conversion back."""

from __future__ import annotations

import inspect
import json

from kiln.symexec.bytecode import ControlFlowGraph, Instr, Label, decode, make_code, walk_code


def branchy(x, items):
    if x:
        y = 1
    else:
        y = 2
    for item in items:
        try:
            y += item
        except TypeError:
            break
    return y


def test_blocks_convert_back_to_the_same_list():
    for code in walk_code(compile(inspect.getsource(json.encoder), "e", "exec")):
        bc = decode(code)
        cfg = ControlFlowGraph.from_bytecode(bc)
        assert cfg.to_instrs() == bc.instrs
        assert all(b.instrs for b in cfg.blocks)
        for block in cfg.blocks:
            assert not any(i.is_jump() or not i.has_fallthrough() for i in block.instrs[:-1])


def test_edges_of_branches_loops_and_handlers():
    bc = decode(branchy.__code__)
    cfg = ControlFlowGraph.from_bytecode(bc)
    preds = cfg.predecessors()
    loop_head = next(b for b in cfg.blocks if b.instrs[0].name == "FOR_ITER")
    assert any(p.index > loop_head.index for p in preds[loop_head.index])  # the back edge
    handler_blocks = {cfg.block_at(i.handler.target).index for i in bc.instructions() if i.handler}
    assert handler_blocks
    # the except clause starts with PUSH_EXC_INFO, its cleanup with COPY (of the saved lasti)
    assert {cfg.blocks[i].instrs[0].name for i in handler_blocks} == {"PUSH_EXC_INFO", "COPY"}
    for index in handler_blocks:
        assert preds[index]  # reached through handler edges
    cond = next(b for b in cfg.blocks if b.jump_label() is not None and b.falls_through())
    assert len(cfg.successors(cond)) >= 2
    assert {b.index for b in cfg.reachable()} == {b.index for b in cfg.blocks}


def test_unreachable_blocks_and_consecutive_labels():
    a, b = Label(), Label()
    items = [Instr("JUMP_FORWARD", b), Instr("NOP"), a, b, Instr("LOAD_CONST", None), Instr("RETURN_VALUE")]
    cfg = ControlFlowGraph.from_instrs(items)
    assert [len(blk.instrs) for blk in cfg.blocks] == [1, 1, 2]
    assert cfg.blocks[2].labels == [a, b] and cfg.block_at(a) is cfg.block_at(b)
    assert [blk.index for blk in cfg.reachable()] == [0, 2]
    assert make_code(cfg.to_instrs(), add_prologue=False).co_stacksize == 1
