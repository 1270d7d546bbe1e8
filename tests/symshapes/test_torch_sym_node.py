"""KilnSymNode inside torch.SymInt/SymFloat/SymBool: Python semantics, torch helpers, guards."""

from __future__ import annotations

import math
import operator

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.fx.experimental.symbolic_shapes import (
    guard_or_false,
    guard_or_true,
    statically_known_true,
)

from kiln.symshapes import ShapeEnv, SymBool, SymInt
from kiln.symshapes.bridge import KilnSymNode, ShapeEnvView, from_torch, to_torch

OPS = [operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.truediv, torch.sym_max, torch.sym_min]
CMPS = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


def _setup(*hints):
    env = ShapeEnv()
    view = ShapeEnvView(env)
    return env, [to_torch(env.create_symbol(h, f"v{i}"), view) for i, h in enumerate(hints)]


def _value(env, x):
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        assert isinstance(x.node, KilnSymNode)
        return env.size_hint(x.node.expr)
    return x


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 40), st.integers(2, 40), st.integers(-9, 9).filter(bool), st.sampled_from(OPS), st.sampled_from(OPS))
def test_arithmetic_matches_python(a, b, c, op1, op2):
    env, (x, y) = _setup(a, b)
    pyop = {torch.sym_max: max, torch.sym_min: min}
    result = op2(op1(x, y), c) if op1 is not operator.truediv else op1(x, y)
    expected = pyop.get(op2, op2)(pyop.get(op1, op1)(a, b), c) if op1 is not operator.truediv else a / b
    value = _value(env, result)
    assert math.isclose(value, expected) if isinstance(expected, float) else value == expected
    assert env.guards == ()


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.integers(2, 40), st.sampled_from(CMPS))
def test_comparisons_guard(a, b, cmp):
    env, (x, y) = _setup(a, b)
    assert bool(cmp(x * 3, y + 1)) == cmp(a * 3, b + 1)
    assert env.produce_guards().check({"v0": a, "v1": b}) == []


def test_float_ops_and_constants():
    env, (x,) = _setup(6)
    f = torch.sym_float(x) / 4
    assert isinstance(f, torch.SymFloat) and math.isclose(_value(env, f), 1.5)
    assert isinstance(x - x, int) and x - x == 0
    assert math.isclose(_value(env, x**0.5), math.sqrt(6))
    assert _value(env, x**2) == 36


def test_torch_helpers_use_ranges_without_guards():
    env, (x, y) = _setup(5, 7)
    assert statically_known_true(x >= 2) and not statically_known_true(x == y)
    assert guard_or_false(x == 1) is False  # sizes >= 2
    assert env.guards == ()
    assert guard_or_true(x == y) is False  # decided on the hints, recorded
    assert len(env.guards) == 1


def test_guard_int_specializes():
    env, (x,) = _setup(9)
    assert int(x * 2) == 18
    assert env.replacements[x.node.expr] == 9


def test_meta_kernels_accept_kiln_symints():
    env, (x, y) = _setup(5, 3)
    t = torch.empty_strided((x, 4), (4, 1), device="meta")
    assert t.shape[0] is x or str(t.shape[0]) == "s0"
    u = torch.empty((4, y), device="meta")
    m = t @ u
    assert _value(env, m.shape[0]) == 5 and _value(env, m.shape[1]) == 3
    assert t.is_contiguous()


def test_conversion_to_kiln_symbolic_values():
    env, (x, y) = _setup(5, 3)
    k = from_torch(x * y + 1)
    assert isinstance(k, SymInt) and k.hint == 16 and env.size_hint(k.expr) == 16
    b = from_torch(x > y)
    assert isinstance(b, SymBool) and b.hint is True
    assert from_torch(7) == 7
    back = to_torch(k.expr, x.node.shape_env)
    assert isinstance(back, torch.SymInt) and _value(env, back) == 16


def test_expect_size_marks_unbacked_size_like():
    env = ShapeEnv()
    view = ShapeEnvView(env)
    u = torch.SymInt(KilnSymNode(env.create_unbacked_symbol("int"), view, int, None))
    assert not env.is_size_like(u.node.expr)
    assert u.node.expect_size("", 0)
    assert env.is_size_like(u.node.expr) and env.range_of(u.node.expr).lower == 0
    assert guard_or_false(u == 1) is False and env.statically_known((u == 1).node.expr, size_oblivious=True) is False
