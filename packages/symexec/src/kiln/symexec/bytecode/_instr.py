"""Abstract instructions: an opcode name plus the *meaning* of its argument.

An ``Instr`` never holds an oparg: a jump holds the ``Label`` it goes to, LOAD_CONST holds the
constant, LOAD_FAST the variable's name, LOAD_GLOBAL a ``GlobalArg`` with its push_null flag,
COMPARE_OP a ``CompareArg``, BINARY_OP the operator's symbol. The assembler turns meanings
into opargs. ``Label`` objects stand in the instruction list where a jump or an exception
handler lands; they compare by identity.

Invariants:
- ``Instr.name`` is a real opcode of the running version or a version-neutral jump name
  (``POP_JUMP_IF_*``, ``JUMP``, ``JUMP_NO_INTERRUPT``); 3.11's directional conditional jump
  names are normalized to the neutral ones on construction.
- ``Instr.arg`` matches the name's ``ArgKind``; instructions without argument hold ``NO_ARG``.
- ``Instr.handler`` is the exception handler covering the instruction (None: not covered);
  consecutive instructions with the same handler target form one exception-table entry.
- Instructions are identities (``eq=False``): ``same_as`` compares their contents.
- ``Instr.offset`` is informational (where a decoded instruction came from); the assembler
  ignores it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._table import ArgKind, VersionTable
from .versions import TABLE

__all__ = [
    "NO_ARG",
    "AttrArg",
    "CompareArg",
    "ExceptHandler",
    "GlobalArg",
    "Instr",
    "Label",
    "Location",
    "SuperAttrArg",
    "const_key",
    "label_positions",
]


class _NoArg:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_ARG"


NO_ARG: Any = _NoArg()


class Label:
    """A position in an instruction list; jump and handler targets. Identity-compared."""

    __slots__ = ("hint",)

    def __init__(self, hint: str = "") -> None:
        self.hint = hint  # free text for readers (disassembly names labels L1, L2, ...)

    def __repr__(self) -> str:
        return f"<Label {self.hint or hex(id(self))}>"


@dataclass(frozen=True, slots=True)
class Location:
    """Source span of an instruction (PEP 626 / PEP 657); columns are 0-based UTF-8 offsets."""

    lineno: int
    end_lineno: int | None = None
    col_offset: int | None = None
    end_col_offset: int | None = None


@dataclass(frozen=True, slots=True)
class ExceptHandler:
    """Where an exception raised by a covered instruction goes.

    ``depth`` is the value-stack depth the handler unwinds to; ``lasti`` says whether the
    offset of the raising instruction is pushed before the exception.
    """

    target: Label
    depth: int
    lasti: bool = False


@dataclass(frozen=True, slots=True)
class GlobalArg:
    """LOAD_GLOBAL's argument: the name and whether a NULL is pushed (for a call)."""

    name: str
    push_null: bool = False


@dataclass(frozen=True, slots=True)
class AttrArg:
    """LOAD_ATTR's argument: the name and (3.12+) whether it loads a method + self/NULL pair."""

    name: str
    method: bool = False


@dataclass(frozen=True, slots=True)
class SuperAttrArg:
    """LOAD_SUPER_ATTR's argument (3.12+): name, method load, ``super(cls, obj)`` form."""

    name: str
    method: bool = False
    two_arg: bool = False


@dataclass(frozen=True, slots=True)
class CompareArg:
    """COMPARE_OP's argument: the operator and (3.13+) whether the result is coerced to bool."""

    op: str
    to_bool: bool = False


_LITERAL_TYPES = (type(None), type(...), bool, int, str, bytes)


def const_key(value: Any) -> Any:
    """Identity of a constant for sharing a co_consts slot.

    Literal values are shared by type and value like the compiler does (``0``, ``0.0``,
    ``False`` and ``-0.0`` stay apart; NaNs with the same repr share); any other object
    (code objects, and whatever generated code loads with LOAD_CONST: functions, tensors,
    modules) by identity, so that ``is`` still holds and no ``__eq__`` is ever called.
    """
    kind = type(value)
    if kind in (tuple, frozenset):
        keys = [const_key(v) for v in value]
        return (kind, tuple(keys) if kind is tuple else frozenset(keys))
    if kind in (float, complex):
        return (kind, repr(value))
    if kind in _LITERAL_TYPES:
        return (kind, value)
    return (kind, id(value))


_SHORTHANDS: dict[ArgKind, type] = {
    ArgKind.GLOBAL: GlobalArg,
    ArgKind.ATTR: AttrArg,
    ArgKind.SUPER_ATTR: SuperAttrArg,
    ArgKind.COMPARE: CompareArg,
}
_EXPECTED: dict[ArgKind, type | tuple[type, ...]] = {
    ArgKind.INT: int,
    ArgKind.NAME: str,
    ArgKind.GLOBAL: GlobalArg,
    ArgKind.ATTR: AttrArg,
    ArgKind.SUPER_ATTR: SuperAttrArg,
    ArgKind.LOCAL: str,
    ArgKind.LOCAL_PAIR: tuple,
    ArgKind.JUMP: Label,
    ArgKind.COMPARE: CompareArg,
    ArgKind.BINARY_OP: str,
    ArgKind.BOOL: (bool, int),
}


