"""Automatic dynamic numbers: a Python int or float first compiles as a constant; once a
recompile shows it changed, it becomes a graph input, so further values reuse one graph (as
under torch.compile). Uses that need its value (branches, sizes, indices) specialize it
again, and stay correct; bools stay constants."""

import pytest
import torch
from e2e_support import CountingBackend
from torch import nn

import kiln


def test_a_changing_float_argument_compiles_twice_for_any_number_of_values():
    def fn(x, s):
        t = 1.0 / (1 + abs(s))  # float arithmetic: computed by the graph
        return x * s + t, s

    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    for s in (0.5, 0.7, 1.3, 2.0, -3.0):
        x = torch.randn(3)
        got, want = compiled(x, s), fn(x, s)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == s and type(got[1]) is float
    assert len(backend.graphs) == 2
    assert "x * s" in backend.graphs[1].code  # the float is an input of the second graph


def test_a_value_the_trace_needs_is_specialized_again():
    def fn(x, s):
        if s > 1.0:  # the branch needs the value: guarded by value again
            return x * s
        return x - s

    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    values = (0.5, 0.7, 1.3, 2.0)
    for s in values:
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x, s), fn(x, s))
    assert len(backend.graphs) == len(values)


def test_a_float_given_to_an_op_whose_result_depends_on_it_is_specialized():
    def fn(x, s):
        return x + torch.full((2,), s) + clamp_within(x, s)

    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    for s in (0.5, 0.7, 0.9):
        x = torch.randn(2)
        torch.testing.assert_close(compiled(x, s), fn(x, s))
    assert len(backend.graphs) == 3


def clamp_within(x, s):
    return x.clamp(min=-s, max=s)  # stays an input here: -s is computed by the graph


@kiln.disable
def _eager_item(t):
    return t.item()  # a Python number from a call kiln does not trace (a graph break)


def _graphs_over_four_inputs(fn):
    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    for _ in range(4):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), fn(x))
    return len(backend.graphs)


def test_item_results_passed_to_a_resume_function_become_inputs():
    def fn(x):
        n = _eager_item(x.sum())
        return x * n

    # the graph before the break; the resume for the first value; the resume with n an input
    assert _graphs_over_four_inputs(fn) == 3


def test_an_item_result_stays_in_the_graph_for_every_value():
    def fn(x):
        n = x.sum().item()  # a data-dependent number the graph computes
        return x * n

    assert _graphs_over_four_inputs(fn) == 1


def test_a_module_attribute_that_changes_becomes_an_input():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.temperature = 1.0

        def forward(self, x):
            return torch.softmax(x / self.temperature, dim=-1)

    model = Scaled()
    backend = CountingBackend()
    compiled = kiln.compile(model, backend=backend)
    for t in (1.0, 0.5, 0.25, 2.0):
        model.temperature = t
        x = torch.randn(2, 4)
        torch.testing.assert_close(compiled(x), model(x))
    assert len(backend.graphs) == 2


def test_dynamic_false_specializes_every_value():
    def fn(x, s):
        return x * s

    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend, dynamic=False)
    for s in (0.5, 0.7, 1.3):
        torch.testing.assert_close(compiled(torch.ones(2), s), torch.ones(2) * s)
    assert len(backend.graphs) == 3


@pytest.mark.parametrize("other", [3, True, None])
def test_another_type_in_place_of_the_float_recompiles(other):
    def fn(x, s):
        return x * (s if s is not None else 2)

    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    for s in (0.5, 0.7, 1.5):
        torch.testing.assert_close(compiled(torch.ones(2), s), fn(torch.ones(2), s))
    assert len(backend.graphs) == 2
    torch.testing.assert_close(compiled(torch.ones(2), other), fn(torch.ones(2), other))
    assert len(backend.graphs) == 3


def test_a_changing_int_in_tensor_arithmetic_becomes_an_input():
    def fn(x, n):
        return x * n + (n - 1), n

    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    for n in (2, 3, 5, 7, 11):
        x = torch.arange(4)  # an integer tensor: int arithmetic keeps its dtype
        got, want = compiled(x, n), fn(x, n)
        assert got[1] == n and type(got[1]) is int
        torch.testing.assert_close(got[0], want[0])
    assert len(backend.graphs) == 2


@pytest.mark.parametrize("use", ["slice", "range", "view", "ones"])
def test_an_int_used_as_a_size_or_index_is_specialized(use):
    def fn(x, n):
        if use == "slice":
            return x[:n] * 2
        if use == "range":
            return sum(x[i] for i in range(n))
        if use == "view":
            return x.view(n, -1) + 1
        return x[:n] + torch.ones(n)

    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    values = (2, 4, 2, 8)
    for n in values:
        x = torch.arange(8.0)
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    assert len(backend.graphs) == len(set(values))


def test_an_integer_item_becomes_an_input_of_the_resume_function():
    def fn(x, counts):
        k = _eager_item(counts.sum())  # an int
        return x * k

    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    for i in range(4):
        counts = torch.tensor([i, 2 * i, 1])
        torch.testing.assert_close(compiled(torch.ones(2), counts), fn(torch.ones(2), counts))
    assert len(backend.graphs) == 3


def test_bools_stay_constants():
    def fn(x, flag):
        return x * 2 if flag else x - 1

    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    for flag in (True, False, True, False):
        torch.testing.assert_close(compiled(torch.ones(2), flag), fn(torch.ones(2), flag))
    assert len(backend.graphs) == 2
