"""Shape guards: recorded decisions, the facts they teach, and the result of produce_guards.

A ``ShapeGuard`` is a sympy Boolean that held on the example values when a decision was made
(it is stored already oriented: deciding ``s0 > 4`` as False records ``s0 <= 4``).
``learn_facts`` reads a guard and returns what the ShapeEnv can exploit from then on:
replacements (``s1 == s0`` unifies, ``s0 == 8`` specializes), tighter value ranges for single
symbols, and divisibility (``Mod(e, d) == 0``).

Invariants:
- ``learn_facts`` never returns a fact that the guard does not imply. Range facts may be
  about a compound term (``s0 // 2 >= 3`` bounds the term ``s0 // 2``); replacements
  are only ever learned for symbols by the ShapeEnv.
- A replacement always removes its newest symbol (highest creation index), preferring
  unbacked symbols, so the oldest symbol of a class stays the canonical one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

import sympy

from kiln.symshapes._functions import Mod

__all__ = ["Facts", "ProducedGuards", "ShapeGuard", "learn_facts"]


@dataclass(slots=True, frozen=True)
class ShapeGuard:
    """A relation that held on the example sizes; ``origin`` says which decision made it."""

    expr: sympy.Basic
    origin: str = ""

    def __str__(self) -> str:
        return f"{self.expr}" + (f"  # {self.origin}" if self.origin else "")


@dataclass(slots=True, frozen=True)
class ProducedGuards:
    """What a compiled artifact must check about its inputs' sizes before it may run.

    guards: simplified sympy Booleans over the bound symbols; all must hold.
    sources: each symbol that appears in ``guards`` mapped to the caller's source object
        (as given to ``create_symbol``); a checker evaluates each source on the new inputs,
        substitutes the values for the symbols and evaluates every guard.
    hints: each bound symbol's example value (the traced size), for explanations.
    runtime_asserts: relations on data-dependent (unbacked) symbols that the traced code
        assumed; they cannot be checked before running, only inside it.
    specialized: sources created dynamic whose value the trace nevertheless fixed (an
        ``int()`` or an equality with a constant), mapped to that value; a frontend that
        was asked to keep them dynamic (``mark_dynamic``) reports these.
    """

    guards: tuple[sympy.Basic, ...]
    sources: dict[sympy.Symbol, object]
    hints: dict[sympy.Symbol, int | float] = field(default_factory=dict)
    runtime_asserts: tuple[sympy.Basic, ...] = ()
    specialized: dict[object, int | float] = field(default_factory=dict)

    def check(self, values: Mapping[object, int | float]) -> list[sympy.Basic]:
        """Return the guards that fail when each source takes ``values[source]``."""
        binding = {sym: sympy.sympify(values[src]) for sym, src in self.sources.items()}
        return [g for g in self.guards if g.xreplace(binding) is not sympy.true]


@dataclass(slots=True)
class Facts:
    """What one guard teaches: replacements, range bounds and divisibility."""

    replacements: dict[sympy.Symbol, sympy.Expr] = field(default_factory=dict)
    lower: dict[sympy.Symbol, int | Fraction | float] = field(default_factory=dict)
    upper: dict[sympy.Symbol, int | Fraction | float] = field(default_factory=dict)
    excluded: dict[sympy.Symbol, int] = field(default_factory=dict)
    divisible: list[sympy.Expr] = field(default_factory=list)


def _linear_single(diff: sympy.Expr) -> tuple[sympy.Expr, Fraction, Fraction] | None:
    """``diff == a*t + c`` for one non-constant term ``t`` (a symbol or any other
    expression, e.g. ``s0 // 2``) and rationals a != 0, c: return (t, a, c)."""
    term_of, a, c = None, Fraction(0), Fraction(0)
    for term, coeff in diff.as_coefficients_dict().items():
        if not coeff.is_Rational:
            return None
        value = Fraction(int(coeff.p), int(coeff.q))
        if term is sympy.S.One:
            c = value
        elif term_of is None:
            term_of, a = term, value
        else:
            return None
    return (term_of, a, c) if term_of is not None and a else None


_FLIP = {
    sympy.StrictLessThan: sympy.StrictGreaterThan,
    sympy.LessThan: sympy.GreaterThan,
    sympy.StrictGreaterThan: sympy.StrictLessThan,
    sympy.GreaterThan: sympy.LessThan,
}


def _learn_range(rel: type, sym: sympy.Symbol, a: Fraction, c: Fraction, facts: Facts, is_int: bool) -> None:
    k = -c / a
    if a < 0 and rel in _FLIP:
        rel = _FLIP[rel]
    integral = k.denominator == 1
    if rel is sympy.Eq:
        if integral or not is_int:
            facts.replacements[sym] = sympy.Integer(int(k)) if integral else sympy.Rational(k.numerator, k.denominator)
    elif rel is sympy.Ne:
        if integral:
            facts.excluded[sym] = int(k)
    elif not is_int:
        if rel in (sympy.StrictLessThan, sympy.LessThan):
            facts.upper[sym] = k
        else:
            facts.lower[sym] = k
    elif rel is sympy.StrictLessThan:
        facts.upper[sym] = math.ceil(k) - 1
    elif rel is sympy.LessThan:
        facts.upper[sym] = math.floor(k)
    elif rel is sympy.StrictGreaterThan:
        facts.lower[sym] = math.floor(k) + 1
    elif rel is sympy.GreaterThan:
        facts.lower[sym] = math.ceil(k)


def _learn_equality(diff: sympy.Expr, order: Callable[[sympy.Symbol], tuple], facts: Facts) -> None:
    for sym in sorted(diff.free_symbols, key=order, reverse=True):
        coeff = diff.coeff(sym)
        if coeff not in (sympy.S.One, sympy.S.NegativeOne):
            continue
        rest = sympy.expand(diff - coeff * sym)
        if sym in rest.free_symbols:
            continue
        facts.replacements[sym] = -rest / coeff
        return


def learn_facts(guard: sympy.Basic, order: Callable[[sympy.Symbol], tuple], is_int: Callable[[sympy.Symbol], bool]) -> Facts:
    """Facts implied by ``guard``; ``order`` ranks symbols (the highest is replaced first)."""
    facts = Facts()
    parts = guard.args if isinstance(guard, sympy.And) else (guard,)
    for part in parts:
        if not part.is_Relational:
            continue
        rel = type(part)
        if rel is sympy.Eq and part.rhs == 0 and isinstance(part.lhs, Mod):
            facts.divisible.append(part.lhs)
            continue
        if rel is sympy.Eq and part.lhs == 0 and isinstance(part.rhs, Mod):
            facts.divisible.append(part.rhs)
            continue
        diff = part.lhs - part.rhs
        single = _linear_single(diff)
        if single is not None:
            sym, a, c = single
            _learn_range(rel, sym, a, c, facts, is_int(sym))
        elif rel is sympy.Eq:
            _learn_equality(diff, order, facts)
    return facts
