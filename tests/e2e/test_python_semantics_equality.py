"""Equality as ``in``, ``list.index/count/remove`` and ``==`` on containers decide it:
identity first (as CPython's PyObject_RichCompareBool), then the value's own ``__eq__``.
Identity alone answers only where ``__eq__`` is object's; a tensor or an object with its own
``__eq__`` compared with another value needs that value (a graph break or eager), never a
guessed False. Compared with eager throughout."""

import pytest
import torch
from e2e_support import assert_same

import kiln


class Point:
    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return isinstance(other, Point) and self.x == other.x

    __hash__ = None


class Plain:
    pass


def _in_list(a, b, t):
    return (b in [a]), t * 2


def _index(a, b, t):
    return [a, b].index(b), [b, a].count(a), t + 1


def _remove(a, b, t):
    items = [a, b]
    items.remove(b)
    return len(items), t - 1


def _tuple_equality(a, b, t):
    return (a,) == (b,), t * 3


@pytest.mark.parametrize("fn", [_in_list, _index, _remove, _tuple_equality], ids=lambda f: f.__name__)
@pytest.mark.parametrize("make", [
    lambda: (torch.tensor([1.0]), torch.tensor([1.0])),      # equal values, two tensors
    lambda: (torch.tensor([1.0]), torch.tensor([2.0])),      # different values
    lambda: (Point(1), Point(1)),                           # a user __eq__ saying equal
    lambda: (Point(1), Point(2)),
    lambda: (Plain(), Plain()),                             # object's __eq__: identity
], ids=["equal_tensors", "other_tensors", "equal_points", "other_points", "plain_objects"])
def test_equality_of_distinct_values_is_eagers(fn, make):
    a, b = make()
    t = torch.randn(3)
    expected = fn(a, b, t)
    compiled = kiln.compile(fn, backend="eager")
    for _ in range(2):
        assert_same(compiled(a, b, t), expected)


def test_the_same_tensor_is_found_by_identity_without_reading_its_values(counting):
    def fn(a, b):
        items = [a, b]
        return items.index(a), a in items, a * 2

    compiled = kiln.compile(fn, backend=counting)
    a, b = torch.randn(3), torch.randn(3)
    expected = fn(a, b)
    for _ in range(2):
        assert_same(compiled(a, b), expected)
    assert len(counting.graphs) == 1


class Kind(str, __import__("enum").Enum):
    FAST = "fast"
    SLOW = "slow"


KIND = Kind.FAST


def test_members_of_a_str_enum_compare_by_value_pinned_by_identity(counting):
    # a str-valued Enum member's == is str's: compared with a string it can be True
    def fn(x):
        out = x
        if KIND == "fast":
            out = out + 1
        if KIND in ("slow", Kind.SLOW):
            out = out * 2
        if KIND != Kind.SLOW:
            out = out - 3
        return out

    global KIND
    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(3)
    for kind in (Kind.FAST, Kind.SLOW, Kind.FAST):
        KIND = kind
        assert_same(compiled(x), fn(x))
    KIND = Kind.FAST
    assert len(counting.graphs) == 2  # one per member: the identity guard recompiles once
