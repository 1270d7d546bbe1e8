"""Generators and iterators (issue 13): ``yield from`` in generator functions called from the
compiled code (a module's ``parameters()`` override among them), the value a generator's
``return`` gives (to ``x = yield from gen()`` and on its StopIteration), and objects of user
classes with ``__iter__``/``__next__`` iterated with ``for``, ``list()``, ``zip`` and
``next(iter(...))``. Compared with eager, in one graph, with no break."""

import copy

import torch
from e2e_support import assert_same

import kiln


def _check(counting, fn, *args, graphs=1):
    compiled = kiln.compile(fn, backend=counting, fullgraph=True)
    expected = fn(*copy.deepcopy(args))
    assert_same(compiled(*args), expected)
    assert len(counting.graphs) == graphs
    assert kiln.session().stats.breaks == []
    return compiled


class Countdown:
    """An iterator class: ``__iter__`` returns itself, ``__next__`` counts up to ``n``."""

    def __init__(self, n):
        self.n = n
        self.i = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i


class Pairs:
    """An iterable whose ``__iter__`` is a generator."""

    def __init__(self, items):
        self.items = items

    def __iter__(self):
        for i in range(0, len(self.items), 2):
            yield self.items[i], self.items[i + 1]


class Failing:
    def __iter__(self):
        return self

    def __next__(self):
        raise ValueError("no items")


def _inner(x):
    yield x + 1
    yield x * 2
    return 7


def _outer(x):
    r = yield from _inner(x)
    yield x - r


def _returns(x):
    yield x
    return x * 3


def test_yield_from_a_generator_and_its_return_value(counting):
    def fn(x):
        return sum(_outer(x))

    _check(counting, fn, torch.randn(3))


def test_yield_from_lists_ranges_and_generator_expressions(counting):
    def gen(x):
        yield from range(3)
        yield from [x, x + 1]
        yield from (t * 2 for t in (x,))

    def fn(x):
        return list(gen(x))

    _check(counting, fn, torch.randn(3))


def test_nested_yield_from_passes_return_values_up(counting):
    def fn(x):
        def middle():
            v = yield from _returns(x)
            return v + 1

        out = []

        def top():
            r = yield from middle()
            out.append(r)

        items = list(top())
        return items, out[0]

    _check(counting, fn, torch.randn(3))


def test_module_parameters_override_with_yield_from(counting):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 3)
            self.b = torch.nn.Linear(3, 3)

        def parameters(self, recurse=True):
            yield from self.a.parameters()

        def forward(self, x):
            return self.b(x) + sum(p.sum() for p in self.parameters())

    _check(counting, Net(), torch.randn(2, 3))


def test_generator_return_value_on_its_stop_iteration(counting):
    def fn(x):
        g = _returns(x)
        first = g.__next__()
        try:
            g.__next__()
        except StopIteration as e:
            return first + e.value

    _check(counting, fn, torch.randn(3))


def test_stop_iteration_value_raised_and_caught(counting):
    def fn(x):
        try:
            raise StopIteration(5)
        except StopIteration as e:
            return x + e.value

    _check(counting, fn, torch.randn(3))


def test_user_iterator_in_a_for_loop(counting):
    def fn(x):
        for i in Countdown(3):
            x = x + i
        return x

    _check(counting, fn, torch.randn(3))


def test_user_iterator_with_list_and_exhaustion(counting):
    def fn(x):
        c = Countdown(4)
        first = list(c)
        again = list(c)  # exhausted: its __next__ raises StopIteration at once
        return x * sum(first), len(again)

    _check(counting, fn, torch.randn(3))


def test_user_iterator_break_leaves_its_state(counting):
    def fn(x):
        c = Countdown(5)
        for i in c:
            if i == 2:
                break
            x = x + i
        return x, c.i

    _check(counting, fn, torch.randn(3))


def test_user_iterator_passed_in_is_advanced_as_in_eager(counting):
    def fn(x, c):
        for i in c:
            x = x * i
        return x

    c = Countdown(3)
    compiled = kiln.compile(fn, backend=counting, fullgraph=True)
    assert_same(compiled(torch.ones(3), c), fn(torch.ones(3), Countdown(3)))
    assert c.i == 3
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def test_user_iterator_with_zip_enumerate_and_next_of_iter(counting):
    def fn(x):
        zipped = [a * b for a, b in zip(Countdown(3), (x, x + 1, x + 2), strict=True)]
        it = iter(Countdown(3))
        return zipped, list(enumerate(Countdown(2))), x + next(it) + next(it)

    _check(counting, fn, torch.randn(3))


def test_user_iterable_with_a_generator_iter(counting):
    def fn(x):
        return [a + b for a, b in Pairs([x, x * 2, x * 3, x * 4])]

    _check(counting, fn, torch.randn(3))


def test_user_iterator_raising_is_caught_as_in_eager(counting):
    def fn(x):
        try:
            for v in Failing():
                x = x + v
        except ValueError:
            x = x - 1
        return x

    _check(counting, fn, torch.randn(3))


class _Countdown:
    def __init__(self, n):
        self.n = n

    def __next__(self):
        if self.n == 0:
            raise StopIteration("done")
        self.n -= 1
        return self.n


def test_next_directly_on_a_user_iterator_object(counting):
    def f(x):
        c = _Countdown(2)
        a = next(c)
        b = next(c)
        last = next(c, -1)
        try:
            next(c)
        except StopIteration as e:
            why = e.value
        return x * a + b + last, why

    compiled = kiln.compile(f, backend=counting, fullgraph=True)
    x = torch.ones(2)
    assert_same(compiled(x), f(x))
    assert len(counting.graphs) == 1


def _gen():
    yield 1
    return "finished"


def test_next_of_a_finished_generator_carries_its_return_value(counting):
    def f(x):
        g = _gen()
        first = next(g)
        try:
            next(g)
        except StopIteration as e:
            value = e.value
        return x + first, value

    compiled = kiln.compile(f, backend=counting, fullgraph=True)
    x = torch.ones(2)
    assert_same(compiled(x), f(x))
    assert len(counting.graphs) == 1
