"""Functions made while tracing (MAKE_FUNCTION) that outlive the trace, and closures over
cells not assigned yet (issue 11).

A ``def``/``lambda`` made inside a compiled frame that escapes it (stored into an attribute,
dict or list of an object from the frame, returned, or live at a graph break) is rebuilt by
the replacement as a real function: the same code, globals, name, qualname, defaults,
keyword defaults and annotations, one object per call whatever the number of places it
escapes to, and closure cells shared exactly as eager shares them. An empty closure cell is
a state like any other: guarded as empty, never a crash."""

import functools
import types

import pytest
import torch
from e2e_support import assert_same, eager_item

import kiln


def _eager_and_compiled(counting, fn, make_args, calls=2):
    """Run ``fn`` eagerly and compiled on fresh arguments ``calls`` times; returns the pairs."""
    compiled = kiln.compile(fn, backend=counting)
    pairs = []
    for _ in range(calls):
        e_args, c_args = make_args(), make_args()
        pairs.append(((fn(*e_args), e_args), (compiled(*c_args), c_args)))
    return pairs


def _same_function(actual, expected):
    assert type(actual) is types.FunctionType
    for attr in ("__name__", "__qualname__", "__module__", "__doc__", "__code__",
                 "__kwdefaults__", "__annotations__"):
        assert getattr(actual, attr) == getattr(expected, attr), attr
    assert (actual.__defaults__ is None) == (expected.__defaults__ is None)
    for a, e in zip(actual.__defaults__ or (), expected.__defaults__ or (), strict=True):
        if type(e) is types.FunctionType:  # made by the same call: the same code
            assert type(a) is types.FunctionType and a.__code__ is e.__code__
        else:
            assert_same(a, e, "__defaults__")
    assert (actual.__closure__ is None) == (expected.__closure__ is None)
    assert actual.__globals__ is expected.__globals__


# --- closures over cells not assigned yet ----------------------------------------------------


def test_closure_over_a_cell_assigned_after_the_call(counting):
    def fn(x, lst):
        v2 = 0

        def g2(a):
            nonlocal v3
            return a * v2

        v3 = (lambda b: g2(b) * 2)(lst[0])
        v4 = x.tolist()  # noqa: F841  (forces the frame to run eagerly: it has cells)
        return v3

    for e, c in _eager_and_compiled(counting, fn, lambda: (torch.ones(2), [torch.arange(3.0)])):
        assert_same(c[0], e[0])


def _closure_with_an_empty_cell(scale):
    """``g`` closes over ``scale`` and ``late`` (empty until ``fill()``)."""

    def g(a):
        if scale > 5:
            return a * late  # noqa: F821  (a cell the test fills later)
        return a * scale

    def fill():
        nonlocal late
        late = 10

    late = 0
    del late  # the cell exists, empty
    return g, fill


@pytest.mark.parametrize("scale", [2, 7])
def test_function_read_from_the_frame_with_an_empty_cell_is_guarded_as_empty(counting, scale):
    def fn(x, h):
        return h(x) + 1

    g, fill = _closure_with_an_empty_cell(scale)
    compiled = kiln.compile(fn, backend=counting)
    x = torch.ones(3)
    if scale > 5:  # g reads the empty cell: NameError, eagerly and compiled
        with pytest.raises(NameError):
            fn(x, g)
        with pytest.raises(NameError):
            compiled(x, g)
        fill()
        assert_same(compiled(x, g), fn(x, g))
        return
    assert_same(compiled(x, g), fn(x, g))
    assert len(counting.graphs) == 1
    assert_same(compiled(x, g), fn(x, g))
    assert len(counting.graphs) == 1  # the entry holds while the cell stays empty
    fill()  # the cell is filled: the entry guarded on the empty cell is not reused
    assert_same(compiled(x, g), fn(x, g))
    assert len(counting.graphs) == 2
    assert_same(compiled(x, g), fn(x, g))
    assert len(counting.graphs) == 2


# --- functions made while tracing that escape ------------------------------------------------


