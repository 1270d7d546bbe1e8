"""learn_facts and ProducedGuards: what a guard teaches and how guards are checked."""

from __future__ import annotations

import sympy

from kiln.symshapes import Mod, ProducedGuards
from kiln.symshapes._guards import learn_facts

s0, s1, s2 = sympy.symbols("s0 s1 s2", integer=True, nonnegative=True)
ORDER = {s0: 0, s1: 1, s2: 2}


def _learn(expr):
    return learn_facts(expr, lambda s: (False, ORDER[s]), lambda s: True)


def test_single_symbol_ranges():
    assert _learn(sympy.Gt(2 * s0, 7)).lower == {s0: 4}
    assert _learn(sympy.Le(s0 - 3, 5)).upper == {s0: 8}
    assert _learn(sympy.Lt(-s0, -3)).lower == {s0: 4}
    assert _learn(sympy.Ne(s0, 2)).excluded == {s0: 2}
    assert _learn(sympy.Eq(3 * s0, 12)).replacements == {s0: 4}
    assert _learn(sympy.Eq(3 * s0, 13)).replacements == {}  # no integer solution: nothing learned


def test_equalities_replace_the_newest_symbol():
    assert _learn(sympy.Eq(s0, s1)).replacements == {s1: s0}
    assert _learn(sympy.Eq(s2, 2 * s0 + s1)).replacements == {s2: 2 * s0 + s1}
    assert _learn(sympy.Eq(2 * s1, 4 * s0)).replacements == {}  # no unit coefficient


def test_divisibility_and_conjunctions():
    facts = _learn(sympy.And(sympy.Eq(Mod(s0, 4), 0), sympy.Ge(s1, 3)))
    assert facts.divisible == [Mod(s0, 4)]
    assert facts.lower == {s1: 3}


def test_produced_guards_check():
    produced = ProducedGuards(guards=(sympy.Lt(s0, s1), sympy.Eq(s2, 1)), sources={s0: "a", s1: "b", s2: "c"})
    assert produced.check({"a": 2, "b": 3, "c": 1}) == []
    assert produced.check({"a": 3, "b": 3, "c": 2}) == list(produced.guards)
