"""produce_guards() -> kiln.guards.ShapeRelation: the compiled checker accepts the traced
sizes and rejects sizes that violate a recorded relation (torch-free: int locals)."""

from __future__ import annotations

from kiln.guards import GuardSet, LocalSource, ShapeRelation
from kiln.symshapes import ShapeEnv


def _checker(env: ShapeEnv):
    produced = env.produce_guards()
    relations = [
        ShapeRelation(g, {s: produced.sources[s] for s in g.free_symbols}) for g in produced.guards
    ]
    return GuardSet(relations).compile({})


def test_roundtrip_int_locals():
    env = ShapeEnv()
    n, _m, k = (env.create_symint(h, LocalSource(name)) for h, name in [(8, "n"), (8, "m"), (12, "k")])
    assert bool(n * 3 > k + 4)  # 24 > 16
    assert bool((k // 4) * 4 == k)  # divisibility
    check = _checker(env)
    assert check({"n": 8, "m": 8, "k": 12})
    assert check({"n": 9, "m": 9, "k": 20})  # another point where every relation still holds
    assert not check({"n": 8, "m": 9, "k": 12})  # duck-sized n == m broken
    assert not check({"n": 4, "m": 4, "k": 12})  # 12 > 16 false
    assert not check({"n": 8, "m": 8, "k": 13})  # not a multiple of 4
    assert not check({"n": 1, "m": 1, "k": 12})  # 0/1 specialization assumption


def test_roundtrip_specialized_and_floordiv():
    env = ShapeEnv()
    a = env.create_symint(10, LocalSource("a"))
    b = env.create_symint(1, LocalSource("b"))
    assert b == 1
    assert bool(a // 3 == 3)
    check = _checker(env)
    assert check({"a": 10, "b": 1}) and check({"a": 11, "b": 1})
    assert not check({"a": 12, "b": 1}) and not check({"a": 10, "b": 2})
