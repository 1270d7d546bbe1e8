"""Index expressions as source text (``_printer``): Python's floor division and remainder in
every language, through Triton's own operators only where they agree with Python's."""

from __future__ import annotations

import itertools

import sympy

from kiln.inductor._ir import loop_vars
from kiln.inductor._printer import CPP, PYTHON
from kiln.inductor.triton._ops import TRITON
from kiln.symshapes import FloorDiv, Mod

x0, x1 = loop_vars("x", 2)
(r0,) = loop_vars("r", 1)
size = sympy.Symbol("s0", integer=True, nonnegative=True)  # a size, as the ShapeEnv makes it
offset = sympy.Symbol("u0", integer=True)  # an integer of either sign


def test_a_nonnegative_dividend_over_a_positive_divisor_uses_tritons_operators():
    assert TRITON(FloorDiv(r0 + 128 * x0, 512)) == "((r0 + (128 * x0)) // 512)"
    assert TRITON(Mod(r0 + 128 * x0, 512)) == "((r0 + (128 * x0)) % 512)"
    assert TRITON(FloorDiv(size + 24, 25)) == "((24 + s0) // 25)"
    assert TRITON(1024 * Mod(x1, size + 1)) == "(1024 * (x1 % (1 + s0)))"
    assert TRITON(FloorDiv(FloorDiv(x1, 3) + Mod(x0, 7), 5)) == "(((x1 // 3) + (x0 % 7)) // 5)"


def test_a_dividend_of_unknown_sign_keeps_pythons_floor_division():
    assert TRITON(FloorDiv(1023 - x1, 512)) == "kiln_floordiv_int((1023 + (-1 * x1)), 512)"
    assert TRITON(Mod(x0 + offset, 64)) == "kiln_mod_int((u0 + x0), 64)"
    assert TRITON(FloorDiv(x0, offset)) == "kiln_floordiv_int(x0, u0)"  # (a divisor of unknown sign)
    assert TRITON(FloorDiv(x0, size)) == "kiln_floordiv_int(x0, s0)"  # (a size may be 0)
    assert TRITON(FloorDiv(-1 - x0, 4)) == "kiln_floordiv_int((-1 + (-1 * x0)), 4)"


def test_the_other_languages_are_unchanged():
    assert CPP(FloorDiv(r0 + 128 * x0, 512)) == "kiln_fdiv((r0 + (128 * x0)), 512)"
    assert PYTHON(Mod(x0 + offset, 64)) == "((u0 + x0) % 64)"


def test_each_spelling_agrees_with_python_where_it_is_used():
    """Truncating division and remainder (Triton's, C's) against Python's over dividends of
    both signs: equal wherever the printer uses them (dividend >= 0, divisor > 0), and the
    expressions of unknown sign are exactly where they differ."""
    def truncating(a, b):
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return q, a - q * b

    for a, b in itertools.product(range(-40, 41), [1, 3, 7, 512, -5]):
        agrees = truncating(a, b) == (a // b, a % b)
        if a >= 0 and b > 0:
            assert agrees, (a, b)
        if a < 0 and b > 0 and a % b:
            assert not agrees, (a, b)
