"""Dict views and iterators under kiln are live, as in eager Python: they read their dict or
list when they are used, not when they were made. Compared with eager, counting graphs."""

import pytest
import torch
from e2e_support import assert_same

import kiln


def _check(counting, fn, *args, graphs=1):
    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(*args), fn(*args))
    assert len(counting.graphs) == graphs
    assert kiln.session().stats.breaks == []


@pytest.mark.parametrize("kind", ["keys", "values", "items"])
def test_a_view_sees_later_insertions_in_a_trace_dict(counting, kind):
    def fn(t):
        d = {1: t}
        v = getattr(d, kind)()
        d[4] = t * 2
        return t + len(v), list(v), bool(v)

    _check(counting, fn, torch.ones(2))


@pytest.mark.parametrize("kind", ["keys", "values", "items"])
def test_a_view_of_an_input_dict_sees_later_changes(counting, kind):
    def fn(t, d):
        v = getattr(d, kind)()
        d["new"] = t + 1
        del d["a"]
        return len(v), list(v)

    d_c, d_e = {"a": torch.zeros(2), "b": 1}, {"a": torch.zeros(2), "b": 1}
    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(torch.ones(2), d_c), fn(torch.ones(2), d_e))
    assert_same(d_c, d_e)
    assert len(counting.graphs) == 1


def test_membership_in_views_after_mutation(counting):
    def fn(t):
        d = {"a": 1}
        keys, values, items = d.keys(), d.values(), d.items()
        d["b"] = 2
        return t + 1, "b" in keys, 2 in values, ("b", 2) in items, ("b", 3) in items

    _check(counting, fn, torch.ones(2))


def test_set_operations_on_keys_views(counting):
    def fn(t):
        d = {"a": t, "b": 2}
        e = {"b": 0, "c": 0}
        k = d.keys()
        d["z"] = 1
        return (t + 1, sorted(k & {"a", "z", "q"}), sorted(k - ["a"]), sorted(k | e.keys()),
                sorted(k ^ e.keys()), sorted(["b", "y"] & k), k == {"a", "b", "z"}, k <= {"a", "b", "z", "w"},
                k.isdisjoint(["q"]), type(k & e.keys()).__name__)

    _check(counting, fn, torch.ones(2))


def test_reversed_dicts_and_views(counting):
    def fn(t):
        d = {"a": t, "b": t * 2}
        r = reversed(d.values())
        d["c"] = t * 3  # a changed size: eager raises when r is used; this one is made after
        return t + 1, list(reversed(d)), list(reversed(d.items()))[0][0], list(reversed(d.keys())), type(r).__name__  # noqa: RUF015

    _check(counting, fn, torch.ones(2))


def test_iterating_a_dict_that_changes_size_raises_as_in_eager(counting):
    def fn(t):
        d = {"a": 1, "b": 2}
        try:
            for k in d:
                d[k + "x"] = 0
        except RuntimeError as e:
            return t + 1, e.args
        return t

    _check(counting, fn, torch.ones(2))


def test_values_changed_while_iterating_items_are_seen(counting):
    def fn(t):
        d = {"a": t, "b": t}
        seen = []
        for _k, v in d.items():
            seen.append(v)
            d["b"] = v * 10  # changing a value is allowed
        return seen

    _check(counting, fn, torch.ones(2))


def test_returned_views_stay_live(counting):
    def fn(t, d):
        mine = {"k": t}
        return d.keys(), mine, mine.values(), d.items()

    compiled = kiln.compile(fn, backend=counting)
    d_c, d_e = {"a": 1}, {"a": 1}
    got, want = compiled(torch.ones(2), d_c), fn(torch.ones(2), d_e)
    for out, d in ((got, d_c), (want, d_e)):
        d["later"] = 2
        out[1]["also"] = torch.zeros(2)
    assert list(got[0]) == list(want[0]) == ["a", "later"]
    assert len(got[2]) == len(want[2]) == 2
    assert list(got[3]) == list(want[3])
    assert type(got[0]) is type(want[0]) and type(got[2]) is type(want[2])


def test_a_list_iterator_sees_appends(counting):
    def fn(t, xs):
        it = iter(xs)
        first = next(it)
        xs.append(t * 5)
        return first, list(it)

    compiled = kiln.compile(fn, backend=counting)
    xs_c, xs_e = [torch.zeros(2), torch.ones(2)], [torch.zeros(2), torch.ones(2)]
    assert_same(compiled(torch.ones(2), xs_c), fn(torch.ones(2), xs_e))
    assert_same(xs_c, xs_e)
    assert len(counting.graphs) == 1


