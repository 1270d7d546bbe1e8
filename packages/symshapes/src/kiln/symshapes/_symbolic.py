"""SymInt, SymFloat and SymBool: Python numbers whose value is a sympy expression.

Each holds an expression, the ``ShapeEnv`` that owns its symbols, and its hint (the value on
the example inputs, None when it depends on unbacked symbols). Arithmetic and comparisons
build new symbolic values through the shared operation table (``_sym_ops``) with Python's
semantics (``//`` floors, ``%`` takes the divisor's sign, ``/`` gives a float, mixed int/float
promotes to float). Converting to a concrete value (``bool()``, ``int()``, ``float()``,
``operator.index``) asks the ShapeEnv, which records a guard unless value ranges decide.

Invariants:
- ``x.hint`` equals what Python would compute from the operands' hints.
- A result whose expression is a constant is returned as a plain ``int``/``float``/``bool``.
- Symbolic values are unhashable (equality is symbolic) and never mix ShapeEnvs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from kiln.symshapes._sym_ops import sym_op_rules, to_sympy

if TYPE_CHECKING:
    from kiln.symshapes._shape_env import ShapeEnv

__all__ = [
    "SymBool",
    "SymFloat",
    "SymInt",
    "expect_true",
    "guard_bool",
    "guard_int",
    "guard_or_false",
    "guard_or_true",
    "guard_size_oblivious",
    "statically_known_true",
    "sym_float",
    "sym_int",
    "sym_ite",
    "sym_max",
    "sym_min",
    "sym_not",
    "wrap",
]


class _Sym:
    __slots__ = ("env", "expr", "hint")
    kind = ""

    def __init__(self, expr: sympy.Basic, env: ShapeEnv, hint: object) -> None:
        self.expr = expr
        self.env = env
        self.hint = hint

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return str(self.expr)

    def __str__(self) -> str:
        return str(self.expr)

    # arithmetic ------------------------------------------------------------
    def __add__(self, other):
        return _binary("add", self, other)

    def __radd__(self, other):
        return _binary("add", other, self)

    def __sub__(self, other):
        return _binary("sub", self, other)

    def __rsub__(self, other):
        return _binary("sub", other, self)

    def __mul__(self, other):
        return _binary("mul", self, other)

    def __rmul__(self, other):
        return _binary("mul", other, self)

    def __floordiv__(self, other):
        return _binary("floordiv", self, other)

    def __rfloordiv__(self, other):
        return _binary("floordiv", other, self)

    def __mod__(self, other):
        return _binary("mod", self, other)

    def __rmod__(self, other):
        return _binary("mod", other, self)

    def __truediv__(self, other):
        return _binary("truediv", self, other)

    def __rtruediv__(self, other):
        return _binary("truediv", other, self)

    def __pow__(self, other):
        return _binary("pow", self, other)

    def __rpow__(self, other):
        return _binary("pow", other, self)

    def __neg__(self):
        return _unary("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _unary("abs", self)

    # comparisons -----------------------------------------------------------
    def __eq__(self, other):
        return _binary("eq", self, other)

    def __ne__(self, other):
        return _binary("ne", self, other)

    def __lt__(self, other):
        return _binary("lt", self, other)

    def __le__(self, other):
        return _binary("le", self, other)

    def __gt__(self, other):
        return _binary("gt", self, other)

    def __ge__(self, other):
        return _binary("ge", self, other)

    def __bool__(self) -> bool:
        return bool(self.env.evaluate(sympy.Ne(self.expr, 0), self.hint != 0 if self.hint is not None else None, origin="bool()"))


class SymInt(_Sym):
    """A symbolic Python ``int``."""

    __slots__ = ()
    kind = "int"

    def __int__(self) -> int:
        return guard_int(self)

    def __index__(self) -> int:
        return guard_int(self)

    def __float__(self) -> float:
        return float(guard_int(self))

    def __trunc__(self):
        return self

    def __floor__(self):
        return self

    def __ceil__(self):
        return self

    def __round__(self, ndigits=None):
        return self


class SymFloat(_Sym):
    """A symbolic Python ``float``."""

    __slots__ = ()
    kind = "float"

    def __float__(self) -> float:
        return float(self.env.evaluate(self.expr, self.hint, origin="float()"))

    def __int__(self) -> int:
        return guard_int(_unary("trunc", self))

    def __trunc__(self):
        return _unary("trunc", self)

    def __floor__(self):
        return _unary("floor", self)

    def __ceil__(self):
        return _unary("ceil", self)

    def is_integer(self) -> SymBool | bool:
        return _binary("eq", _unary("floor", self), self)


class SymBool(_Sym):
    """A symbolic Python ``bool``; ``bool(b)`` decides it (and may record a guard)."""

    __slots__ = ()
    kind = "bool"

    def __bool__(self) -> bool:
        return bool(self.env.evaluate(self.expr, self.hint, origin="bool()"))

    def __int__(self) -> int:
        return int(bool(self))

    def __and__(self, other):
        return _binary("and_", self, other)

    def __rand__(self, other):
        return _binary("and_", other, self)

    def __or__(self, other):
        return _binary("or_", self, other)

    def __ror__(self, other):
        return _binary("or_", other, self)

    def __invert__(self):
        return _unary("sym_not", self)


_CLASSES = {"int": SymInt, "float": SymFloat, "bool": SymBool}


def wrap(expr: sympy.Basic, hint: object, kind: str, env: ShapeEnv) -> SymInt | SymFloat | SymBool | int | float | bool:
    """A Sym* of ``kind`` for ``expr``, or the plain Python value when ``expr`` is constant."""
    if expr is sympy.true or expr is sympy.false:
        return expr is sympy.true
    if expr.is_Number:
        if kind == "int" and expr.is_Integer:
            return int(expr)
        if kind == "float":
            return float(expr)
        if kind == "bool":
            return bool(expr)
    return _CLASSES[kind](expr, env, hint)


def _operand(value: object) -> tuple[sympy.Basic, object, str, ShapeEnv | None] | None:
    if isinstance(value, _Sym):
        return value.expr, value.hint, value.kind, value.env
    if isinstance(value, bool):
        return to_sympy(value), value, "bool", None
    if isinstance(value, int):
        return to_sympy(value), value, "int", None
    if isinstance(value, float):
        return to_sympy(value), value, "float", None
    return None


def _method(op: str, kinds: tuple[str, str], hints: tuple[object, object], env: ShapeEnv) -> str:
    floating = "float" in kinds
    if op == "floordiv":
        return "float_floordiv" if floating else "int_floordiv"
    if op == "truediv":
        return "float_truediv" if floating else "int_truediv"
    if op == "pow":
        if floating:
            return "float_pow"
        return "pow_by_natural" if hints[1] is None or hints[1] >= 0 else "float_pow"
    return op


def _binary(op: str, a: object, b: object):
    left, right = _operand(a), _operand(b)
    if left is None or right is None:
        return NotImplemented
    env = left[3] or right[3]
    if left[3] is not None and right[3] is not None and left[3] is not right[3]:
        raise ValueError("symbolic values from different ShapeEnvs cannot be combined")
    kinds = (left[2], right[2])
    hints = (left[1], right[1])
    name = _method(op, kinds, hints, env)
    if name == "pow_by_natural" and isinstance(b, _Sym):
        env.evaluate(sympy.Ge(right[0], 0), hints[1] >= 0 if hints[1] is not None else None, origin="pow exponent sign")
    rule = sym_op_rules[name]
    exprs = [left[0], right[0]]
    if rule.kind in ("same", "float") and "float" in kinds:
        exprs = [e if k == "float" else _to_float(e) for e, k in zip(exprs, kinds, strict=True)]
    expr = rule.sympy_fn(*exprs)
    hint = None if None in hints else rule.py_fn(*hints)
    kind = rule.kind
    if kind == "same":
        kind = "float" if "float" in kinds else "int"
    if kind == "float" and hint is not None:
        hint = float(hint)
    return wrap(expr, hint, kind, env)


def _to_float(expr: sympy.Basic) -> sympy.Basic:
    return sympy.Float(float(expr)) if expr.is_Integer else expr


def _unary(op: str, a: _Sym):
    rule = sym_op_rules[op]
    expr = rule.sympy_fn(a.expr)
    hint = None if a.hint is None else rule.py_fn(a.hint)
    kind = a.kind if rule.kind == "same" else rule.kind
    return wrap(expr, hint, kind, a.env)


# ----------------------------------------------------------------- free functions
def sym_min(a, b):
    """``min(a, b)`` without deciding which is smaller."""
    if not isinstance(a, _Sym) and not isinstance(b, _Sym):
        return min(a, b)
    return _binary("sym_min", a, b)


def sym_max(a, b):
    """``max(a, b)`` without deciding which is larger."""
    if not isinstance(a, _Sym) and not isinstance(b, _Sym):
        return max(a, b)
    return _binary("sym_max", a, b)


def sym_not(a):
    """``not a`` as a (possibly symbolic) bool, without deciding ``a``."""
    return _unary("sym_not", a) if isinstance(a, SymBool) else not a


def sym_ite(cond, then, other):
    """``then if cond else other`` without deciding ``cond``."""
    if not isinstance(cond, SymBool):
        return then if cond else other
    t, o = _operand(then), _operand(other)
    kind = "float" if "float" in (t[2], o[2]) else t[2]
    rule = sym_op_rules["sym_ite"]
    hint = None if cond.hint is None else (t[1] if cond.hint else o[1])
    return wrap(rule.sympy_fn(cond.expr, t[0], o[0]), hint, kind, cond.env)


def sym_float(a):
    """``float(a)`` without specializing a SymInt."""
    if isinstance(a, SymInt):
        return SymFloat(a.expr, a.env, None if a.hint is None else float(a.hint))
    return a if isinstance(a, SymFloat) else float(a)


def sym_int(a):
    """``int(a)`` (truncation) without specializing a SymFloat."""
    if isinstance(a, SymFloat):
        return _unary("trunc", a)
    return a if isinstance(a, SymInt) else int(a)


def guard_int(a) -> int:
    """The concrete value of ``a``, specializing it (an equality guard) when symbolic."""
    if not isinstance(a, _Sym):
        return int(a)
    return int(a.env.evaluate(a.expr, a.hint, origin="int()"))


def guard_bool(a) -> bool:
    """``bool(a)``: the value ranges or the example value decide; the latter records a guard."""
    return bool(a)


def statically_known_true(a) -> bool:
    """True only when the facts prove ``a`` without a guard; never records anything."""
    if not isinstance(a, SymBool):
        return bool(a)
    return a.env.statically_known(a.expr) is True


def guard_size_oblivious(a) -> bool:
    """Decide ``a`` treating unbacked sizes as >= 2 (so ``u0 == 1`` is False), else guard."""
    if not isinstance(a, SymBool):
        return bool(a)
    return bool(a.env.evaluate(a.expr, a.hint, size_oblivious=True, origin="size-oblivious"))


def guard_or_false(a) -> bool:
    """Decide ``a``; when only a data-dependent value could, return False without a guard."""
    if not isinstance(a, SymBool):
        return bool(a)
    return a.env.guard_or(a.expr, False, origin="guard_or_false")


def guard_or_true(a) -> bool:
    """Decide ``a``; when only a data-dependent value could, return True without a guard."""
    if not isinstance(a, SymBool):
        return bool(a)
    return a.env.guard_or(a.expr, True, origin="guard_or_true")


def expect_true(a) -> bool:
    """Assume ``a`` holds: recorded as a guard, or as a runtime assertion when unbacked."""
    if not isinstance(a, SymBool):
        return bool(a)
    return a.env.expect_true(a.expr, origin="expect_true")