def _check_breaks(fn, *args, graphs, breaks, reason=None):
    explained = kiln.explain(fn)(*args)
    assert (explained.graph_count, explained.graph_break_count) == (graphs, breaks), \
        [r.reason for r in explained.break_reasons]
    if reason is not None:
        assert any(reason in r.reason for r in explained.break_reasons), explained.break_reasons
    kiln.reset()


class Scale(torch.nn.Module):
    def forward(self, a):
        return a + 1


def test_module_forward_reassigned_to_a_lambda(counting):
    def fn(x, m):
        m.forward = lambda a: a * 3
        return x + 1

    _check_breaks(fn, torch.ones(2), Scale(), graphs=1, breaks=0)
    x = torch.arange(3.0)
    m_eager, m_compiled = Scale(), Scale()
    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(x, m_compiled), fn(x, m_eager))
    _same_function(m_compiled.forward, m_eager.forward)
    assert_same(m_compiled(x), m_eager(x))  # called later, eagerly
    first = m_compiled.forward
    assert_same(compiled(x, m_compiled), fn(x, m_eager))  # a second compiled call
    assert m_compiled.forward is not first  # a new function per call, as eagerly
    _same_function(m_compiled.forward, m_eager.forward)
    assert_same(m_compiled(x), m_eager(x))
    assert kiln.session().stats.breaks == []


def test_module_forward_reassigned_then_called(counting):
    def fn(x, m):
        m.forward = lambda a: a * 3
        return m(x) + 1

    _check_breaks(fn, torch.ones(2), Scale(), graphs=1, breaks=0)
    x = torch.arange(3.0)
    m_eager, m_compiled = Scale(), Scale()
    compiled = kiln.compile(fn, backend=counting)
    for _ in range(2):
        assert_same(compiled(x, m_compiled), fn(x, m_eager))
        assert_same(m_compiled(x), m_eager(x))
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def test_the_same_function_stored_in_several_places_and_returned_is_one_object(counting):
    def fn(x, obj, d, lst):
        def g(a):
            return a * 2

        obj.g = g
        d["g"] = g
        lst.append(g)
        return g, g, x + 1

    def make_args():
        return torch.ones(2), types.SimpleNamespace(), {}, []

    for (e, _e_args), (c, c_args) in _eager_and_compiled(counting, fn, make_args):
        g = c[0]
        assert c[1] is g and c_args[1].g is g and c_args[2]["g"] is g and c_args[3][0] is g
        _same_function(g, e[0])
        assert_same(g(torch.ones(2)), e[0](torch.ones(2)))
        assert_same(c[2], e[2])
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def test_defaults_keyword_defaults_annotations_and_names_are_rebuilt(counting):
    def fn(x, k, obj):
        shared = [k]

        def h(a: int, b=x * 2, c=shared, *, d=k, e=shared) -> torch.Tensor:
            """h's doc"""
            return a + b + d

        obj.h = h
        obj.lam = lambda q=3, *, r=4: q + r
        return shared

    def make_args():
        return torch.ones(2), 5, types.SimpleNamespace()

    for (_e, e_args), (c, c_args) in _eager_and_compiled(counting, fn, make_args):
        h, lam = c_args[2].h, c_args[2].lam
        _same_function(h, e_args[2].h)
        _same_function(lam, e_args[2].lam)
        assert h.__defaults__[1] is c and h.__kwdefaults__["e"] is c  # identity of the list kept
        assert h.__doc__ == "h's doc"
        assert_same(h(1), e_args[2].h(1))
        assert_same(lam(), e_args[2].lam())
    assert kiln.session().stats.breaks == []


def test_a_function_live_at_a_graph_break(counting):
    def fn(x):
        g = lambda a, s=2: a * s  # noqa: E731
        n = eager_item(x.sum())  # a graph break
        return g(x) + n, g

    _check_breaks(fn, torch.ones(2), graphs=2, breaks=1)
    for (e, _), (c, _) in _eager_and_compiled(counting, fn, lambda: (torch.arange(3.0),)):
        assert_same(c[0], e[0])
        _same_function(c[1], e[1])


