"""The schema of a per-version opcode table.

Everything the bytecode layer knows about one CPython version's bytecode is one
``VersionTable`` value, built by ``py311``/``py312``/``py313`` and selected once by
``versions``. The decoder, assembler, stack-depth analysis and disassembler read facts only
from the table they are given; none of them asks which Python is running.

Invariants:
- ``opmap`` holds the opcodes ``co_code`` can hold (see ``real_opmap``); pseudo-instructions
  of the compiler and instrumented opcodes are not in it. ``jump_families`` holds the version-neutral jump names that the assembler
  resolves to a real opcode by the jump's direction.
- ``arg_kinds`` has an entry for every name in ``opmap`` and ``jump_families`` (built by
  ``complete_kinds``: an opcode with an argument that no group names is ``ArgKind.INT``,
  one without is ``ArgKind.NONE``).
- ``jump_directions`` maps every real jump opcode name to +1 (target after the instruction)
  or -1 (target before it); offsets count from the end of the instruction and its caches.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["ArgKind", "VersionTable", "complete_kinds", "real_opmap", "stack_effect_with"]


class ArgKind(enum.Enum):
    """What the argument of an instruction means at the abstract level."""

    # members are singletons compared by identity; the C-level hash keeps table lookups cheap
    __hash__ = object.__hash__

    NONE = "none"  # no argument (the oparg is 0)
    INT = "int"  # a plain integer (counts, flags)
    CONST = "const"  # a constant object (index into co_consts)
    NAME = "name"  # a str (index into co_names)
    GLOBAL = "global"  # GlobalArg: name + push_null low bit
    ATTR = "attr"  # AttrArg: name + method low bit (3.12+)
    SUPER_ATTR = "super_attr"  # SuperAttrArg: name + method and two_arg low bits
    LOCAL = "local"  # a str naming a fast local, cell or free variable (localsplus index)
    LOCAL_PAIR = "local_pair"  # (str, str): two localsplus indices in 4-bit halves (3.13)
    JUMP = "jump"  # a Label
    COMPARE = "compare"  # CompareArg
    BINARY_OP = "binary_op"  # the operator's symbol, e.g. "+" or "+="
    BOOL = "bool"  # IS_OP / CONTAINS_OP invert flag


@dataclass(frozen=True, slots=True, eq=False)
class VersionTable:
    """Facts about one CPython version's bytecode (see the module docstring).

    Compared and hashed by identity: there is one table per version.
    """

    version: tuple[int, int]
    opmap: Mapping[str, int]
    opname: tuple[str, ...]
    arg_opcodes: frozenset[int]
    cache_entries: Mapping[str, int]
    arg_kinds: Mapping[str, ArgKind]
    jump_directions: Mapping[str, int]
    # version-neutral jump name -> (forward opcode name, backward opcode name); None where the
    # version cannot encode that direction
    jump_families: Mapping[str, tuple[str | None, str | None]]
    # real opcode name -> the version-neutral name decoding gives it
    neutral_names: Mapping[str, str]
    no_fallthrough: frozenset[str]
    compare_ops: tuple[str, ...]
    binary_ops: tuple[str, ...]
    encode_compare: Callable[[str, bool], int]
    decode_compare: Callable[[int], tuple[str, bool]]
    # number of flag bits below the name index for GLOBAL / ATTR / SUPER_ATTR arguments
    name_flag_bits: Mapping[str, int]
    stack_effect: Callable[..., int]
    # True if the compiler writes one location-table run per group of adjacent instructions
    # with equal locations (3.12+); False if it writes one per instruction (3.11)
    linetable_merges_runs: bool
    # CALL's stack layout: True for [callable, NULL/self, args...] (3.13), False for
    # [NULL/method, callable/self, args...] (3.11, 3.12)
    null_after_callable: bool
    # True if POP_JUMP_IF_TRUE/FALSE need an exact bool on the stack (3.13: TO_BOOL first)
    jump_if_needs_bool: bool
    extended_arg: int
    cache: int

    def __repr__(self) -> str:
        return f"<VersionTable CPython {self.version[0]}.{self.version[1]}>"

    def has_arg(self, opcode: int) -> bool:
        """True if the real opcode ``opcode`` takes an oparg."""
        return opcode in self.arg_opcodes

    def arg_kind(self, name: str) -> ArgKind:
        """The meaning of ``name``'s argument (real or version-neutral opcode name)."""
        return self.arg_kinds[name]

    def knows(self, name: str) -> bool:
        """True if ``name`` is a real opcode or a version-neutral jump of this version."""
        return name in self.opmap or name in self.jump_families

    def caches(self, name: str) -> int:
        """Number of inline CACHE code units after the real opcode ``name``."""
        return self.cache_entries.get(name, 0)


def real_opmap(opmap: Mapping[str, int]) -> dict[str, int]:
    """The opcodes of an ``opcode.opmap`` that ``co_code`` can hold.

    Pseudo-instructions (>= 256) exist only inside the compiler; INSTRUMENTED_* opcodes and
    ENTER_EXECUTOR only in the live, adaptive copy of the code (``co_code`` is deoptimized).
    """
    return {
        name: op for name, op in opmap.items()
        if op < 256 and not name.startswith("INSTRUMENTED_") and name != "ENTER_EXECUTOR"
    }


def complete_kinds(opmap: Mapping[str, int], arg_opcodes: frozenset[int],
                   families: Mapping[str, object],
                   groups: Mapping[ArgKind, tuple[str, ...]]) -> dict[str, ArgKind]:
    """``{name: kind}`` for every real opcode and neutral jump name of a version.

    ``groups`` lists the names per kind (names this version lacks are ignored); the rest
    are INT or NONE by whether the opcode takes an argument; neutral jumps are JUMP.
    """
    kinds = {name: ArgKind.INT if op in arg_opcodes else ArgKind.NONE for name, op in opmap.items()}
    kinds.update({name: kind for kind, names in groups.items() for name in names if name in opmap})
    kinds.update({name: ArgKind.JUMP for name in families})
    return kinds


def stack_effect_with(overrides: Mapping[str, int], opname: tuple[str, ...]) -> Callable[..., int]:
    """``dis.stack_effect`` of the running interpreter with fixed effects for some opcodes.

    RETURN_GENERATOR is the case: ``dis`` gives 0 on 3.11/3.12, but when the generator is
    resumed the sent value is on the stack (the POP_TOP after it pops it).
    """
    import dis

    by_opcode = {opname.index(name): effect for name, effect in overrides.items()}

    def stack_effect(opcode: int, oparg: int | None = None, *, jump: bool | None = None) -> int:
        effect = by_opcode.get(opcode)
        if effect is not None:
            return effect
        return dis.stack_effect(opcode, oparg, jump=jump)

    return stack_effect
