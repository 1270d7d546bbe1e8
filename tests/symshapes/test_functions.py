"""FloorDiv and TruncToInt: Python semantics and exact simplifications."""

from __future__ import annotations

import math

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln.symshapes import FloorDiv, Mod, TruncToInt

s = sympy.Symbol("s0", integer=True, nonnegative=True)


@settings(deadline=None)
@given(st.integers(-1000, 1000), st.integers(-50, 50).filter(bool))
def test_floordiv_numbers(a, b):
    assert FloorDiv(sympy.Integer(a), sympy.Integer(b)) == a // b


@settings(deadline=None)
@given(st.integers(0, 500), st.integers(1, 12), st.integers(1, 12), st.integers(-30, 30))
def test_floordiv_rewrites_are_exact(x, k, d, c):
    expr = FloorDiv(k * d * s + c, sympy.Integer(d))
    assert expr.xreplace({s: sympy.Integer(x)}) == (k * d * x + c) // d
    nested = FloorDiv(FloorDiv(s + c, sympy.Integer(k)), sympy.Integer(d))
    assert nested.xreplace({s: sympy.Integer(x)}) == ((x + c) // k) // d


def test_floordiv_simplifies():
    assert FloorDiv(4 * s + 3, sympy.Integer(4)) == s
    assert FloorDiv(s, sympy.Integer(1)) == s
    assert FloorDiv(s, s) == 1
    with pytest.raises(ZeroDivisionError):
        FloorDiv(s, sympy.Integer(0))


@settings(deadline=None)
@given(st.floats(-1e6, 1e6, allow_nan=False))
def test_trunc(x):
    assert TruncToInt(sympy.Float(x)) == math.trunc(x)


t = sympy.Symbol("t", integer=True)


@settings(deadline=None)
@given(st.integers(-40, 40), st.integers(-12, 12).filter(bool), st.integers(-5, 5), st.integers(-30, 30))
def test_floordiv_by_symbol_is_exact(x, y, k, c):
    expr = FloorDiv(k * s * t + s * s + c, s)  # splits off k*t + s, keeps c // s
    value = expr.xreplace({s: sympy.Integer(y), t: sympy.Integer(x)})
    assert value == (k * y * x + y * y + c) // y
    assert FloorDiv(s * t, s) == t


@settings(deadline=None)
@given(st.integers(-40, 40), st.integers(-12, 12).filter(bool), st.integers(-5, 5), st.integers(-30, 30))
def test_mod_rewrites_are_exact(x, y, k, c):
    expr = Mod(k * s * t + s * s + c, s)
    assert expr.xreplace({s: sympy.Integer(y), t: sympy.Integer(x)}) == (k * y * x + y * y + c) % y
    negative = Mod(s, -2 * s)  # sympy.Mod simplifies this to s: wrong for Python's %
    assert negative.xreplace({s: sympy.Integer(y)}) == y % (-2 * y)


@settings(deadline=None)
@given(st.integers(-1000, 1000), st.integers(-50, 50).filter(bool))
def test_mod_numbers(a, b):
    assert Mod(sympy.Integer(a), sympy.Integer(b)) == a % b