def test_closure_over_the_frames_own_free_variable_shares_its_cell(counting):
    def outer():
        scale = 2

        def fn(x, obj):
            obj.g = lambda a: a * scale
            obj.late = lambda: late  # noqa: F821  (a cell assigned after the call)
            return x + 1

        def set_scale(v):
            nonlocal scale, late
            scale = v
            late = v + 1

        late = 0
        del late  # a cell, empty when fn runs
        return fn, set_scale

    fn, set_scale = outer()
    compiled = kiln.compile(fn, backend=counting)
    x = torch.ones(2)
    eager_obj, obj = types.SimpleNamespace(), types.SimpleNamespace()
    assert_same(compiled(x, obj), fn(x, eager_obj))
    _same_function(obj.g, eager_obj.g)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__, strict=True))
    assert obj.g.__closure__[0] is cells["scale"]  # the very cell: later writes are seen
    assert obj.late.__closure__[0] is cells["late"]  # empty when the frame ran
    with pytest.raises(NameError):
        obj.late()
    set_scale(7)
    assert_same(obj.g(x), eager_obj.g(x))
    assert obj.late() == eager_obj.late() == 8
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def test_closures_over_cells_the_trace_made_share_one_cell(counting):
    def fn(x, d):
        count = 0

        def inc():
            nonlocal count
            count += 1
            return count

        inc()
        d["inc"] = inc
        d["get"] = lambda: count
        count += 10
        return x * count

    def make_args():
        return torch.ones(2), {}

    for (e, e_args), (c, c_args) in _eager_and_compiled(counting, fn, make_args):
        assert_same(c, e)
        d, d_eager = c_args[1], e_args[1]
        assert d["inc"].__closure__[0] is d["get"].__closure__[0]
        assert d["inc"]() == d_eager["inc"]() == 12
        assert d["get"]() == d_eager["get"]() == 12
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def test_a_recursive_function_closes_over_itself(counting):
    def fn(x, obj):
        def fact(n):
            return 1 if n <= 1 else n * fact(n - 1)

        obj.fact = fact
        return x * fact(3)

    for (e, e_args), (c, c_args) in _eager_and_compiled(
            counting, fn, lambda: (torch.ones(2), types.SimpleNamespace())):
        assert_same(c, e)
        fact = c_args[1].fact
        assert fact.__closure__[0].cell_contents is fact
        assert fact(5) == e_args[1].fact(5) == 120
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def _make_adder(k):
    return lambda a: a + k


def test_a_closure_made_by_an_inlined_function_escapes(counting):
    def fn(x, obj):
        obj.add = _make_adder(x * 2)
        return obj.add(x)

    for (e, e_args), (c, c_args) in _eager_and_compiled(
            counting, fn, lambda: (torch.ones(2), types.SimpleNamespace())):
        assert_same(c, e)
        _same_function(c_args[1].add, e_args[1].add)
        assert_same(c_args[1].add(torch.ones(2)), e_args[1].add(torch.ones(2)))
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def _closure_maker():
    y = [1]

    def mid():
        return lambda: y

    return mid


_mid = _closure_maker()


def test_a_closure_over_a_cell_outside_the_trace_is_not_rebuilt(counting):
    def fn(x, obj):
        obj.f = _mid()
        return x + 1

    _check_breaks(fn, torch.ones(2), types.SimpleNamespace(), graphs=0, breaks=1,
                  reason="closes over a variable of a function outside")
    for (e, e_args), (c, c_args) in _eager_and_compiled(
            counting, fn, lambda: (torch.ones(2), types.SimpleNamespace())):
        assert_same(c, e)
        assert c_args[1].f() is e_args[1].f() is _mid.__closure__[0].cell_contents


def _counter():
    n = 0

    def inc():
        nonlocal n
        n += 1
        return n

    return inc


