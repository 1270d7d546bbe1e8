"""dict(x), d.update(x), dict(**m), {**m} and f(**m) under kiln follow CPython's rule: a
dict gives its items, any other object with a ``keys`` attribute is read as ``keys()`` then
``x[k]``, anything else is an iterable of pairs. Compared with eager, in one graph."""

import collections
import collections.abc

import pytest
import torch
from e2e_support import assert_same

import kiln


class Table(collections.abc.Mapping):
    """A read-only mapping whose keys are two-letter strings (a pair each, if iterated)."""

    def __init__(self, t):
        self._data = {"ab": t, "cd": 2}

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


class KeysOnly:
    """Not a Mapping: only ``keys`` and ``__getitem__``, which is all dict() asks."""

    def keys(self):
        return ["ab", "cd"]

    def __getitem__(self, key):
        return key.upper()


def _check(counting, fn, *args, graphs=1):
    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(*args), fn(*args))
    assert len(counting.graphs) == graphs
    assert kiln.session().stats.breaks == []


@pytest.mark.parametrize("spelling", ["dict", "update", "double_star", "literal", "call"])
def test_a_user_mapping_is_read_by_keys_and_items(counting, spelling):
    def take(**kw):
        return kw

    def fn(x, m):
        if spelling == "dict":
            d = dict(m)
        elif spelling == "update":
            d = {"zz": 0}
            d.update(m)
        elif spelling == "double_star":
            d = dict(**m)
        elif spelling == "literal":
            d = {**m, "zz": 1}
        else:
            d = take(**m)
        return x + 1, d

    _check(counting, fn, torch.ones(2), Table(3))


def test_a_user_mapping_made_in_the_trace(counting):
    def fn(x):
        m = Table(x * 2)
        return dict(m), list(m.keys()), list(m.items()), len(m.values())

    _check(counting, fn, torch.ones(2))


def test_an_object_with_only_keys_and_getitem(counting):
    def fn(x, m):
        d = dict(m, extra=x)
        d.update(m)
        return x * 2, d, {**m}

    _check(counting, fn, torch.ones(2), KeysOnly())


def test_user_dict_and_ordered_dict(counting):
    def fn(x, u, o):
        return dict(u), dict(o), {**o}, dict(collections.UserDict(a=x))

    u = collections.UserDict({"ab": 1, "cd": torch.zeros(1)})
    o = collections.OrderedDict([("ab", 1), ("cd", 2)])
    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(torch.ones(2), u, o), fn(torch.ones(2), u, o))


def test_iterables_of_pairs(counting):
    def fn(x, names):
        return dict(["ab", "cd"]), dict(zip(names, [x, x + 1], strict=True)), dict(enumerate(names)), dict([("k", x)], k2=3)

    _check(counting, fn, torch.ones(2), ["p", "q"])


@pytest.mark.parametrize("case", ["short_pair", "not_a_sequence", "star_star_list", "literal_list",
                                  "star_star_twice", "not_iterable"])
def test_bad_arguments_raise_as_in_eager(counting, case):
    def take(**kw):
        return kw

    def fn(x):
        try:
            if case == "short_pair":
                dict([(1, 2), (3,)])
            elif case == "not_a_sequence":
                dict([1])
            elif case == "star_star_list":
                take(**[1])
            elif case == "literal_list":
                {**[1]}  # noqa: B018
            elif case == "star_star_twice":
                take(**{"a": 1}, **{"a": 2})
            else:
                dict(5)
        except (TypeError, ValueError) as e:
            return x + 1, type(e).__name__, e.args
        return x

    compiled = kiln.compile(fn, backend=counting)
    got, want = compiled(torch.ones(2)), fn(torch.ones(2))
    assert got[1] == want[1]
    if case not in ("star_star_list", "star_star_twice"):  # these name the callee's module
        assert got[2] == want[2]
    torch.testing.assert_close(got[0], want[0])
    assert len(counting.graphs) == 1


def test_update_stops_at_the_bad_pair_with_the_pairs_before_it_added(counting):
    def fn(x):
        d = {}
        try:  # noqa: SIM105  (the case under test)
            d.update([("a", x), ("b",)])
        except ValueError:
            pass
        return x + 1, d

    _check(counting, fn, torch.ones(2))


def test_the_type_of_a_dict_called_builds_a_dict(counting):
    def fn(x, d):
        e = type(d)(d, extra=x)
        return e, type(d).__name__, type(d) is dict, isinstance(e, type(d))

    d_c, d_e = {"a": 1}, {"a": 1}
    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(torch.ones(2), d_c), fn(torch.ones(2), d_e))


CONFIG = __import__("types").MappingProxyType({"ab": 2, "cd": 3})


def test_a_mappingproxy_reads_like_a_dict_and_stays_read_only(counting):
    def fn(x):
        out = [dict(CONFIG), {**CONFIG}, CONFIG["ab"], list(CONFIG.items()), "cd" in CONFIG]
        for bad in (lambda: CONFIG.__setitem__("z", 1), lambda: CONFIG.update(z=1)):
            try:
                bad()
            except (TypeError, AttributeError) as e:
                out.append((type(e).__name__, e.args))
        try:
            CONFIG["z"] = 1
        except TypeError as e:
            out.append(e.args)
        return x * CONFIG["cd"], out

    _check(counting, fn, torch.ones(2))


def test_the_union_of_two_dicts_is_a_new_dict(counting):
    def fn(x, d, n):
        e = d | {"n": n, "a": x * 2}
        e["z"] = 1
        return x + 1, e, e is d, len(d)

    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(2)
    for n in (3, 3):
        d, d_eager = {"a": x, "b": 1}, {"a": x, "b": 1}
        assert_same(compiled(x, d, n), fn(x, d_eager, n))
        assert d == d_eager
    assert len(counting.graphs) == 1
