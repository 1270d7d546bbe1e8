import sys

import pytest

from kiln.guards import (
    AttrSource,
    DictKeysMatch,
    EqualsMatch,
    GlobalSource,
    GuardSet,
    HasAttr,
    ItemSource,
    LengthMatch,
    LocalSource,
    ModuleSource,
    NoHasAttr,
    TypeMatch,
    compile_guards,
    explain_failure,
)

SELF = LocalSource("self")


class Counting:
    """Counts how often its ``child`` property is read."""

    reads = 0

    def __init__(self, child):
        self._child = child

    @property
    def child(self):
        type(self).reads += 1
        return self._child


class Leaf:
    def __init__(self):
        self.a, self.b, self.c = 1, "two", 3.0


def test_shared_prefix_is_fetched_once():
    Counting.reads = 0
    child = AttrSource(SELF, "child")
    gs = GuardSet([TypeMatch(SELF, Counting), TypeMatch(child, Leaf)])
    for attr, value in (("a", 1), ("b", "two"), ("c", 3.0)):
        gs.add(EqualsMatch(AttrSource(child, attr), value))
    check = gs.compile({})
    code = "\n".join(line.split("#")[0] for line in check.source.splitlines())
    assert code.count(".child") == 1
    assert check({"self": Counting(Leaf())})
    assert Counting.reads == 1


def test_source_is_readable_python():
    gs = GuardSet([EqualsMatch(ItemSource(AttrSource(SELF, "cfg"), "eps"), 0.5)])
    check = gs.compile({})
    src = check.source
    assert src.startswith("def check(L, G=_G):")
    assert "L['self'].cfg['eps'] == 0.5" in src  # the guard as a comment
    assert "except Exception:" in src
    compile(src, "<test>", "exec")


def test_checker_returns_bools():
    check = GuardSet([EqualsMatch(LocalSource("n"), 3)]).compile({})
    assert check({"n": 3}) is True
    assert check({"n": 4}) is False
    assert check({}) is False


def test_empty_guard_set_always_passes():
    check = GuardSet().compile()
    assert check({}) is True
    assert check.explain({}) is None


def test_globals_bound_at_compile_time_and_overridable():
    g1 = {"SCALE": 2}
    gs = GuardSet([EqualsMatch(GlobalSource("SCALE"), 2)])
    check = gs.compile(g1)
    assert check({})
    g1["SCALE"] = 3
    assert not check({})
    assert check.explain({}) == "G['SCALE'] == 2: expected 2, got 3"
    assert check({}, {"SCALE": 2})
    assert check.explain({}, {"SCALE": 2}) is None


def test_global_sources_need_globals():
    gs = GuardSet([EqualsMatch(GlobalSource("SCALE"), 2)])
    with pytest.raises(ValueError, match="globals"):
        gs.compile()


def test_checker_carries_order_and_explain():
    gs = GuardSet([EqualsMatch(LocalSource("n"), 3), TypeMatch(LocalSource("n"), int)])
    check = gs.compile()
    assert check.guards == tuple(gs.ordered())
    assert explain_failure(check, {"n": 4}) == check.explain({"n": 4})


def test_compile_guards_keeps_the_given_order():
    a = EqualsMatch(LocalSource("a"), 1)
    b = HasAttr(LocalSource("b"), "x")
    check = compile_guards([b, a])
    assert check.source.index("hasattr") < check.source.index("L['a']")


def test_first_failure_stops_evaluation():
    Counting.reads = 0
    gs = GuardSet([TypeMatch(LocalSource("n"), int), TypeMatch(AttrSource(SELF, "child"), Leaf)])
    check = gs.compile()
    assert not check({"n": "4", "self": Counting(Leaf())})
    assert Counting.reads == 0


def test_never_raises_on_hostile_inputs(hostile_values):
    x = LocalSource("x")
    kinds = [
        TypeMatch(x, int), EqualsMatch(x, 3), EqualsMatch(x, (1, 2)), EqualsMatch(x, "s"),
        LengthMatch(x, 1), DictKeysMatch(x, ("a",)), HasAttr(x, "a"), NoHasAttr(x, "a"),
        EqualsMatch(AttrSource(x, "a"), 1), EqualsMatch(ItemSource(x, "a"), 1),
        EqualsMatch(ItemSource(x, 0), 1),
    ]
    for guard in kinds:
        check = GuardSet([guard]).compile()
        for value in hostile_values:
            result = check({"x": value})
            assert result is (explain_failure([guard], {"x": value}) is None), (guard, value)


def test_mutating_sized_objects_between_calls():
    x = LocalSource("x")
    gs = GuardSet([TypeMatch(x, list), LengthMatch(x, 2)])
    check = gs.compile()
    data = [1, 2]
    assert check({"x": data})
    data.append(3)
    assert not check({"x": data})
    assert check.explain({"x": data}) == "L['x'] length: expected 2, got 3"


def test_checker_on_non_dict_locals():
    check = GuardSet([EqualsMatch(LocalSource("n"), 3)]).compile()
    for bad in (None, [], 3, "n", object()):
        assert check(bad) is False
        assert check.explain(bad).startswith("L['n']: could not fetch")


def test_generated_code_cannot_be_injected():
    from kiln.guards import ClosureCellSource, TensorSizeSource

    evil = "0]; import os #"
    for build in (lambda: ClosureCellSource(LocalSource("f"), evil),
                  lambda: TensorSizeSource(LocalSource("x"), evil),
                  lambda: LengthMatch(LocalSource("x"), evil),
                  lambda: HasAttr(LocalSource("x"), 3)):
        with pytest.raises(TypeError):
            build()
    # odd names are rendered as escaped literals, comments stay one printable line
    odd = AttrSource(LocalSource("a\nb\x00"), "c\nimport os")
    check = GuardSet([EqualsMatch(odd, 1)]).compile()
    assert "import os" not in [line.strip() for line in check.source.splitlines()]
    assert check({"a\nb\x00": type("T", (), {"c\nimport os": 1})()})


def test_module_sources_are_checked_against_sys_modules():
    import types

    mod = types.ModuleType("kiln_test_guarded_module")
    mod.FLAG = 1
    sys.modules[mod.__name__] = mod
    try:
        check = compile_guards(GuardSet([EqualsMatch(AttrSource(ModuleSource(mod.__name__), "FLAG"), 1)]).ordered())
        assert check({}) is True
        mod.FLAG = 2
        assert check({}) is False
        assert "M['kiln_test_guarded_module'].FLAG" in check.explain({})
        del sys.modules[mod.__name__]
        assert check({}) is False  # a module no longer imported fails, never raises
    finally:
        sys.modules.pop(mod.__name__, None)
