"""Every kind describes itself in one line (the text generated code and logs show)."""

import sympy

from kiln.guards import (
    AttrSource,
    DictKeysMatch,
    EqualsMatch,
    FunctionMatch,
    GuardSet,
    HasAttr,
    IdMatch,
    IsNone,
    LengthMatch,
    LocalSource,
    NoAliasing,
    NoHasAttr,
    NotNone,
    ObjectAliasing,
    ShapeRelation,
    TypeMatch,
)

X, Y = LocalSource("x"), LocalSource("y")
s0 = sympy.Symbol("s0")


def fn(a=1):
    return a


GUARDS = {
    TypeMatch(X, int): "type(L['x']) is int",
    EqualsMatch(X, (1, "a")): "L['x'] == (1, 'a')",
    IsNone(X): "L['x'] is None",
    NotNone(X): "L['x'] is not None",
    LengthMatch(X, 2): "len(L['x']) == 2",
    DictKeysMatch(X, ("a",)): "tuple(L['x'].keys()) == ('a',)",
    HasAttr(X, "a"): "hasattr(L['x'], 'a')",
    NoHasAttr(X, "a"): "not hasattr(L['x'], 'a')",
    ObjectAliasing(X, Y): "L['x'] is L['y']",
    NoAliasing((X, Y)): "no aliasing among L['x'], L['y']",
    ShapeRelation(sympy.Ge(s0, 2), {s0: AttrSource(X, "n")}): "s0 >= 2 where s0 = L['x'].n",
    FunctionMatch.from_function(X, fn): "L['x'] is function fn with the traced defaults and closure",
}


def test_descriptions():
    for guard, text in GUARDS.items():
        assert guard.describe() == text
        assert str(guard) == text


def test_identity_description_names_the_object():
    obj = object()
    assert IdMatch(X, obj).describe() == f"L['x'] is {obj!r} (id {id(obj):#x})"


def test_descriptions_are_comments_in_generated_code():
    check = GuardSet(GUARDS).compile()
    for text in GUARDS.values():
        assert f"# {text}" in check.source
