import pytest

from kiln.guards import (
    AttrSource,
    EqualsMatch,
    GuardSet,
    HasAttr,
    IdMatch,
    ItemSource,
    LengthMatch,
    LocalSource,
    NotNone,
    ObjectAliasing,
    TypeMatch,
    order_guards,
)

X = LocalSource("x")
SELF = LocalSource("self")


class Box:
    pass


def test_add_deduplicates_and_keeps_insertion_order():
    gs = GuardSet()
    assert gs.add(TypeMatch(X, int)) is True
    assert gs.add(TypeMatch(LocalSource("x"), int)) is False
    assert gs.add(EqualsMatch(X, 3)) is True
    assert len(gs) == 2
    assert list(gs) == [TypeMatch(X, int), EqualsMatch(X, 3)]
    assert TypeMatch(X, int) in gs
    assert TypeMatch(X, str) not in gs


def test_add_rejects_non_guards():
    with pytest.raises(TypeError):
        GuardSet().add("type(x) is int")


def test_type_guard_on_ancestor_comes_first_even_if_added_last():
    attr = AttrSource(AttrSource(SELF, "cfg"), "eps")
    value_guard = EqualsMatch(attr, 0.5)
    root_type = TypeMatch(SELF, Box)
    mid_type = TypeMatch(AttrSource(SELF, "cfg"), Box)
    order = order_guards([value_guard, mid_type, root_type])
    assert order == [root_type, mid_type, value_guard]


def test_type_guard_on_same_source_precedes_value_guards():
    eq = EqualsMatch(X, 3)
    length = LengthMatch(LocalSource("y"), 1)
    t = TypeMatch(LocalSource("y"), list)
    order = order_guards([length, eq, t])
    assert order.index(t) < order.index(length)


def test_cheap_first_otherwise():
    has = HasAttr(LocalSource("a"), "q")  # cost 3
    eq = EqualsMatch(LocalSource("b"), 1)  # cost 2
    nn = NotNone(LocalSource("c"))  # cost 1
    assert order_guards([has, eq, nn]) == [nn, eq, has]


def test_multi_source_guard_waits_for_both_types():
    a, b = AttrSource(X, "p"), AttrSource(LocalSource("y"), "p")
    alias = ObjectAliasing(a, b)
    tx, ty = TypeMatch(X, Box), TypeMatch(LocalSource("y"), Box)
    order = order_guards([alias, ty, tx])
    assert order.index(alias) > max(order.index(tx), order.index(ty))


def test_identity_guard_counts_as_type_guard():
    obj = Box()
    idm = IdMatch(SELF, obj)
    deep = EqualsMatch(ItemSource(AttrSource(SELF, "d"), "k"), 1)
    assert order_guards([deep, idm]) == [idm, deep]


def test_order_is_deterministic():
    guards = [EqualsMatch(LocalSource(f"v{i}"), i) for i in range(20)]
    assert order_guards(guards) == order_guards(list(guards)) == guards


def test_explain_on_guard_set():
    gs = GuardSet([TypeMatch(X, int), EqualsMatch(X, 3)])
    assert gs.explain({"x": 3}) is None
    assert gs.explain({"x": 4}) == "L['x'] == 3: expected 3, got 4"
    assert gs.explain({"x": "3"}) == "L['x'] type: expected int, got str"
