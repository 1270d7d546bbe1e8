"""Functions made while tracing (MAKE_FUNCTION) that outlive the trace, and closures over
cells not assigned yet (issue 11).

A ``def``/``lambda`` made inside a compiled frame that escapes it (stored into an attribute,
dict or list of an object from the frame, returned, or live at a graph break) is rebuilt by
the replacement as a real function: the same code, globals, name, qualname, defaults,
keyword defaults and annotations, one object per call whatever the number of places it
escapes to, and closure cells shared exactly as eager shares them. An empty closure cell is
a state like any other: guarded as empty, never a crash."""

import types

import pytest
import torch
from e2e_support import assert_same

import kiln
import kiln._policy as policy


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
    assert_same(actual.__defaults__, expected.__defaults__, "__defaults__")
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
            return a * late
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
