"""Control-flow graph level: an abstract instruction list split into basic blocks.

A block starts at the first instruction, at every label and after every jump or
instruction that does not fall through; it ends at the next such point. Jumps keep their
``Label`` arguments (the block a label starts is found through ``block_at``), so the graph
converts back to the same instruction list with ``to_instrs``.

Invariants: blocks are in list order and every instruction is in exactly one block; only a
block's last instruction may jump or end the flow; ``labels`` of a block are the labels
placed directly before its first instruction; successors are the fallthrough block (if the
last instruction falls through), the jump target and the handler targets of the block's
instructions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ._bytecode import Bytecode
from ._instr import Instr, Label
from .versions import TABLE

__all__ = ["BasicBlock", "ControlFlowGraph"]


@dataclass(slots=True, eq=False)
class BasicBlock:
    """A run of instructions entered only at the top and left only at the bottom."""

    index: int
    labels: list[Label] = field(default_factory=list)
    instrs: list[Instr] = field(default_factory=list)

    def falls_through(self) -> bool:
        """True if control can continue into the next block."""
        return not self.instrs or self.instrs[-1].has_fallthrough()

    def jump_label(self) -> Label | None:
        """The label the last instruction jumps to, if it is a jump."""
        last = self.instrs[-1] if self.instrs else None
        return last.arg if last is not None and last.is_jump() else None


@dataclass(slots=True)
class ControlFlowGraph:
    """Basic blocks of an instruction list, in order (see the module docstring)."""

    blocks: list[BasicBlock]
    _by_label: dict[Label, BasicBlock] = field(default_factory=dict, repr=False)

    @classmethod
    def from_instrs(cls, items: Iterable[Instr | Label]) -> ControlFlowGraph:
        """Split an instruction list into blocks."""
        blocks: list[BasicBlock] = []
        current: BasicBlock | None = None
        for item in items:
            if isinstance(item, Label):
                if current is None or current.instrs:
                    current = BasicBlock(len(blocks))
                    blocks.append(current)
                current.labels.append(item)
                continue
            if current is None:
                current = BasicBlock(len(blocks))
                blocks.append(current)
            current.instrs.append(item)
            if item.is_jump() or item.name in TABLE.no_fallthrough:
                current = None
        graph = cls(blocks)
        graph._by_label = {lab: b for b in blocks for lab in b.labels}
        return graph

    @classmethod
    def from_bytecode(cls, bc: Bytecode) -> ControlFlowGraph:
        """Split ``bc.instrs`` into blocks."""
        return cls.from_instrs(bc.instrs)

    def to_instrs(self) -> list[Instr | Label]:
        """The instruction list again: each block's labels, then its instructions."""
        out: list[Instr | Label] = []
        for block in self.blocks:
            out += block.labels
            out += block.instrs
        return out

    def block_at(self, label: Label) -> BasicBlock:
        """The block that ``label`` starts."""
        return self._by_label[label]

    def successors(self, block: BasicBlock) -> list[BasicBlock]:
        """Fallthrough block, jump target, then handler targets (no duplicates)."""
        out: list[BasicBlock] = []
        if block.falls_through() and block.index + 1 < len(self.blocks):
            out.append(self.blocks[block.index + 1])
        target = block.jump_label()
        if target is not None:
            out.append(self._by_label[target])
        for ins in block.instrs:
            if ins.handler is not None:
                out.append(self._by_label[ins.handler.target])
        seen: set[int] = set()
        return [b for b in out if not (b.index in seen or seen.add(b.index))]

    def predecessors(self) -> dict[int, list[BasicBlock]]:
        """For each block index, the blocks that lead to it."""
        preds: dict[int, list[BasicBlock]] = {b.index: [] for b in self.blocks}
        for block in self.blocks:
            for succ in self.successors(block):
                preds[succ.index].append(block)
        return preds

    def reachable(self) -> list[BasicBlock]:
        """Blocks reachable from the first one, in list order."""
        if not self.blocks:
            return []
        seen = {0}
        work = [self.blocks[0]]
        while work:
            for succ in self.successors(work.pop()):
                if succ.index not in seen:
                    seen.add(succ.index)
                    work.append(succ)
        return [b for b in self.blocks if b.index in seen]
