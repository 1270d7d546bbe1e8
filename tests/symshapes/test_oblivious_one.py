"""ShapeEnvConfig(oblivious_one=True): a size of 1 is a symbol, decided size-obliviously only
where the caller promises the default is valid for 1 (the ShapeEnv part, torch-free)."""

from __future__ import annotations

import sympy

from kiln.symshapes import ShapeEnv, ShapeEnvConfig, SymInt


def _env():
    return ShapeEnv(ShapeEnvConfig(duck_shape=False, oblivious_one=True))


def test_one_is_a_symbol_zero_is_specialized_and_sizes_range_from_1():
    env = _env()
    one, five = env.create_symint(1, "a"), env.create_symint(5, "b")
    assert isinstance(one, SymInt) and isinstance(five, SymInt)
    assert env.create_symint(0, "c") == 0
    assert env.range_of(one.expr).lower == 1 and env.range_of(five.expr).lower == 1
    produced = env.produce_guards()
    assert produced.check({"a": 1, "b": 1, "c": 0}) == []
    assert produced.check({"a": 7, "b": 2, "c": 0}) == []
    assert produced.check({"a": 0, "b": 2, "c": 0}) != []  # 0 gets its own graph


def test_guard_or_answers_the_default_without_a_guard_only_when_asked_to():
    env = _env()
    s = env.create_symint(1, "a").expr
    before = env.contradicted
    assert env.guard_or(sympy.Eq(s, 1), False, oblivious=True) is False
    assert env.guards == () and env.contradicted == before + 1  # the example value says 1
    t = env.create_symint(3, "b").expr
    assert env.guard_or(sympy.Ne(t, 1), True, oblivious=True) is True
    assert env.guards == () and env.contradicted == before + 1  # agrees: nothing counted
    assert env.guard_or(sympy.Eq(s, 1), False) is True  # not promised: a guard on the value
    assert [str(g.expr) for g in env.guards] == ["Eq(s0, 1)"]


def test_by_hints_turns_oblivious_answers_back_into_guards():
    env = _env()
    s = env.create_symint(3, "a").expr
    with env.by_hints():
        assert env.guard_or(sympy.Eq(s, 1), False, oblivious=True) is False
    assert [str(g.expr) for g in env.guards] == ["Ne(s0, 1)"]
    assert env.produce_guards().check({"a": 1}) != []


def test_size_oblivious_decisions_count_a_size_that_may_be_1_as_at_least_2():
    env = _env()
    s = env.create_symint(1, "a").expr
    assert env.statically_known(sympy.Eq(s, 1)) is None
    assert env.statically_known(sympy.Eq(s, 1), size_oblivious=True) is False
    assert env.evaluate(sympy.Gt(s * 4, 4), size_oblivious=True) is True
    assert env.guards == ()
    assert env.may_be_one(s * 4) and not env.may_be_one(sympy.Integer(4))


def test_an_explicit_range_that_admits_1_may_be_1():
    env = _env()
    s = env.create_symint(4, "a", min=1, max=64).expr
    assert env.may_be_one(s)
    t = env.create_symint(4, "b", min=2).expr
    assert not env.may_be_one(t)


def test_without_the_option_one_stays_specialized():
    env = ShapeEnv(ShapeEnvConfig(duck_shape=False))
    assert env.create_symint(1, "a") == 1
    s = env.create_symint(3, "b").expr
    assert not env.may_be_one(s)
    assert env.guard_or(sympy.Eq(s, 1), False, oblivious=True) is False  # range [2, inf)
