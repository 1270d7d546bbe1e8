"""Each plain-Python guard kind: holds on the traced value, fails on each kind of change with
the right explanation, and the compiled checker agrees with the explanation."""

import enum

import pytest

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
    TypeMatch,
    evaluate,
)

X = LocalSource("x")
Y = LocalSource("y")


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Box:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def check_guard(guard, passing, failing):
    """``passing``: frames where the guard holds; ``failing``: (frame, expected text)."""
    check = GuardSet([guard]).compile({})
    for frame in passing:
        assert check(frame) is True, frame
        assert evaluate(guard, frame) is None
    for frame, text in failing:
        assert check(frame) is False, frame
        assert evaluate(guard, frame) == text


def test_type_match():
    check_guard(
        TypeMatch(X, int),
        [{"x": 3}, {"x": -1}],
        [({"x": "3"}, "L['x'] type: expected int, got str"),
         ({"x": True}, "L['x'] type: expected int, got bool"),
         ({"x": Box()}, f"L['x'] type: expected int, got {Box.__module__}.Box")],
    )


def test_type_match_on_user_class_is_exact():
    class Sub(Box):
        pass

    guard = TypeMatch(X, Box)
    check = GuardSet([guard]).compile({})
    assert check({"x": Box()})
    assert not check({"x": Sub()})


def test_id_match():
    obj = Box()
    other = Box()
    guard = IdMatch(X, obj)
    check = GuardSet([guard]).compile({})
    assert check({"x": obj})
    assert not check({"x": other})
    text = evaluate(guard, {"x": other})
    assert text.startswith(f"L['x'] identity: expected <{Box.__module__}.Box")
    assert f"(id {id(other):#x})" in text


def test_id_match_keeps_object_alive_and_dedups_by_identity():
    guard = IdMatch(X, [1])
    assert guard.obj == [1]
    assert IdMatch(X, guard.obj) == guard
    assert IdMatch(X, [1]) != guard


@pytest.mark.parametrize(
    ("value", "same", "changed", "text"),
    [
        (3, 3, 4, "L['x'] == 3: expected 3, got 4"),
        (3, 3, 3.0, "L['x'] == 3: expected 3, got 3.0"),
        (1, 1, True, "L['x'] == 1: expected 1, got True"),
        (True, True, 1, "L['x'] == True: expected True, got 1"),
        (None, None, 0, "L['x'] == None: expected None, got 0"),
        (2.5, 2.5, 2.6, "L['x'] == 2.5: expected 2.5, got 2.6"),
        ("a", "a", "b", "L['x'] == 'a': expected 'a', got 'b'"),
        (b"a", b"a", "a", "L['x'] == b'a': expected b'a', got 'a'"),
        ((1, "a"), (1, "a"), (1, "b"), "L['x'] == (1, 'a'): expected (1, 'a'), got (1, 'b')"),
        ((1, (2,)), (1, (2,)), (1, (2.0,)), "L['x'] == (1, (2,)): expected (1, (2,)), got (1, (2.0,))"),
        ((1,), (1,), [1], "L['x'] == (1,): expected (1,), got [1]"),
        ((1,), (1,), (1, 2), "L['x'] == (1,): expected (1,), got (1, 2)"),
        (Color.RED, Color.RED, Color.BLUE,
         "L['x'] == <Color.RED: 1>: expected <Color.RED: 1>, got <Color.BLUE: 2>"),
        (Color.RED, Color.RED, 1, "L['x'] == <Color.RED: 1>: expected <Color.RED: 1>, got 1"),
        (float("inf"), float("inf"), 1e308, "L['x'] == inf: expected inf, got 1e+308"),
    ],
)
def test_equals_match(value, same, changed, text):
    check_guard(EqualsMatch(X, value), [{"x": same}], [({"x": changed}, text)])


def test_equals_match_nan():
    guard = EqualsMatch(X, float("nan"))
    check = GuardSet([guard]).compile({})
    assert check({"x": float("nan")})
    assert not check({"x": 1.0})
    assert evaluate(guard, {"x": 1.0}) == "L['x'] == nan: expected nan, got 1.0"


def test_equals_match_rejects_non_constants():
    for bad in ([1], {"a": 1}, Box(), (1, [2])):
        with pytest.raises(TypeError):
            EqualsMatch(X, bad)


def test_equals_match_distinguishes_types_in_dedup():
    gs = GuardSet([EqualsMatch(X, 1), EqualsMatch(X, True), EqualsMatch(X, 1.0), EqualsMatch(X, 1)])
    assert len(gs) == 3


def test_none_guards():
    check_guard(IsNone(X), [{"x": None}], [({"x": 0}, "L['x'] is None: expected None, got 0")])
    check_guard(NotNone(X), [{"x": 0}, {"x": ""}],
                [({"x": None}, "L['x'] is not None: expected an object, got None")])


def test_length_match():
    check_guard(
        LengthMatch(X, 2),
        [{"x": [1, 2]}, {"x": (1, 2)}, {"x": {"a": 1, "b": 2}}],
        [({"x": [1]}, "L['x'] length: expected 2, got 1"),
         ({"x": []}, "L['x'] length: expected 2, got 0")],
    )


