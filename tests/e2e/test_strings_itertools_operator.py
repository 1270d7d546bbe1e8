"""Strings, ``operator`` getters and ``itertools`` over traced values (issue 13): f-strings,
``str.format``, ``%``, ``"_".join`` and ``str``/``repr`` of values known at trace time;
``itemgetter``/``attrgetter`` made in the trace or passed in; ``itertools`` iterators over
lists, tuples and ranges whose items may be tensors. Compared with eager, in one graph, with
no break."""

import itertools
import operator

import torch
from e2e_support import assert_same, check_one_graph

import kiln


class Point:
    """A plain object read by ``attrgetter``."""

    def __init__(self, x, y):
        self.x = x
        self.y = y
        self.inner = self


_check = check_one_graph


# -- strings -------------------------------------------------------------------------------

def test_fstring_of_static_sizes_with_specs_and_conversions(counting):
    def fn(x):
        n, m = x.shape
        key = f"{n}x{m:03d}|{1.5:.2f}|{'a'!r}|{'b'!s}|{(n, m)}|{n:>4}"
        return x * len(key), key

    _check(counting, fn, torch.randn(3, 4))


def test_fstring_of_type_name(counting):
    def fn(x, p):
        return x + 1, f"{type(x).__name__}:{type(p).__name__}:{type(3).__name__}"  # noqa: UP003

    _check(counting, fn, torch.randn(3), Point(1, 2))


def test_str_format(counting):
    def fn(x):
        n = x.shape[0]
        s = "{0}-{1:.1f}-{name}-{0}".format(n, 2.25, name="k") + "{}{}".format(n, "z")
        return x * n, s, "{:>5}|{!r}".format("ab", "cd")

    _check(counting, fn, torch.randn(4))


def test_percent_formatting(counting):
    def fn(x):
        n = x.shape[0]
        return x - 1, "layer_%d_%s_%.3f" % (n, "w", 0.5), "%s" % "alone", "%(a)s=%(b)d" % {"a": "k", "b": n}  # noqa: UP031

    _check(counting, fn, torch.randn(5))


def test_join_of_python_strings(counting):
    def fn(x, names):
        parts = [str(s) for s in x.shape] + list(names)
        return x * 2, "_".join(parts), ",".join(n.upper() for n in names), "-".join(("a", "b"))

    _check(counting, fn, torch.randn(2, 3), ["p", "q"])


def test_str_and_repr_of_values(counting):
    def fn(x):
        n = x.shape[0]
        return x + n, str(n), repr(n), str(1.5), repr("s"), str("s"), str((n, 2.0, "a")), repr((1, "b"))  # noqa: UP018

    _check(counting, fn, torch.randn(3))


def test_string_keys_built_in_a_loop(counting):
    def fn(x):
        out = {}
        for i in range(3):
            out[f"layer.{i}.weight"] = x * i
        return out["layer.2.weight"] + out["layer.1.weight"], sorted(out)

    _check(counting, fn, torch.randn(3))


# -- operator getters ------------------------------------------------------------------------

def test_itemgetter_made_in_the_trace(counting):
    def fn(x, y):
        first = operator.itemgetter(0)
        pair = operator.itemgetter(1, 0)
        key = operator.itemgetter("b")
        return first((x, y)) * 2, pair([x, y]), key({"a": x, "b": y}) + 1, first(x)

    _check(counting, fn, torch.randn(3, 2), torch.randn(3, 2))


def test_itemgetter_passed_in(counting):
    def fn(x, get):
        return get((x, x + 1, x + 2))

    _check(counting, fn, torch.randn(3), operator.itemgetter(2, 0))


def test_itemgetter_as_sort_key(counting):
    def fn(x):
        pairs = [("b", 2), ("a", 3), ("c", 1)]
        order = sorted(pairs, key=operator.itemgetter(1))
        return x * order[0][1], [k for k, _ in order]

    _check(counting, fn, torch.randn(3))


def test_attrgetter_on_objects(counting):
    def fn(x, p, get):
        xy = operator.attrgetter("x", "y")(p)
        deep = operator.attrgetter("inner.y")(p)
        return x * xy[0] + xy[1] + deep + get(x).sum()

    _check(counting, fn, torch.randn(2, 3), Point(2, 5), operator.attrgetter("T"))


# -- itertools -------------------------------------------------------------------------------

def test_chain_and_from_iterable_over_tensors(counting):
    def fn(x, y):
        a = list(itertools.chain([x, y], (x * 2,), range(2)))
        b = list(itertools.chain.from_iterable([[x], (y, y)]))
        return torch.stack(a[:3]).sum(0) + a[3] + a[4], torch.stack(b)

    _check(counting, fn, torch.randn(3), torch.randn(3))


def test_accumulate_with_and_without_function(counting):
    def fn(x):
        xs = [x, x * 2, x * 3]
        sums = list(itertools.accumulate(xs))
        prods = list(itertools.accumulate(xs, operator.mul))
        maxes = list(itertools.accumulate(xs, torch.maximum))
        offsets = list(itertools.accumulate([1, 2, 3], initial=10))
        return sums, prods, maxes, offsets

    _check(counting, fn, torch.randn(3))


def test_product_combinations_permutations(counting):
    def fn(x, y):
        out = [a * b for a, b in itertools.product([x, y], range(1, 3))]
        out += [a + b for a, b in itertools.combinations((x, y, x * 2), 2)]
        out += [a - b for a, b in itertools.permutations([x, y])]
        return torch.stack(out), list(itertools.product("ab", repeat=2))

    _check(counting, fn, torch.randn(3), torch.randn(3))


def test_zip_longest_islice_repeat_count(counting):
    def fn(x, y):
        longest = [(a if a is not None else 0) + (b if b is not None else 0)
                   for a, b in itertools.zip_longest([x, y], [y])]
        filled = list(itertools.zip_longest([x], [y, y], fillvalue=1.0))
        first = list(itertools.islice([x, y, x, y], 1, 4, 2))
        rep = list(itertools.repeat(x, 2))
        counted = [t * i for i, t in zip(itertools.count(1), [x, y])]
        stepped = [t * i for t, i in zip([x, y], itertools.count(0.5, 0.5))]
        return longest, filled[1][0] + filled[1][1], first, rep, counted, stepped

    _check(counting, fn, torch.randn(3), torch.randn(3))


def test_itertools_in_a_module_forward(counting):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

        def forward(self, x):
            outs = []
            for i, (a, b) in enumerate(itertools.pairwise(self.layers)):
                outs.append(b(a(x)) * i)
            names = "_".join(f"{type(m).__name__}{i}" for i, m in enumerate(self.layers))
            return sum(itertools.chain(outs, [x])), names

    net = Net()
    _check(counting, net, torch.randn(2, 4))


def test_string_of_a_dynamic_size_is_never_wrong(counting):
    def fn(x):
        return x + 1, f"n={x.shape[0]}", "_".join(str(s) for s in x.shape)

    compiled = kiln.compile(fn, backend=counting)
    for n in (3, 4, 5, 6):
        x = torch.randn(n, 2)
        assert_same(compiled(x), fn(x))
    assert len(counting.graphs) == 4  # the text needs each size: guarded by value, recompiled
    assert kiln.session().stats.breaks == []


def test_unbounded_count_list_falls_back_cleanly(counting):
    def fn(x, xs):
        return [t * i for i, t in zip(itertools.count(), itertools.chain(xs, [x]))]

    _check(counting, fn, torch.randn(3), (torch.randn(3), torch.randn(3)))
