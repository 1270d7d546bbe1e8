"""The long tail of dicts (issue 13): ``collections.defaultdict`` and ``OrderedDict`` made in
the trace, ``dict.fromkeys``, ``dict.update`` and ``dict(...)`` spellings, ``.get`` and
``hasattr`` on dicts, unusual keys, ``sorted(d.items(), key=...)``, and dicts passed in
(guarded on what the trace read). Compared with eager, in one graph, with no break."""

import collections
from collections import OrderedDict, defaultdict

import torch
from e2e_support import assert_same, check_one_graph

import kiln


class Counter:
    """A plain class used as a defaultdict factory."""

    def __init__(self):
        self.n = 0


class Config(dict):
    """A dict subclass constructed with keywords."""


_check = check_one_graph


def test_defaultdict_list_appended_in_a_loop(counting):
    def fn(x):
        groups = defaultdict(list)
        for i in range(4):
            groups[i % 2].append(x * i)
        return [torch.stack(v).sum(0) for v in groups.values()], len(groups)

    _check(counting, fn, torch.randn(3))


def test_defaultdict_int_counts(counting):
    def fn(x):
        d = defaultdict(int)
        for word in ("a", "b", "a"):
            d[word] += 1
        return x * d["a"] + d["b"] + d["missing"], sorted(d)

    _check(counting, fn, torch.randn(3))


def test_defaultdict_lambda_and_closure_factories(counting):
    def fn(x):
        scale = 3

        def make():
            return scale

        by_lambda = defaultdict(lambda: x + 1)
        by_closure = defaultdict(make)
        return by_lambda["k"] * by_closure[0], len(by_lambda), dict(by_closure)

    _check(counting, fn, torch.randn(3))


def test_defaultdict_class_factory(counting):
    def fn(x):
        d = defaultdict(Counter)
        d["a"].n += 2
        d["a"].n += 1
        return x + d["a"].n, d["b"].n

    _check(counting, fn, torch.randn(3))


def test_defaultdict_setdefault_setitem_and_iteration(counting):
    def fn(x):
        d = collections.defaultdict(list)
        d.setdefault("a", []).append(x)
        d["b"] = [x * 2]
        d["c"].append(x - 1)
        out = [(k, v[0]) for k, v in d.items()]
        return out, len(d), list(d), "z" in d, d.get("z"), isinstance(d, dict)

    _check(counting, fn, torch.randn(3))


def test_defaultdict_returned_keeps_its_factory(counting):
    def fn(x):
        d = defaultdict(list)
        d["a"].append(x + 1)
        return d

    compiled = _check(counting, fn, torch.randn(3))
    out = compiled(torch.randn(3))
    assert type(out) is defaultdict and out.default_factory is list
    out["new"].append(1)
    assert out["new"] == [1]


def test_defaultdict_with_initial_items_and_factory_attribute(counting):
    def fn(x):
        d = defaultdict(int, {"a": 1}, b=2)
        d["c"] += 5
        return x * d["a"] + d["b"] + d["c"], d.default_factory is int, dict(d.copy())

    _check(counting, fn, torch.randn(3))


def test_ordered_dict_constructed_with_arguments(counting):
    def fn(x):
        a = OrderedDict([("a", x), ("b", 2)])
        b = OrderedDict(a=x, b=3)
        c = collections.OrderedDict({"z": x * 2})
        a.move_to_end("a")
        return a["a"] + b["b"] + c["z"], list(a), b, type(c) is OrderedDict

    _check(counting, fn, torch.randn(3))


def test_dict_fromkeys(counting):
    def fn(x):
        d = dict.fromkeys(["a", "b"], 0)
        d["a"] += 1
        shared = dict.fromkeys("xy", [])  # noqa: RUF024  (one list under both keys, as meant)
        shared["x"].append(1)
        return x + d["a"] + d["b"], dict.fromkeys("pq"), shared

    _check(counting, fn, torch.randn(3))


