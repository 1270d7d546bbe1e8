"""Value ranges: closed intervals that bound what a symbolic expression can evaluate to.

A ``ValueRange`` is ``[lower, upper]`` over Python numbers (``int``, ``Fraction``, ``float``
with ``math.inf`` for an open end). ``bound(expr, ranges)`` walks a sympy expression bottom
up and returns a range that contains every value the expression takes when each symbol
ranges over its own interval; ``ranges`` may also bound compound terms (``s0 // 2``), which
then intersect what the walk computes for them. Booleans are ranges within ``[0, 1]``.

Invariants:
- Soundness: ``bound`` may be loose, never wrong. Anything it does not understand gets the
  full range ``(-inf, inf)`` (or ``[0, 1]`` for booleans).
- ``decide(relational, ranges)`` answers True/False only when the range proves it, else None.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import sympy

from kiln.symshapes._functions import FloorDiv, Mod, TruncToInt

__all__ = ["ValueRange", "bound", "decide", "decide_by_shift", "simplify_with_ranges"]

Number = int | Fraction | float
INF = math.inf


@dataclass(slots=True, frozen=True)
class ValueRange:
    """A closed interval ``[lower, upper]``; ``-inf``/``inf`` mark an unbounded end."""

    lower: Number
    upper: Number

    def __post_init__(self) -> None:
        if self.lower > self.upper:
            raise ValueError(f"empty value range [{self.lower}, {self.upper}]")

    @staticmethod
    def full() -> ValueRange:
        return _FULL

    @staticmethod
    def point(value: Number) -> ValueRange:
        return ValueRange(value, value)

    def is_point(self) -> bool:
        return self.lower == self.upper

    def contains(self, value: Number) -> bool:
        return self.lower <= value <= self.upper

    def intersect(self, other: ValueRange) -> ValueRange:
        return ValueRange(max(self.lower, other.lower), min(self.upper, other.upper))

    def union(self, other: ValueRange) -> ValueRange:
        return ValueRange(min(self.lower, other.lower), max(self.upper, other.upper))

    def __str__(self) -> str:
        return f"[{self.lower}, {self.upper}]"


_FULL = ValueRange(-INF, INF)
_D = sympy.Symbol("_d", real=True)
_BOOL = ValueRange(0, 1)
_TRUE = ValueRange(1, 1)
_FALSE = ValueRange(0, 0)


def _mul(a: Number, b: Number) -> Number:
    if a == 0 or b == 0:
        return 0
    return a * b


def _div(a: Number, b: Number) -> Number:
    if b in (INF, -INF):
        return 0 if a not in (INF, -INF) else (INF if (a > 0) == (b > 0) else -INF)
    if isinstance(a, float) or isinstance(b, float):
        return a / b
    return Fraction(a) / Fraction(b)


def _floor(x: Number) -> Number:
    return x if x in (INF, -INF) else math.floor(x)


def _ceil(x: Number) -> Number:
    return x if x in (INF, -INF) else math.ceil(x)


def _corners(op, a: ValueRange, b: ValueRange) -> ValueRange:
    values = [op(x, y) for x, y in itertools.product((a.lower, a.upper), (b.lower, b.upper))]
    return ValueRange(min(values), max(values))


def _add(a: ValueRange, b: ValueRange) -> ValueRange:
    lower = -INF if -INF in (a.lower, b.lower) else a.lower + b.lower
    upper = INF if INF in (a.upper, b.upper) else a.upper + b.upper
    return ValueRange(lower, upper)


def _pow(base: ValueRange, exp: sympy.Expr) -> ValueRange:
    if not exp.is_Integer:
        return _FULL
    e = int(exp)
    if e == 0:
        return ValueRange.point(1)
    if e < 0:
        if base.lower > 0:
            return ValueRange(_div(1, base.upper ** -e) if base.upper != INF else 0, _div(1, base.lower ** -e))
        return _FULL
    lo = base.lower ** e if base.lower != -INF else (-INF if e % 2 else INF)
    hi = base.upper**e
    if e % 2 == 0 and base.lower < 0 < base.upper:
        return ValueRange(0, max(lo, hi))
    return ValueRange(min(lo, hi), max(lo, hi))


def _floordiv(a: ValueRange, b: ValueRange) -> ValueRange:
    if b.lower > 0 or b.upper < 0:
        q = _corners(_div, a, b)
        return ValueRange(_floor(q.lower), _floor(q.upper))
    return _FULL


def _mod(a: ValueRange, b: ValueRange) -> ValueRange:
    if b.lower > 0:
        if a.lower >= 0 and a.upper < b.lower:
            return a
        upper = b.upper - 1 if isinstance(b.upper, int) else b.upper
        return ValueRange(0, upper)
    if b.upper < 0:
        return ValueRange(b.lower + 1, 0)
    return _FULL


def _compare(diff: ValueRange, rel: type) -> ValueRange:
    if rel is sympy.Eq or rel is sympy.Ne:
        if diff.is_point() and diff.lower == 0:
            result = _TRUE
        elif not diff.contains(0):
            result = _FALSE
        else:
            return _BOOL
        return result if rel is sympy.Eq else (_FALSE if result is _TRUE else _TRUE)
    # diff = lhs - rhs; Lt/Le/Gt/Ge against zero.
    checks = {
        sympy.StrictLessThan: (diff.upper < 0, diff.lower >= 0),
        sympy.LessThan: (diff.upper <= 0, diff.lower > 0),
        sympy.StrictGreaterThan: (diff.lower > 0, diff.upper <= 0),
        sympy.GreaterThan: (diff.lower >= 0, diff.upper < 0),
    }
    true, false = checks[rel]
    return _TRUE if true else _FALSE if false else _BOOL


def bound(expr: sympy.Basic, ranges: Mapping[sympy.Symbol, ValueRange]) -> ValueRange:
    """Return a ``ValueRange`` containing every value of ``expr`` under ``ranges``."""
    if expr.is_Integer:
        return ValueRange.point(int(expr))
    if expr.is_Rational:
        return ValueRange.point(Fraction(int(expr.p), int(expr.q)))
    if expr.is_Float:
        return ValueRange.point(float(expr))
    if expr is sympy.true:
        return _TRUE
    if expr is sympy.false:
        return _FALSE
    if expr.is_Symbol:
        return ranges.get(expr, _FULL)
    if expr in (sympy.oo, -sympy.oo):
        return ValueRange.point(INF if expr is sympy.oo else -INF)
    known = ranges.get(expr)
    result = _bound_compound(expr, ranges)
    return result if known is None else result.intersect(known)


def _bound_compound(expr: sympy.Basic, ranges: Mapping[sympy.Basic, ValueRange]) -> ValueRange:
    args = expr.args
    if expr.is_Add:
        result = bound(args[0], ranges)
        for arg in args[1:]:
            result = _add(result, bound(arg, ranges))
        return result
    if expr.is_Mul:
        result = bound(args[0], ranges)
        for arg in args[1:]:
            result = _corners(_mul, result, bound(arg, ranges))
        return result
    if expr.is_Pow:
        return _pow(bound(args[0], ranges), args[1])
    if isinstance(expr, FloorDiv):
        return _floordiv(bound(args[0], ranges), bound(args[1], ranges))
    if isinstance(expr, Mod):
        return _mod(bound(args[0], ranges), bound(args[1], ranges))
    if isinstance(expr, (sympy.Min, sympy.Max)):
        pick = min if isinstance(expr, sympy.Min) else max
        parts = [bound(arg, ranges) for arg in args]
        return ValueRange(pick(p.lower for p in parts), pick(p.upper for p in parts))
    if isinstance(expr, (sympy.floor, sympy.ceiling, TruncToInt)):
        inner = bound(args[0], ranges)
        if isinstance(expr, sympy.floor):
            return ValueRange(_floor(inner.lower), _floor(inner.upper))
        if isinstance(expr, sympy.ceiling):
            return ValueRange(_ceil(inner.lower), _ceil(inner.upper))
        return ValueRange(min(_ceil(inner.lower), 0) if inner.lower < 0 else _floor(inner.lower),
                          max(_floor(inner.upper), 0) if inner.upper > 0 else _ceil(inner.upper))
    if isinstance(expr, sympy.Abs):
        inner = bound(args[0], ranges)
        if inner.lower >= 0:
            return inner
        if inner.upper <= 0:
            return ValueRange(-inner.upper, -inner.lower)
        return ValueRange(0, max(-inner.lower, inner.upper))
    if isinstance(expr, sympy.Piecewise):
        parts = [bound(value, ranges) for value, _ in args]
        result = parts[0]
        for part in parts[1:]:
            result = result.union(part)
        return result
    if expr.is_Relational:
        return _compare(bound(expr.lhs - expr.rhs, ranges), type(expr))
    if isinstance(expr, sympy.Not):
        inner = bound(args[0], ranges)
        return ValueRange(1 - inner.upper, 1 - inner.lower)
    if isinstance(expr, (sympy.And, sympy.Or)):
        parts = [bound(arg, ranges) for arg in args]
        pick = min if isinstance(expr, sympy.And) else max
        return ValueRange(pick(p.lower for p in parts), pick(p.upper for p in parts))
    if expr.is_Boolean:
        return _BOOL
    return _FULL


def decide(expr: sympy.Basic, ranges: Mapping[sympy.Symbol, ValueRange]) -> bool | None:
    """True/False when ``ranges`` prove the boolean ``expr`` either way, else None."""
    result = bound(expr, ranges)
    if result == _TRUE:
        return True
    if result == _FALSE:
        return False
    return None


def decide_by_shift(expr: sympy.Basic, ranges: Mapping[sympy.Symbol, ValueRange]) -> bool | None:
    """Decide a polynomial relation by shifting each symbol to its lower bound.

    With ``s = lower + t`` (``t >= 0``) a polynomial whose expanded coefficients all share a
    sign has that sign for every admissible value; this settles relations such as
    ``s0 < s0**2`` that plain interval arithmetic cannot (it loses the correlation).
    """
    if not expr.is_Relational:
        return None
    diff = expr.lhs - expr.rhs
    if not diff.free_symbols or not diff.is_polynomial(*diff.free_symbols):
        return None
    diff = sympy.expand(diff)
    shift = {}
    for sym in diff.free_symbols:
        r = ranges.get(sym, _FULL)
        if r.lower == -INF or not isinstance(r.lower, int):
            return None
        shift[sym] = sym + r.lower
    try:
        poly = sympy.Poly(sympy.expand(diff.xreplace(shift)), *shift)
    except sympy.PolynomialError:
        return None
    coeffs = [c for c in poly.coeffs() if c != 0]
    if not coeffs or not all(c.is_Rational for c in coeffs):
        return None
    constant = sympy.sympify(poly.as_expr().xreplace(dict.fromkeys(shift, 0)))
    if not constant.is_Rational:
        return None
    nonneg = all(c >= 0 for c in coeffs)
    nonpos = all(c <= 0 for c in coeffs)
    if nonneg:
        low = ValueRange(int(constant), INF) if constant.is_Integer else ValueRange(Fraction(int(constant.p), int(constant.q)), INF)
        return decide(type(expr)(_D, 0), {_D: low})
    if nonpos:
        high = ValueRange(-INF, int(constant)) if constant.is_Integer else ValueRange(-INF, Fraction(int(constant.p), int(constant.q)))
        return decide(type(expr)(_D, 0), {_D: high})
    return None


def simplify_with_ranges(expr: sympy.Basic, ranges: Mapping[sympy.Symbol, ValueRange]) -> sympy.Basic:
    """Drop Min/Max arguments, Mod and FloorDiv that the ranges make trivial."""
    targets = expr.atoms(sympy.Min, sympy.Max, Mod, FloorDiv)
    if not targets:
        return expr
    mapping = {}
    for atom in targets:
        args = atom.args
        if isinstance(atom, (sympy.Min, sympy.Max)):
            bounds = [bound(a, ranges) for a in args]
            pick = 0 if isinstance(atom, sympy.Max) else 1
            for i, b in enumerate(bounds):
                if all((b.lower >= o.upper) if pick == 0 else (b.upper <= o.lower) for j, o in enumerate(bounds) if j != i):
                    mapping[atom] = args[i]
                    break
        else:
            a, b = bound(args[0], ranges), bound(args[1], ranges)
            if b.lower > 0 and a.lower >= 0 and a.upper < b.lower:
                mapping[atom] = args[0] if isinstance(atom, Mod) else sympy.Integer(0)
    return expr.xreplace(mapping) if mapping else expr