def test_length_match_on_non_sized_fails_with_reason():
    guard = LengthMatch(X, 2)
    assert not GuardSet([guard]).compile({})({"x": 3})
    assert evaluate(guard, {"x": 3}).startswith("len(L['x']) == 2: check raised TypeError")


def test_dict_keys_match_is_ordered():
    check_guard(
        DictKeysMatch(X, ("a", "b")),
        [{"x": {"a": 1, "b": 2}}, {"x": {"a": None, "b": None}}],
        [({"x": {"b": 2, "a": 1}}, "L['x'] keys: expected ('a', 'b'), got ('b', 'a')"),
         ({"x": {"a": 1}}, "L['x'] keys: expected ('a', 'b'), got ('a',)"),
         ({"x": {"a": 1, "b": 2, "c": 3}}, "L['x'] keys: expected ('a', 'b'), got ('a', 'b', 'c')")],
    )


def test_hasattr_guards():
    check_guard(HasAttr(X, "a"), [{"x": Box(a=1)}],
                [({"x": Box()}, "L['x'] attribute 'a': expected present, got missing")])
    check_guard(NoHasAttr(X, "a"), [{"x": Box()}],
                [({"x": Box(a=None)}, "L['x'] attribute 'a': expected missing, got present")])


def test_object_aliasing():
    a, b = Box(), Box()
    check_guard(ObjectAliasing(X, Y), [{"x": a, "y": a}],
                [({"x": a, "y": b},
                  "L['x'] is L['y']: expected the same object, got distinct objects")])


@pytest.mark.parametrize("n", [2, 3, 6])
def test_no_aliasing(n):
    names = [LocalSource(f"t{i}") for i in range(n)]
    objs = [Box() for _ in range(n)]
    guard = NoAliasing(tuple(names))
    frame = {f"t{i}": o for i, o in enumerate(objs)}
    aliased = dict(frame, **{f"t{n - 1}": objs[0]})
    check_guard(guard, [frame],
                [(aliased, f"L['t0'] and L['t{n - 1}']: expected distinct objects, "
                           "got the same object")])


def outer(scale):
    def inner(x, k=scale, *, flag=True):
        return x * scale * k if flag else x

    return inner


def test_function_match():
    fn = outer([2])
    guard = FunctionMatch.from_function(X, fn)
    check = GuardSet([guard]).compile({})
    assert check({"x": fn})
    assert evaluate(guard, {"x": fn}) is None
    # same code, different closure contents and defaults
    other = outer([2])
    assert not check({"x": other})
    assert evaluate(guard, {"x": other}).startswith("L['x'] defaults: expected ([2],)")
    # different code
    assert not check({"x": outer})
    assert evaluate(guard, {"x": outer}).startswith("L['x'] code: expected <code object inner")
    # changed keyword default
    fn2 = outer([3])
    fn2.__defaults__ = fn.__defaults__
    assert not check({"x": fn2})
    assert evaluate(guard, {"x": fn2}).startswith("L['x'] closure: expected ([2],)")
    fn.__kwdefaults__ = {"flag": False}
    assert not check({"x": fn})
    assert evaluate(guard, {"x": fn}).startswith("L['x'] keyword defaults")
    assert not check({"x": 3})


def test_function_match_without_defaults_or_closure():
    def plain(a):
        return a

    guard = FunctionMatch.from_function(X, plain)
    check = GuardSet([guard]).compile({})
    assert check({"x": plain})
    plain.__defaults__ = (1,)
    assert not check({"x": plain})
    assert evaluate(guard, {"x": plain}) == "L['x'] defaults: expected None, got (1,)"


def test_attribute_guards_through_sources():
    guard = EqualsMatch(AttrSource(X, "flag"), True)
    check_guard(guard, [{"x": Box(flag=True)}],
                [({"x": Box(flag=False)}, "L['x'].flag == True: expected True, got False"),
                 ({"x": Box()}, "L['x'].flag: could not fetch (AttributeError: "
                                "'Box' object has no attribute 'flag')")])


def _with_an_empty_cell():
    def inner(a):
        return a + late  # noqa: F821  (a cell assigned by fill())

    def fill(value):
        nonlocal late
        late = value

    def empty():
        nonlocal late
        del late

    late = 0
    del late
    return inner, fill, empty


def test_function_match_on_an_empty_cell_holds_only_while_it_is_empty():
    fn, fill, empty = _with_an_empty_cell()
    guard = FunctionMatch.from_function(X, fn)  # reading the closure never raises
    check = GuardSet([guard]).compile({})
    assert check({"x": fn})
    assert evaluate(guard, {"x": fn}) is None
    fill(1)
    assert not check({"x": fn})
    assert evaluate(guard, {"x": fn}) == "L['x'] closure: expected (<empty cell>,), got (1,)"
    filled = FunctionMatch.from_function(X, fn)
    check_filled = GuardSet([filled]).compile({})
    assert check_filled({"x": fn})
    empty()  # emptied again: the guard on the filled cell fails, without raising
    assert not check_filled({"x": fn})
    assert evaluate(filled, {"x": fn}) == "L['x'] closure: expected (1,), got (<empty cell>,)"
    assert check({"x": fn})
