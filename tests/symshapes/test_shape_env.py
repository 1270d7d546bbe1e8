"""ShapeEnv: symbol creation policy, guards per decision kind, learning, produce_guards."""

from __future__ import annotations

import itertools

import pytest
import sympy

from kiln.symshapes import (
    DimSource,
    GuardOnDataDependentError,
    Mod,
    ShapeEnv,
    ShapeEnvConfig,
    SymInt,
    expect_true,
    guard_or_false,
    guard_or_true,
    guard_size_oblivious,
    statically_known_true,
)


def test_zero_one_specialized_and_size_range():
    env = ShapeEnv()
    assert env.create_symint(0, "a") == 0
    assert env.create_symint(1, "b") == 1
    s = env.create_symint(2, "c")
    assert isinstance(s, SymInt)
    assert env.range_of(s.expr).lower == 2
    produced = env.produce_guards()
    assert produced.check({"a": 0, "b": 1, "c": 5}) == []
    assert produced.check({"a": 0, "b": 1, "c": 1}) != []  # c's 0/1 specialization assumption
    assert produced.check({"a": 3, "b": 1, "c": 5}) != []


def test_zero_one_not_specialized_when_configured():
    env = ShapeEnv(ShapeEnvConfig(specialize_zero_one=False))
    one = env.create_symint(1, "a")
    assert isinstance(one, SymInt)
    assert env.range_of(one.expr).lower == 0


def test_duck_sizing_shares_symbols():
    env = ShapeEnv()
    a, b = env.create_symint(8, "a"), env.create_symint(8, "b")
    assert a.expr == b.expr
    produced = env.produce_guards()
    assert produced.check({"a": 8, "b": 8}) == []
    assert produced.check({"a": 8, "b": 9}) != []


def test_duck_sizing_off():
    env = ShapeEnv(ShapeEnvConfig(duck_shape=False))
    a, b = env.create_symint(8, "a"), env.create_symint(8, "b")
    assert a.expr != b.expr
    assert env.produce_guards().check({"a": 8, "b": 9}) == []


def test_static_dimension():
    env = ShapeEnv()
    assert env.create_symint(5, "a", dynamic=False) == 5
    produced = env.produce_guards()
    assert produced.check({"a": 5}) == [] and produced.check({"a": 6}) != []


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda x, y: x < y, True),
        (lambda x, y: x * 2 >= y + 4, False),
        (lambda x, y: x == y, False),
        (lambda x, y: x != y, True),
        (lambda x, y: (x * y) % 2 == 0, True),
        (lambda x, y: x // 2 > 1, True),
    ],
)
def test_each_decision_records_a_guard(make, expected):
    env = ShapeEnv()
    x, y = env.create_symint(4, "x"), env.create_symint(6, "y")
    assert bool(make(x, y)) is expected
    assert len(env.guards) == 1
    produced = env.produce_guards()
    assert produced.check({"x": 4, "y": 6}) == []


def test_int_conversion_records_equality():
    env = ShapeEnv()
    x = env.create_symint(4, "x")
    assert int(x * 3) == 12
    assert env.replacements[x.expr] == 4
    assert env.produce_guards().check({"x": 5}) != []


