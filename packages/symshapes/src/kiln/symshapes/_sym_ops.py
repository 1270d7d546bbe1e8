"""The operation table shared by kiln's SymInt/SymFloat/SymBool and the torch SymNode bridge.

Each entry maps an operation name (the method names torch's SymNode protocol uses: ``add``,
``int_floordiv``, ``float_truediv``, ``sym_min``, ...) to an ``OpRule``: how to build the
sympy expression, how to compute the result on concrete hints (Python semantics), and the
kind of the result (``int``, ``float`` or ``bool``).

Invariants:
- For every rule and all operand values where Python defines the operation,
  ``rule.sympy_fn(*map(sympy.sympify, values))`` evaluates to ``rule.py_fn(*values)``.
- Expressions are built by ``lru_cache``d builders: sympy expressions are immutable and
  hashable, and shapes repeat the same arithmetic over and over.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import sympy
from sympy.core.relational import Relational
from sympy.logic.boolalg import BooleanAtom, BooleanFunction

from kiln.symshapes._functions import FloorDiv, Mod, TruncToInt

__all__ = ["OpRule", "is_boolean_expr", "sym_op_rules", "to_sympy"]

Kind = Literal["int", "float", "bool", "same"]


@dataclass(slots=True, frozen=True)
class OpRule:
    """How one operation builds its expression and its hint, and what kind it returns."""

    sympy_fn: Callable[..., sympy.Basic]
    py_fn: Callable[..., object]
    kind: Kind


def to_sympy(value: object) -> sympy.Basic:
    """Convert a Python bool/int/float to the matching sympy atom."""
    if value is True:
        return sympy.true
    if value is False:
        return sympy.false
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, float):
        return sympy.Float(value)
    raise TypeError(f"cannot convert {type(value).__name__} to a symbolic value")


def is_boolean_expr(expr: sympy.Basic) -> bool:
    """True for relations, logic functions and true/false (a Symbol is never boolean here)."""
    return isinstance(expr, (Relational, BooleanFunction, BooleanAtom))


def _as_expr(b: sympy.Basic) -> sympy.Basic:
    """Booleans used in arithmetic count as 0/1 (Python's ``True + True == 2``)."""
    if b is sympy.true:
        return sympy.Integer(1)
    if b is sympy.false:
        return sympy.Integer(0)
    if is_boolean_expr(b):
        return sympy.Piecewise((sympy.Integer(1), b), (sympy.Integer(0), True))
    return b


def _cached(fn: Callable[..., sympy.Basic]) -> Callable[..., sympy.Basic]:
    return lru_cache(maxsize=4096)(fn)


def _truediv(a, b):
    if b.is_zero:
        raise ZeroDivisionError("division by zero")
    return a / b


def _float_floordiv(a, b):
    if b.is_zero:
        raise ZeroDivisionError("float floor division by zero")
    if a.is_Number and b.is_Number:
        # Python's float // floors the exact quotient; a 53-bit a / b can round up to it.
        return sympy.Float(float(a) // float(b))
    return sympy.floor(a / b)


def _mod(a, b):
    if b.is_zero:
        raise ZeroDivisionError("integer modulo by zero")
    return Mod(a, b)


def _pow_natural(a, b):
    return sympy.Pow(a, b)


def _ite(cond, then, other):
    if cond is sympy.true:
        return then
    if cond is sympy.false:
        return other
    return sympy.Piecewise((then, cond), (other, True))


def _py_ite(cond, then, other):
    return then if cond else other


def _py_and(a, b):
    return bool(a) and bool(b)


def _py_or(a, b):
    return bool(a) or bool(b)


def _sym_float(a):
    return a


def _relation(cls):
    """``cls(a, b)`` without sympy's evaluation, except where the answer is plain: two numbers,
    or one expression on both sides. sympy would try to decide every other
    relation through its assumption system (signs of differences, derivatives), the
    dominant cost of a symbolic capture; kiln decides them with value ranges instead
    (``ShapeEnv.statically_known``), when a decision is asked for."""
    def build(a, b):
        if (a.is_Number and b.is_Number) or a == b:
            return cls(a, b)
        return cls(a, b, evaluate=False)

    return build


_RULES = {
    "add": (operator.add, operator.add, "same"),
    "sub": (operator.sub, operator.sub, "same"),
    "mul": (operator.mul, operator.mul, "same"),
    "int_floordiv": (FloorDiv, operator.floordiv, "int"),
    "float_floordiv": (_float_floordiv, operator.floordiv, "float"),
    "mod": (_mod, operator.mod, "same"),
    "int_truediv": (_truediv, operator.truediv, "float"),
    "float_truediv": (_truediv, operator.truediv, "float"),
    "pow_by_natural": (_pow_natural, operator.pow, "int"),
    "float_pow": (sympy.Pow, operator.pow, "float"),
    "sym_min": (sympy.Min, builtins.min, "same"),
    "sym_max": (sympy.Max, builtins.max, "same"),
    "eq": (_relation(sympy.Eq), operator.eq, "bool"),
    "ne": (_relation(sympy.Ne), operator.ne, "bool"),
    "lt": (_relation(sympy.Lt), operator.lt, "bool"),
    "le": (_relation(sympy.Le), operator.le, "bool"),
    "gt": (_relation(sympy.Gt), operator.gt, "bool"),
    "ge": (_relation(sympy.Ge), operator.ge, "bool"),
    "and_": (sympy.And, _py_and, "bool"),
    "or_": (sympy.Or, _py_or, "bool"),
    "sym_not": (sympy.Not, operator.not_, "bool"),
    "neg": (operator.neg, operator.neg, "same"),
    "pos": (operator.pos, operator.pos, "same"),
    "abs": (sympy.Abs, builtins.abs, "same"),
    "floor": (sympy.floor, math.floor, "int"),
    "ceil": (sympy.ceiling, math.ceil, "int"),
    "trunc": (TruncToInt, math.trunc, "int"),
    "sym_int": (TruncToInt, math.trunc, "int"),
    "sym_float": (_sym_float, float, "float"),
    "sym_ite": (_ite, _py_ite, "same"),
}

_ARITHMETIC = {"add", "sub", "mul", "int_floordiv", "mod", "pow_by_natural", "neg", "pos", "abs"}


def _build(name: str, fn: Callable[..., sympy.Basic]) -> Callable[..., sympy.Basic]:
    if name in _ARITHMETIC:
        return _cached(lambda *args: fn(*map(_as_expr, args)))
    return _cached(fn)


sym_op_rules: dict[str, OpRule] = {
    name: OpRule(_build(name, sympy_fn), py_fn, kind)
    for name, (sympy_fn, py_fn, kind) in _RULES.items()
}
