"""Stack depth by flow analysis over concrete instructions.

The maximum value-stack depth is found by walking every path from the first instruction:
a fallthrough applies ``stack_effect(jump=False)``, a jump ``stack_effect(jump=True)``
(both from the running interpreter's ``dis``), and an instruction covered by an exception
handler also reaches the handler with ``depth + lasti + 1`` entries (the unwound stack, the
saved offset when ``lasti``, the exception). Instructions never reached do not count —
which is what CPython's compiler does after removing unreachable blocks.

Invariant: the result is the maximum over reachable instructions of the depth before and
after each instruction; a path reaching negative depth raises ``StackDepthError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._table import VersionTable
from .versions import TABLE

__all__ = ["FlowInstr", "StackDepthError", "basic_block_starts", "compute_stacksize", "depths_before"]


class StackDepthError(ValueError):
    """The instruction list pops more than it pushes on some path."""


@dataclass(slots=True)
class FlowInstr:
    """What the analysis needs of one instruction; targets are instruction indices."""

    name: str
    opcode: int
    oparg: int
    jump_target: int | None = None
    handler_target: int | None = None
    handler_depth: int = 0  # depth + lasti + 1 at the handler


# memo of stack effects by (table, opcode, oparg, jump); cleared when it grows past a bound
_EFFECTS: dict[tuple[int, int, int | None, bool], int] = {}
_EFFECTS_LIMIT = 1 << 16


def _effect(ins: FlowInstr, jump: bool, table: VersionTable) -> int:
    key = (id(table), ins.opcode, ins.oparg, jump)
    effect = _EFFECTS.get(key)
    if effect is None:
        oparg = ins.oparg if table.has_arg(ins.opcode) else None
        effect = table.stack_effect(ins.opcode, oparg, jump=jump)
        if len(_EFFECTS) >= _EFFECTS_LIMIT:
            _EFFECTS.clear()
        _EFFECTS[key] = effect
    return effect


def basic_block_starts(flow: Sequence[FlowInstr], table: VersionTable = TABLE) -> list[int]:
    """Indices where basic blocks start: 0, jump/handler targets, after jumps and exits."""
    starts = {0}
    for i, ins in enumerate(flow):
        if ins.jump_target is not None:
            starts.add(ins.jump_target)
            starts.add(i + 1)
        if ins.handler_target is not None:
            starts.add(ins.handler_target)
        if ins.name in table.no_fallthrough:
            starts.add(i + 1)
    return sorted(s for s in starts if s < len(flow))


def _propagate(flow: Sequence[FlowInstr], table: VersionTable) -> tuple[list[int], int]:
    """Depth before each instruction (-1: unreachable) and the maximum depth."""
    n = len(flow)
    best = [-1] * n
    work: list[tuple[int, int]] = [(0, 0)] if n else []
    maxdepth = 0
    while work:
        i, depth = work.pop()
        while i < n and best[i] < depth:
            best[i] = depth
            ins = flow[i]
            if ins.handler_target is not None:
                maxdepth = max(maxdepth, ins.handler_depth)
                work.append((ins.handler_target, ins.handler_depth))
            if ins.jump_target is not None:
                target_depth = depth + _effect(ins, True, table)
                if target_depth < 0:
                    raise StackDepthError(f"stack underflow at instruction {i} ({ins.name}) jumping")
                maxdepth = max(maxdepth, target_depth)
                work.append((ins.jump_target, target_depth))
            if ins.name in table.no_fallthrough:
                break
            depth += _effect(ins, False, table)
            if depth < 0:
                raise StackDepthError(f"stack underflow at instruction {i} ({ins.name})")
            maxdepth = max(maxdepth, depth)
            i += 1
    return best, maxdepth


def compute_stacksize(flow: Sequence[FlowInstr], table: VersionTable = TABLE) -> int:
    """Maximum stack depth of the instruction list (see the module docstring)."""
    return _propagate(flow, table)[1]


def depths_before(flow: Sequence[FlowInstr], table: VersionTable = TABLE) -> list[int | None]:
    """Stack depth before each instruction; None for instructions no path reaches.

    Where paths disagree (never in compiler output) the largest depth is reported.
    """
    return [d if d >= 0 else None for d in _propagate(flow, table)[0]]
