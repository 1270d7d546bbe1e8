"""Integer size and index expressions (sympy, with kiln.symshapes' ``FloorDiv``/``Mod``) as
source text: one walk of the expression, two spellings (``CPP`` for kernels, ``PYTHON`` for
the wrapper). Floor division and remainder have Python's meaning in both; exact quotients
the ShapeEnv knows (``s0/4``) print as floor division."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import sympy

from kiln.symshapes import FloorDiv, Mod

__all__ = ["CPP", "PYTHON", "SizePrinter"]


@dataclass(frozen=True, slots=True)
class SizePrinter:
    language: str
    floordiv: str  # format of a // b, with {a} and {b}
    mod: str
    big_int: str  # format of an integer beyond 32 bits
    max_fn: str
    min_fn: str
    variadic: bool  # whether max/min take any number of arguments (else nested pairs)
    # where the dividend is provably nonnegative and the divisor positive (sympy's assumptions:
    # kernel loop variables and sizes are nonnegative), the language's own operators, which
    # then agree with Python's; None: ``floordiv`` and ``mod`` always
    nonnegative_floordiv: str | None = None
    nonnegative_mod: str | None = None

    def __call__(self, expr: Any) -> str:
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            v = int(expr)
            return self.big_int.format(v) if abs(v) >= 2**31 else str(v)
        if expr.is_Symbol:
            return expr.name
        if expr.is_Add or expr.is_Mul:
            num, den = sympy.fraction(expr) if expr.is_Mul else (expr, 1)
            if den != 1:
                return self._floordiv(num, den)
            op = " + " if expr.is_Add else " * "
            return "(" + op.join(self(t) for t in sorted(expr.args, key=sympy.default_sort_key)) + ")"
        if isinstance(expr, sympy.floor):
            num, den = sympy.fraction(sympy.together(expr.args[0]))
            return self._floordiv(num, den)
        if isinstance(expr, FloorDiv):
            return self._floordiv(*expr.args)
        if isinstance(expr, (sympy.Mod, Mod)):
            a, b = expr.args
            form = self.nonnegative_mod if self.nonnegative_mod and _nonnegative_by_positive(a, b) else self.mod
            return form.format(a=self(a), b=self(b))
        if isinstance(expr, (sympy.Max, sympy.Min)):
            fn = self.max_fn if isinstance(expr, sympy.Max) else self.min_fn
            args = [self(a) for a in sorted(expr.args, key=sympy.default_sort_key)]
            if self.variadic:
                return f"{fn}({', '.join(args)})"
            out = args[0]
            for a in args[1:]:
                out = f"{fn}({out}, {a})"
            return out
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
            return "(" + " * ".join([self(expr.base)] * int(expr.exp)) + ")"
        raise ValueError(f"no {self.language} for the size expression {expr}")

    def _floordiv(self, a: Any, b: Any) -> str:
        form = self.nonnegative_floordiv if self.nonnegative_floordiv and _nonnegative_by_positive(a, b) \
            else self.floordiv
        return form.format(a=self(a), b=self(b))


@functools.lru_cache(maxsize=4096)
def _nonnegative_by_positive(a: Any, b: Any) -> bool:
    """Whether sympy proves ``a >= 0`` and ``b > 0`` (truncating division and remainder then
    agree with Python's floor division and remainder). Cached: a kernel prints the same
    divisions many times, and sympy's sign queries are slow."""
    return bool(sympy.sympify(a).is_nonnegative) and bool(sympy.sympify(b).is_positive)


# C++: division and remainder never trap (a zero divisor gives 0, in loops that then run no
# iteration); see kiln_fdiv / kiln_pmod in the kernel header
CPP = SizePrinter("C++", "kiln_fdiv({a}, {b})", "kiln_pmod({a}, {b})", "{}LL", "std::max<int64_t>",
                  "std::min<int64_t>", variadic=False)
PYTHON = SizePrinter("Python", "({a} // {b})", "({a} % {b})", "{}", "max", "min", variadic=True)
