"""The operation table's invariant: on numbers, each rule's sympy builder agrees with its
Python function (the semantics kiln's symbolic values promise)."""

from __future__ import annotations

import math

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln.symshapes._sym_ops import is_boolean_expr, sym_op_rules, to_sympy

INT_BINARY = ["add", "sub", "mul", "int_floordiv", "mod", "sym_min", "sym_max", "eq", "ne", "lt", "le", "gt", "ge", "int_truediv"]
FLOAT_BINARY = ["add", "sub", "mul", "float_truediv", "float_floordiv", "sym_min", "sym_max", "lt", "ge"]
UNARY_INT = ["neg", "abs", "pos"]
UNARY_FLOAT = ["floor", "ceil", "trunc", "sym_int", "neg", "abs"]


def _py(value: sympy.Basic):
    if value is sympy.true or value is sympy.false:
        return value is sympy.true
    return int(value) if value.is_Integer else float(value)


@pytest.mark.parametrize("name", INT_BINARY)
@settings(deadline=None)
@given(a=st.integers(-60, 60), b=st.integers(-60, 60))
def test_int_binary_rules(name, a, b):
    rule = sym_op_rules[name]
    if b == 0 and name in ("int_floordiv", "mod", "int_truediv"):
        with pytest.raises(ZeroDivisionError):
            rule.sympy_fn(to_sympy(a), to_sympy(b))
        return
    got = _py(rule.sympy_fn(to_sympy(a), to_sympy(b)))
    expected = rule.py_fn(a, b)
    assert got == expected if not isinstance(expected, float) else math.isclose(got, expected)


@pytest.mark.parametrize("name", FLOAT_BINARY)
@settings(deadline=None)
@given(a=st.floats(-1e3, 1e3), b=st.floats(-1e3, 1e3).filter(lambda v: abs(v) > 1e-3))
def test_float_binary_rules(name, a, b):
    rule = sym_op_rules[name]
    got = _py(rule.sympy_fn(to_sympy(a), to_sympy(b)))
    expected = rule.py_fn(a, b)
    assert math.isclose(got, expected, rel_tol=1e-12, abs_tol=1e-12) if not isinstance(expected, bool) else got == expected


@settings(deadline=None)
@given(a=st.integers(-100, 100), f=st.floats(-1e4, 1e4))
def test_unary_rules(a, f):
    for name in UNARY_INT:
        assert _py(sym_op_rules[name].sympy_fn(to_sympy(a))) == sym_op_rules[name].py_fn(a)
    for name in UNARY_FLOAT:
        assert _py(sym_op_rules[name].sympy_fn(to_sympy(f))) == sym_op_rules[name].py_fn(f)


def test_boolean_detection_and_logic():
    s = sympy.Symbol("s", integer=True)
    assert not is_boolean_expr(s) and is_boolean_expr(sympy.Eq(s, 2)) and is_boolean_expr(sympy.true)
    assert sym_op_rules["and_"].sympy_fn(sympy.true, sympy.false) is sympy.false
    assert sym_op_rules["sym_ite"].sympy_fn(sympy.true, to_sympy(3), to_sympy(4)) == 3
    # True + True == 2, as in Python
    assert sym_op_rules["add"].sympy_fn(sympy.true, sympy.true) == 2