def test_dict_update_spellings(counting):
    def fn(x):
        d = {}
        d.update([("a", x)])
        d.update({"b": x * 2})
        d.update(collections.OrderedDict(c=3))
        d.update(e=4)
        return d

    _check(counting, fn, torch.randn(3))


def test_dict_from_kwargs_pairs_and_subclass_kwargs(counting):
    def fn(x, **kwargs):
        return dict(**kwargs), dict([("a", x)]), Config(a=x, b=1)["a"] + 1, dict(kwargs, c=3)

    _check(counting, lambda x: fn(x, k=1, j=2), torch.randn(3))


def test_get_and_hasattr_on_a_dict_built_in_the_trace(counting):
    def fn(x):
        d = {"a": x}
        return d.get("a") + 1, d.get("b", 3), hasattr(d, "keys"), hasattr(d, "nope"), hasattr({}, "items")

    _check(counting, fn, torch.randn(3))


def test_size_dtype_and_type_keys(counting):
    def fn(x):
        d = {x.shape: 1, torch.float32: 2, int: 3}
        return x + d[x.shape] + d[x.dtype] + d[int], len(d)

    _check(counting, fn, torch.randn(3))


def test_sorted_items_by_value(counting):
    def fn(x):
        d = {"a": 3, "b": 1, "c": 2}
        order = sorted(d.items(), key=lambda kv: kv[1])
        return x * order[0][1], [k for k, _ in order], sorted(d, key=lambda k: -d[k])

    _check(counting, fn, torch.randn(3))


def test_sorted_by_key_with_tensor_values(counting):
    def fn(x):
        d = {"b": x, "a": x * 2}
        return [v + 1 for _, v in sorted(d.items(), key=lambda kv: kv[0])]

    _check(counting, fn, torch.randn(3))


def test_type_keyed_input_dict_guards_its_keys(counting):
    def fn(x, d):
        return x + d[int] + d[float]

    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(3)
    assert_same(compiled(x, {int: 1, float: 2}), fn(x, {int: 1, float: 2}))
    assert_same(compiled(x, {int: 1, float: 2}), fn(x, {int: 1, float: 2}))
    assert len(counting.graphs) == 1
    assert_same(compiled(x, {float: 2, int: 1}), fn(x, {float: 2, int: 1}))  # another key order
    assert len(counting.graphs) == 2
    assert kiln.session().stats.breaks == []


def test_defaultdict_input_missing_key_and_mutation_replayed(counting):
    def fn(x, d):
        d["new"].append(1)
        return x + len(d["a"]) + len(d["new"])

    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(3)
    mine, theirs = defaultdict(list, {"a": [1, 2]}), defaultdict(list, {"a": [1, 2]})
    assert_same(compiled(x, mine), fn(x, theirs))
    assert_same(mine, theirs)
    assert type(mine) is defaultdict and mine.default_factory is list
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def test_defaultdict_input_guarded_on_factory_and_keys(counting):
    def fn(x, d):
        return x + len(d["k"])

    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(3)
    for d, graphs in [(defaultdict(list), 1), (defaultdict(list), 1), (defaultdict(tuple), 2),
                      (defaultdict(list, {"k": [1]}), 3)]:
        expected_arg = defaultdict(d.default_factory, {k: list(v) for k, v in d.items()})
        assert_same(compiled(x, d), fn(x, expected_arg))
        assert_same(d, expected_arg)
        assert len(counting.graphs) == graphs
    assert kiln.session().stats.breaks == []


def test_defaultdict_input_read_only_where_read(counting):
    def fn(x, d):
        return x * d["a"]

    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(3)
    assert_same(compiled(x, defaultdict(int, a=2, b=3)), fn(x, defaultdict(int, a=2, b=3)))
    assert_same(compiled(x, defaultdict(int, a=2, b=4)), fn(x, defaultdict(int, a=2, b=4)))  # b unread
    assert len(counting.graphs) == 1
    assert_same(compiled(x, defaultdict(int, a=5, b=3)), fn(x, defaultdict(int, a=5, b=3)))
    assert len(counting.graphs) == 2
    assert kiln.session().stats.breaks == []