def test_an_exhausted_list_iterator_stays_exhausted(counting):
    def fn(t):
        xs = [t]
        it = iter(xs)
        list(it)
        xs.append(t + 1)
        return t * 2, list(it)

    _check(counting, fn, torch.ones(2))


def test_a_loop_over_a_list_that_grows(counting):
    def fn(t):
        xs = [t, t + 1]
        out = []
        for x in xs:
            out.append(x * 2)
            if len(xs) < 4:
                xs.append(x + 10)
        return out

    _check(counting, fn, torch.ones(2))


def test_breaking_out_of_a_loop_keeps_the_iterator_position(counting):
    def fn(t):
        it = iter([t, t + 1, t + 2])
        for x in it:  # noqa: B007  (x is read after the loop)
            break
        return x, next(it), list(it)

    _check(counting, fn, torch.ones(2))


@pytest.mark.parametrize("wrapper", ["enumerate", "zip", "map", "filter", "reversed"])
def test_lazy_builtins_over_a_list_changed_later(counting, wrapper):
    def fn(t):
        xs = [t, t + 1]
        if wrapper == "enumerate":
            w = enumerate(xs, 1)
        elif wrapper == "zip":
            w = zip(xs, xs, strict=False)
        elif wrapper == "map":
            w = map(lambda v: v * 2, xs)
        elif wrapper == "filter":
            w = filter(lambda v: v is not None, xs)
        else:
            w = reversed(xs)
        xs[0] = t * 7
        if wrapper != "reversed":
            xs.append(t + 2)
        return list(w), type(w).__name__

    _check(counting, fn, torch.ones(2))


def test_map_calls_its_function_when_items_are_pulled(counting):
    def fn(t):
        calls = []

        def f(v):
            calls.append(len(calls))
            return v + len(calls)

        m = map(f, [t, t, t])
        before = list(calls)
        first = next(m)
        return first, before, list(calls), [v * 2 for v in m], list(calls)

    _check(counting, fn, torch.ones(2))


def test_any_and_all_stop_at_the_deciding_item(counting):
    def fn(t):
        seen = []

        def check(v):
            seen.append(v)
            return v > 1

        return t + 1, any(map(check, [0, 2, 5])), all(map(check, [3, 0, 7])), seen

    _check(counting, fn, torch.ones(2))


def test_zip_strict_raises_as_in_eager(counting):
    def fn(t):
        try:
            list(zip([t, t], [t], strict=True))
        except ValueError as e:
            return t + 1, e.args
        return t

    _check(counting, fn, torch.ones(2))


def test_an_iterator_passed_across_a_graph_break_keeps_its_position_and_list(counting):
    def fn(t, xs):
        it = iter(xs)
        next(it)
        n = t.sum().item()  # a graph break
        xs.append(t * n)
        return list(it)

    compiled = kiln.compile(fn, backend=counting)
    xs_c, xs_e = [torch.zeros(2), torch.ones(2)], [torch.zeros(2), torch.ones(2)]
    assert_same(compiled(torch.ones(2), xs_c), fn(torch.ones(2), xs_e))
    assert_same(xs_c, xs_e)


def test_views_of_an_ordered_dict_have_its_view_types(counting):
    def fn(t, od):
        k, v = od.keys(), od.values()
        od["z"] = t
        return t + 1, type(k).__name__, type(v).__name__, list(k)

    import collections

    od_c, od_e = collections.OrderedDict(a=1), collections.OrderedDict(a=1)
    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(torch.ones(2), od_c), fn(torch.ones(2), od_e))
    assert len(counting.graphs) == 1


def test_sets_iterate_in_eagers_order(counting):
    # string hashes change with each process: the order is compared within this one
    words = [f"w{i}" for i in range(40)]

    def fn(t, d):
        s = {3, 1, 2, 100, 17}
        s.add(-5)
        letters = set(words)
        letters -= {"w3", "w7"}
        letters.discard("w11")
        u = d.keys() - {"w1"}
        both = d.keys() & {"w2", "w5", "w30", "zz"}
        return t + 1, list(s), list(letters), list(u), list(both), letters.pop(), list(frozenset(words[:9]))

    d = dict.fromkeys(words, 0)
    _check(counting, fn, torch.ones(2), d)
