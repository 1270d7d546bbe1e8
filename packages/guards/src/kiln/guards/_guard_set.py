"""GuardSet: a deduplicated collection of guards and the order they are checked in.

Order rules, in priority:

1. Safety: a guard reading a source comes after every type-establishing guard (TypeMatch,
   IdMatch, EqualsMatch, IsNone, ModuleStructureMatch, TensorMatch) on the source's
   ancestors — and, unless it establishes the type itself, on the source. So
   ``L['self'].layers`` is read only once ``L['self']`` is known to be the traced module
   class, and ``x == 3`` is never asked of an object of unknown type.
2. Cheap first: otherwise guards run by ascending ``cost`` (kinds declare it), ties in
   insertion order, so the common failure (a changed int, a new shape) is found quickly.

Invariants: adding an equal guard twice keeps one; iteration is insertion order; ``ordered``
is deterministic for a given insertion sequence.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kiln.guards._base import Guard
from kiln.guards._sources import Source

__all__ = ["GuardSet", "order_guards"]


def order_guards(guards: Iterable[Guard]) -> list[Guard]:
    """``guards`` (deduplicated) in check order: safe, then cheap first; see module docs."""
    unique = list(dict.fromkeys(guards))
    rank = {g: i for i, g in enumerate(unique)}
    by_source: dict[Source, list[Guard]] = {}
    for g in unique:
        if g.establishes_type:
            for s in g.sources:
                by_source.setdefault(s, []).append(g)

    def key(g: Guard) -> tuple[int, int]:
        return (g.cost, rank[g])

    def prerequisites(g: Guard) -> list[Guard]:
        out: list[Guard] = []
        for s in g.sources:
            chain = s.chain()
            for node in chain[:-1] if g.establishes_type else chain:
                out += sorted(by_source.get(node, ()), key=key)
        return [p for p in out if p is not g]

    order: list[Guard] = []
    done: set[Guard] = set()
    active: set[Guard] = set()

    def visit(g: Guard) -> None:
        if g in done or g in active:
            return
        active.add(g)
        for p in prerequisites(g):
            visit(p)
        active.discard(g)
        done.add(g)
        order.append(g)

    for g in sorted(unique, key=key):
        visit(g)
    return order


class GuardSet:
    """Guards to hold together; ``compile`` turns them into one checker function."""

    __slots__ = ("_guards",)

    def __init__(self, guards: Iterable[Guard] = ()) -> None:
        self._guards: dict[Guard, None] = {}
        self.extend(guards)

    def add(self, guard: Guard) -> bool:
        """Add one guard; return False when an equal guard was already there."""
        if not isinstance(guard, Guard):
            raise TypeError(f"expected a Guard, got {type(guard).__name__}")
        if guard in self._guards:
            return False
        self._guards[guard] = None
        return True

    def discard(self, guard: Guard) -> None:
        """Remove ``guard`` if present (a fact the trace itself changed, replaced by the new one)."""
        self._guards.pop(guard, None)

    def extend(self, guards: Iterable[Guard]) -> None:
        """Add each of ``guards``."""
        for g in guards:
            self.add(g)

    def __len__(self) -> int:
        return len(self._guards)

    def __iter__(self) -> Iterator[Guard]:
        return iter(self._guards)

    def __contains__(self, guard: object) -> bool:
        return guard in self._guards

    def ordered(self) -> list[Guard]:
        """The guards in the order the checker runs them."""
        return order_guards(self._guards)

    def compile(self, globals: dict[str, Any] | None = None, *, native: bool = True) -> Any:
        """One checker function ``check(L, G=globals) -> bool``; see ``compile_guards``."""
        from kiln.guards._compiler import compile_guards

        return compile_guards(self.ordered(), globals, native=native)

    def explain(self, L: dict[str, Any], G: dict[str, Any] | None = None) -> str | None:
        """The first failing guard on (L, G) as text, or None when all hold."""
        from kiln.guards._explain import explain_failure

        return explain_failure(self.ordered(), L, G)