def _check_arg(name: str, kind: ArgKind, arg: Any, table: VersionTable) -> Any:
    """Validate ``arg`` for ``kind``; return it normalized (str shorthands to arg objects)."""
    if kind is ArgKind.NONE:
        if arg is not NO_ARG:
            raise TypeError(f"{name} takes no argument, got {arg!r}")
        return arg
    if kind is ArgKind.CONST:
        if arg is NO_ARG:
            raise TypeError(f"{name} needs an argument ({kind.value})")
        return arg
    if isinstance(arg, str) and kind in _SHORTHANDS:
        arg = _SHORTHANDS[kind](arg)
    if not isinstance(arg, _EXPECTED[kind]):
        raise TypeError(f"{name} needs a {kind.value} argument, got {arg!r}")
    if kind is ArgKind.INT:
        if isinstance(arg, bool) or arg < 0:
            raise ValueError(f"{name} needs a non-negative int, got {arg!r}")
    elif kind is ArgKind.BINARY_OP:
        if arg not in table.binary_ops:
            raise ValueError(f"unknown binary operator {arg!r} for {name}")
    elif kind is ArgKind.COMPARE:
        if arg.op not in table.compare_ops:
            raise ValueError(f"unknown comparison {arg.op!r} for {name}")
    elif kind is ArgKind.LOCAL_PAIR:
        if not (len(arg) == 2 and all(isinstance(a, str) for a in arg)):
            raise TypeError(f"{name} needs a pair of local names, got {arg!r}")
    elif kind is ArgKind.BOOL:
        arg = bool(arg)
    return arg


_KINDS = TABLE.arg_kinds
_NEUTRAL = TABLE.neutral_names


@dataclass(slots=True, eq=False)
class Instr:
    """One abstract instruction: ``Instr("LOAD_GLOBAL", GlobalArg("len", push_null=True))``.

    Compared and hashed by identity (so instructions can key dicts, ``list.index`` finds
    this very instruction, and a constant's ``__eq__`` is never called); ``same_as``
    compares name, argument, location and handler.
    """

    name: str
    arg: Any = NO_ARG
    location: Location | None = field(default=None, kw_only=True)
    handler: ExceptHandler | None = field(default=None, kw_only=True)
    # byte offset of the opcode in the code it was decoded from (as dis and frame.f_lasti
    # count: after any EXTENDED_ARG prefix); None for new instructions; not compared
    offset: int | None = field(default=None, kw_only=True, compare=False)

    def __post_init__(self) -> None:
        name = self.name = _NEUTRAL.get(self.name, self.name)
        kind = _KINDS.get(name)
        if kind is None:
            raise ValueError(
                f"{name} is not an instruction of CPython {'.'.join(map(str, TABLE.version))}"
            )
        self.arg = _check_arg(name, kind, self.arg, TABLE)

    @property
    def kind(self) -> ArgKind:
        """What the argument means (see ``ArgKind``)."""
        return _KINDS[self.name]

    @property
    def lineno(self) -> int | None:
        """The instruction's source line, or None when it has no location."""
        return self.location.lineno if self.location is not None else None

    def is_jump(self) -> bool:
        """True if the argument is a jump target ``Label``."""
        return _KINDS[self.name] is ArgKind.JUMP

    def has_fallthrough(self) -> bool:
        """False for returns, raises and unconditional jumps."""
        return self.name not in TABLE.no_fallthrough and self.name not in ("JUMP", "JUMP_NO_INTERRUPT")

    def same_as(self, other: Instr) -> bool:
        """True if ``other`` has the same name, argument, location and handler.

        Constants compare by type and equality (identity for objects without literal
        values), so ``LOAD_CONST 0`` is not the same as ``LOAD_CONST False``.
        """
        if (self.name, self.location, self.handler) != (other.name, other.location, other.handler):
            return False
        if self.kind is ArgKind.CONST:
            return const_key(self.arg) == const_key(other.arg)
        return self.arg is other.arg or self.arg == other.arg

    def __repr__(self) -> str:
        arg = "" if self.arg is NO_ARG else f", {self.arg!r}"
        return f"Instr({self.name!r}{arg})"


def unchecked_instr(name: str, arg: Any, location: Location | None, handler: ExceptHandler | None,
                    offset: int | None) -> Instr:
    """An Instr built without validation, for the decoder (whose meanings are valid by
    construction: the name comes from the table and the argument from its kind)."""
    ins = object.__new__(Instr)
    ins.name = name
    ins.arg = arg
    ins.location = location
    ins.handler = handler
    ins.offset = offset
    return ins


def label_positions(items: list[Instr | Label]) -> dict[Label, int]:
    """Each label of ``items`` and the index (among the instructions only, labels not counted)
    of the instruction it marks."""
    positions: dict[Label, int] = {}
    count = 0
    for item in items:
        if isinstance(item, Label):
            positions[item] = count
        else:
            count += 1
    return positions