def test_a_nonlocal_write_to_a_cell_outside_the_trace_is_not_lost(counting):
    def fn(x, inc):
        return x + inc()

    inc_eager, inc_compiled = _counter(), _counter()
    compiled = kiln.compile(fn, backend=counting)
    for _ in range(3):
        assert_same(compiled(torch.zeros(1), inc_compiled), fn(torch.zeros(1), inc_eager))
    assert inc_compiled() == inc_eager() == 4


def _closure_with_a_cell_emptied_later():
    v = torch.full((2,), 3.0)

    def g(a):
        return a * v

    def drop():
        nonlocal v
        del v

    return g, drop


def test_a_cell_emptied_after_the_compile_fails_the_guards_without_raising(counting):
    def fn(x, h):
        return h(x) + 1

    g, drop = _closure_with_a_cell_emptied_later()
    compiled = kiln.compile(fn, backend=counting)
    x = torch.ones(2)
    assert_same(compiled(x, g), fn(x, g))
    drop()  # the guards read the cell's contents (the tensor and the function's closure)
    with pytest.raises(NameError):
        fn(x, g)
    with pytest.raises(NameError):
        compiled(x, g)


def test_names_and_defaults_of_a_function_made_while_tracing_are_read_in_the_trace(counting):
    def fn(x):
        def h(a, b=2, c=x):
            return a

        lam = lambda: 0  # noqa: E731
        return (x + 1, h.__name__, h.__qualname__, h.__module__, h.__defaults__, lam.__name__,
                lam.__defaults__, h.__code__ is lam.__code__)

    for (e, _), (c, _) in _eager_and_compiled(counting, fn, lambda: (torch.ones(2),)):
        assert_same(c, e)
        assert c[4][1] is not None
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def test_partials_made_while_tracing_escape(counting):
    def fn(x, obj):
        p = functools.partial(torch.add, alpha=2)
        obj.p = p
        q = functools.partial(lambda a, b, c=1: a * b + c, x * 2)
        pq = functools.partial(q, 3, c=5)  # flattened into one partial, as eagerly
        return x + 1, p, q, pq, p

    def make_args():
        return torch.ones(2), types.SimpleNamespace()

    for (e, _e_args), (c, c_args) in _eager_and_compiled(counting, fn, make_args):
        assert_same(c[0], e[0])
        assert c[4] is c[1] is c_args[1].p
        t = torch.ones(2)
        for actual, expected, args in zip(c[1:4], e[1:4], [(t, t), (3,), ()], strict=True):
            assert type(actual) is functools.partial
            assert type(actual.func) is type(expected.func)
            assert_same(actual.args, expected.args)
            assert actual.keywords == expected.keywords
            assert_same(actual(*args), expected(*args))
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


STORED = None


def test_a_function_stored_before_a_graph_break_and_returned_after_it_is_one_object(counting):
    def fn(x, obj):
        global STORED
        g = lambda a, s=(1, 2): a * len(s)  # noqa: E731  (a constant default: no recompile)
        obj.g = g
        STORED = g
        n = eager_item(x.sum())  # a graph break: g is live there
        return g(x) + n, g

    _check_breaks(fn, torch.ones(2), types.SimpleNamespace(), graphs=2, breaks=1)
    compiled = kiln.compile(fn, backend=counting)
    for _ in range(2):
        e = fn(torch.arange(3.0), types.SimpleNamespace())
        obj = types.SimpleNamespace()
        c = compiled(torch.arange(3.0), obj)
        assert_same(c[0], e[0])
        assert c[1] is obj.g is STORED
        assert c[1].__defaults__[0] is STORED.__defaults__[0]
        _same_function(c[1], e[1])
    assert len(counting.graphs) == 2


def test_a_function_whose_default_closes_over_it_is_built_once(counting):
    def fn(x, obj):
        def b():
            return a

        def a(f=b):
            return a

        obj.a = a
        return x + 1

    for (e, e_args), (c, c_args) in _eager_and_compiled(
            counting, fn, lambda: (torch.ones(2), types.SimpleNamespace())):
        assert_same(c, e)
        a = c_args[1].a
        assert a() is a and a.__defaults__[0]() is a
        _same_function(a, e_args[1].a)
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []
