"""Integer-valued sympy functions with Python semantics.

sympy's own ``floor(a / b)`` goes through rationals and simplifies poorly; shapes need
Python's ``//`` as an atom that folds on integers and cancels exact factors. ``Mod`` is
kiln's too: sympy's ``Mod`` simplifies some symbolic cases against Python's sign convention
(``sympy.Mod(s, -2*s)`` becomes ``s``, while ``2 % -4 == -2``), so kiln's only applies rewrites
that hold for every integer value. It keeps the name ``Mod`` (printing, and consumers such
as kiln.guards that translate nodes by class name).

Invariants:
- ``FloorDiv(a, b)`` evaluates to ``a // b`` whenever both arguments are integers, and every
  rewrite it performs is exact for integer-valued arguments (``(4*x + 3) // 4 == x`` for
  any integer ``x``); with a symbolic ``b`` it only splits off terms that are exact integer
  multiples of ``b`` (``(s0*s1) // s0 == s1``).
- ``Mod(a, b)`` evaluates to ``a % b`` on numbers (the result has the divisor's sign) and
  only drops terms of ``a`` that are integer multiples of ``b``.
- ``TruncToInt(x)`` is ``math.trunc(x)`` on numbers.
"""

from __future__ import annotations

import math

import sympy

__all__ = ["FloorDiv", "Mod", "TruncToInt"]


class FloorDiv(sympy.Function):
    """Python floor division ``a // b`` of integer-valued expressions."""

    nargs = (2,)
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if b.is_zero:
            raise ZeroDivisionError("integer division or modulo by zero")
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        if b == 1:
            return a
        if a.is_zero:
            return sympy.Integer(0)
        if a == b:
            return sympy.Integer(1)
        if not b.is_Integer:
            return _divide_exact_terms(a, b)
        divisor = int(b)
        if isinstance(a, FloorDiv) and a.args[1].is_Integer and divisor > 0 and int(a.args[1]) > 0:
            # floor(floor(x / p) / q) == floor(x / (p * q)) for positive integers p, q.
            return FloorDiv(a.args[0], a.args[1] * b)
        exact, rest = [], []
        for term in sympy.Add.make_args(a):
            coeff, factor = term.as_coeff_Mul()
            if coeff.is_Integer and int(coeff) % divisor == 0 and factor.is_integer:
                exact.append(sympy.Integer(int(coeff) // divisor) * factor)
            else:
                rest.append(term)
        if not exact:
            return None
        return sympy.Add(*exact) + FloorDiv(sympy.Add(*rest), b)

    def _eval_is_nonnegative(self):
        a, b = self.args
        if a.is_nonnegative and b.is_positive:
            return True
        return None

    def _sympystr(self, printer):
        a, b = (printer.parenthesize(arg, 40) for arg in self.args)
        return f"({a}//{b})"


def _split_multiples(a, b):
    """Terms of ``a`` that are integer multiples of ``b`` (as quotients), and the rest."""
    exact, rest = [], []
    for term in sympy.Add.make_args(a):
        quotient = term / b
        if quotient.is_integer and sympy.fraction(quotient)[1] == 1:
            exact.append(quotient)
        else:
            rest.append(term)
    return exact, rest


class Mod(sympy.Function):
    """Python's ``a % b`` (the result takes the sign of ``b``)."""

    nargs = (2,)

    @classmethod
    def eval(cls, a, b):
        if b.is_zero:
            raise ZeroDivisionError("integer division or modulo by zero")
        if a.is_Number and b.is_Number:
            if a.is_Integer and b.is_Integer:
                return sympy.Integer(int(a) % int(b))
            return sympy.Float(float(a) % float(b))
        if a.is_zero or a == b or (b.is_Integer and abs(int(b)) == 1 and a.is_integer):
            return sympy.Integer(0)
        if isinstance(a, Mod) and a.args[1] == b:
            return a
        exact, rest = _split_multiples(a, b)
        if exact:
            return Mod(sympy.Add(*rest), b)
        return None

    def _eval_is_integer(self):
        a, b = self.args
        return True if a.is_integer and b.is_integer else None

    def _eval_is_nonnegative(self):
        return True if self.args[1].is_positive else None


def _divide_exact_terms(a, b):
    """``(q*b + R) // b == q + R // b`` whenever ``q`` is integer-valued (since
    ``floor(x + q) == floor(x) + q``), for a symbolic ``b`` dividing some terms exactly."""
    exact, rest = _split_multiples(a, b)
    if not exact:
        return None
    return sympy.Add(*exact) + FloorDiv(sympy.Add(*rest), b)


class TruncToInt(sympy.Function):
    """``math.trunc`` of a real expression: the integer part, rounding toward zero."""

    nargs = (1,)
    is_integer = True

    @classmethod
    def eval(cls, x):
        if x.is_Number:
            if x in (sympy.oo, -sympy.oo, sympy.nan):
                return None
            return sympy.Integer(int(x) if x.is_Rational else math.trunc(float(x)))
        if x.is_integer:
            return x
        return None
