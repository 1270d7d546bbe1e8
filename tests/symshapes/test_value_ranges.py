"""Value ranges: soundness against sampled values, and decisions."""

from __future__ import annotations

import math

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln.symshapes import FloorDiv, Mod, ValueRange
from kiln.symshapes._value_ranges import bound, decide, decide_by_shift, simplify_with_ranges

a, b = sympy.symbols("a b", integer=True)
EXPRS = [
    a + b, a * b, a - 3 * b, a**2, FloorDiv(a, 3), Mod(a, 4), sympy.Min(a, b), sympy.Max(a, b) - a,
    sympy.Abs(a - b), FloorDiv(a * b + 7, 2), a**3 - b,
]


@settings(deadline=None)
@given(st.integers(-20, 20), st.integers(0, 15), st.integers(-20, 20), st.integers(0, 15), st.data())
def test_bound_is_sound(alo, awidth, blo, bwidth, data):
    ranges = {a: ValueRange(alo, alo + awidth), b: ValueRange(blo, blo + bwidth)}
    av = data.draw(st.integers(alo, alo + awidth))
    bv = data.draw(st.integers(blo, blo + bwidth))
    for expr in EXPRS:
        r = bound(expr, ranges)
        value = expr.xreplace({a: sympy.Integer(av), b: sympy.Integer(bv)})
        assert r.contains(int(value)), (expr, r, value)


def test_unbounded_and_decide():
    ranges = {a: ValueRange(2, math.inf)}
    assert bound(a * 3 + 1, ranges) == ValueRange(7, math.inf)
    assert decide(sympy.Gt(a, 1), ranges) is True
    assert decide(sympy.Eq(a, 1), ranges) is False
    assert decide(sympy.Gt(a, 5), ranges) is None
    assert decide(sympy.Lt(a, a**2), ranges) is None  # intervals lose the correlation
    assert decide_by_shift(sympy.Lt(a, a**2), ranges) is True
    assert bound(b, ranges) == ValueRange.full()


def test_simplify_with_ranges():
    ranges = {a: ValueRange(2, math.inf), b: ValueRange(0, 3)}
    assert simplify_with_ranges(sympy.Max(1, a), ranges) == a
    assert simplify_with_ranges(Mod(b, 4), ranges) == b
    assert simplify_with_ranges(FloorDiv(b, 4), ranges) == 0
    assert simplify_with_ranges(sympy.Min(a, b + 5), ranges) == sympy.Min(a, b + 5)