def test_ranges_settle_without_guards():
    env = ShapeEnv()
    x, y = env.create_symint(4, "x"), env.create_symint(6, "y")
    assert bool(x >= 2) and bool(x != 1) and bool(x * y > 3) and bool(x + y != 0)
    assert bool(x // 2 >= 1) and bool((x * y) % y < y)
    assert bool(x < x * x)  # needs the shifted-polynomial check, not plain intervals
    assert env.guards == ()
    assert statically_known_true(x > 1)
    assert not statically_known_true(x > 3)
    assert env.guards == ()


def test_learned_range_settles_later_decisions():
    env = ShapeEnv()
    x = env.create_symint(10, "x")
    assert bool(x > 5)
    assert bool(x > 3) and bool(x >= 6)
    assert len(env.guards) == 1
    assert env.range_of(x.expr).lower == 6


def test_equalities_unify_and_specialize():
    env = ShapeEnv()
    x, y, z = env.create_symint(4, "x"), env.create_symint(6, "y"), env.create_symint(8, "z")
    assert bool(x * 2 == z)
    assert env.simplify(z.expr) == 2 * x.expr
    assert bool(y == 6)
    assert env.simplify(y.expr) == 6
    produced = env.produce_guards()
    assert produced.check({"x": 4, "y": 6, "z": 8}) == []
    assert produced.check({"x": 5, "y": 6, "z": 10}) == []
    assert produced.check({"x": 5, "y": 6, "z": 8}) != []
    assert produced.check({"x": 4, "y": 7, "z": 8}) != []


def test_divisibility_fact():
    env = ShapeEnv()
    x = env.create_symint(12, "x")
    assert bool(x % 4 == 0)
    assert bool((x % 4) == 0)
    assert len(env.guards) == 1
    assert env.produce_guards().check({"x": 10}) != []


def test_unbacked_symbols():
    env = ShapeEnv()
    u = env.create_unbacked_symint(size_like=True)
    assert str(u.expr).startswith("u") and u.hint is None
    with pytest.raises(GuardOnDataDependentError):
        bool(u == 3)
    assert bool(u >= 0)  # range decides
    assert guard_size_oblivious(u == 1) is False  # sizes treated as >= 2
    assert guard_or_false(u == 7) is False and guard_or_true(u == 7) is True
    assert expect_true(u > 4)
    assert bool(u > 2)  # learned from expect_true
    produced = env.produce_guards()
    assert produced.guards == () and len(produced.runtime_asserts) == 1


def test_produce_guards_binds_sources():
    env = ShapeEnv()
    x = env.create_symint(4, DimSource("x", 0))
    y = env.create_symint(9, DimSource("y", 1))
    assert bool(x + y > 12)
    produced = env.produce_guards()
    assert set(produced.sources.values()) == {DimSource("x", 0), DimSource("y", 1)}
    assert produced.hints == {x.expr: 4, y.expr: 9}
    assert all(isinstance(g, sympy.logic.boolalg.Boolean) for g in produced.guards)
    assert produced.check({DimSource("x", 0): 4, DimSource("y", 1): 9}) == []
    assert produced.check({DimSource("x", 0): 2, DimSource("y", 1): 9}) != []
    assert "x.size()[0] + y.size()[1] > 12" in env.format_guards()


def test_explicit_range_and_validation():
    env = ShapeEnv()
    x = env.create_symint(4, "x", min=3, max=10)
    assert env.range_of(x.expr).upper == 10
    assert bool(x < 11) and env.guards == ()
    with pytest.raises(ValueError):
        env.create_symbol(20, "y", min=3, max=10)
    with pytest.raises(TypeError):
        env.create_symbol(True, "z")


def test_facts_about_compound_terms():
    env = ShapeEnv()
    x = env.create_symint(12, "x")
    half = (x - 1) // 2
    assert bool(half >= 1)
    assert bool(half != 0) and bool(half > 0) and bool(half + 3 >= 4)  # settled by the fact
    assert len(env.guards) == 1
    produced = env.produce_guards()
    assert produced.check({"x": 3}) == [] and produced.check({"x": 2}) != []


def test_recorded_nonlinear_guard_is_not_recorded_twice():
    env = ShapeEnv()
    x, y = env.create_symint(3, "x"), env.create_symint(5, "y")
    for _ in range(3):
        assert bool(x * y != 16)
        assert not bool(x * y == 16)
    assert len(env.guards) == 1


def test_simplify_uses_ranges():
    env = ShapeEnv()
    x = env.create_symint(6, "x")
    assert env.simplify(sympy.Max(1, x.expr) * 3) == 3 * x.expr
    assert env.simplify(Mod(1, x.expr)) == 1


def test_produce_guards_reports_specialized_dynamic_sources():
    env = ShapeEnv()
    x = env.create_symint(8, "x")
    y = env.create_symint(5, "y")
    env.create_symint(6, "z", dynamic=False)  # static by request: not reported
    env.create_symint(1, "w")  # 0/1 specialization is the policy: not reported either
    assert int(x) == 8
    assert bool(y + 0 == 5)
    assert env.produce_guards().specialized == {"x": 8, "y": 5}


def test_replacements_stay_fully_resolved_through_chains():
    env = ShapeEnv()
    x, y, z, w = (env.create_symint(h, n) for h, n in ((3, "x"), (5, "y"), (8, "z"), (13, "w")))
    assert bool(z == x + y) and bool(w == z + y)  # z -> x + y, w -> x + 2*y
    assert bool(y == x + 2)  # y -> x + 2: both earlier values must follow
    reps = env.replacements
    assert reps[z.expr] == 2 * x.expr + 2 and reps[w.expr] == 3 * x.expr + 4
    assert int(x) == 3
    assert env.replacements == {x.expr: 3, y.expr: 5, z.expr: 8, w.expr: 13}
    produced = env.produce_guards()
    assert produced.check({"x": 3, "y": 5, "z": 8, "w": 13}) == []
    assert produced.check({"x": 4, "y": 6, "z": 10, "w": 16}) != []


def test_many_replacements_resolve_without_rescanning():
    # a long chain: each new symbol equals the previous one plus one, then the first is fixed
    env = ShapeEnv(ShapeEnvConfig(duck_shape=False))
    syms = [env.create_symint(10 + i, f"v{i}") for i in range(300)]
    for a, b in itertools.pairwise(syms):
        assert bool(b == a + 1)
    assert int(syms[0]) == 10
    reps = env.replacements
    assert all(reps[s.expr] == 10 + i for i, s in enumerate(syms))
    assert not any(v.free_symbols for v in reps.values())
