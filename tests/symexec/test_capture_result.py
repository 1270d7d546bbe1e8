"""Capture's answers about itself: which graphs can start user frames, which numbers and sizes
its guards fix (what a later capture may take as varying), its fake inputs and op names."""

import inspect
import operator

import pytest
import torch
from torch import nn

from kiln.fxgraph import Graph, GraphModule
from kiln.guards import EqualsMatch, LocalSource
from kiln.symexec import capture
from kiln.symexec._capture_result import may_start_user_frames


def _frame(fn, *args):
    bound = inspect.signature(fn).bind(*args)
    return fn.__code__, dict(bound.arguments), fn.__globals__


class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


# -- may_start_user_frames ---------------------------------------------------------------------

def test_a_graph_of_torch_ops_starts_no_user_frame():
    def plain(x):
        return torch.relu(x * 2).sin().sum(-1)

    cap = capture(*_frame(plain, torch.randn(3)))
    assert cap.may_start_user_frames is False


def test_a_graph_calling_an_autograd_functions_apply_may_start_user_frames():
    def custom(x):
        return _Twice.apply(x).sin()

    cap = capture(*_frame(custom, torch.randn(3, requires_grad=True)))
    assert cap.may_start_user_frames is True


def _graph_of(build):
    g = Graph()
    x = g.placeholder("x")
    g.output(build(g, x))
    return GraphModule({"sub": nn.ReLU()}, g)


def _user_function(t):
    return t + 1


@pytest.mark.parametrize("build, starts", [
    (lambda g, x: g.call_function(torch.relu, (x,)), False),
    (lambda g, x: g.call_method("sin", (x,)), False),
    (lambda g, x: g.call_function(operator.add, (x, 1)), False),
    (lambda g, x: g.call_module("sub", (x,)), True),  # a module's forward is Python
    (lambda g, x: g.call_function(_user_function, (x,)), True),
    (lambda g, x: g.call_function(torch.autograd.Function.apply, (x,)), True),
    (lambda g, x: g.call_function(torch.func.vmap, (_user_function,)), True),  # a callable argument
], ids=["torch", "method", "operator", "module", "user function", "apply", "callable argument"])
def test_which_graphs_may_start_user_frames(build, starts):
    assert may_start_user_frames(_graph_of(build).graph) is starts


# -- specializations ---------------------------------------------------------------------------

def test_specializations_name_the_numbers_fixed_by_value_and_no_bools():
    def f(x, n, scale, flag, name):
        y = x * n * scale
        return y + 1 if flag and name == "a" else y

    cap = capture(*_frame(f, torch.randn(3), 3, 0.5, True, "a"))
    assert dict(cap.specializations.numbers()) == {LocalSource("n"): 3, LocalSource("scale"): 0.5}


def test_a_number_taken_as_a_graph_input_is_not_fixed():
    def f(x, scale):
        return x * scale

    cap = capture(*_frame(f, torch.randn(3), 0.5), dynamic_numbers=frozenset({LocalSource("scale")}))
    assert list(cap.specializations.numbers()) == []
    assert cap.fake_inputs[1] == 0.5 and cap.example_inputs[1] == 0.5


def test_specializations_name_the_sizes_of_plain_tensors_only():
    def f(layer, x, y):
        return layer(x) + y

    cap = capture(*_frame(f, nn.Linear(4, 2), torch.randn(3, 4), torch.randn(3, 2)),
                  dynamic_dims={LocalSource("y"): frozenset({0})})
    # the Linear's weight and bias are guarded too (parameters stay static): not here
    assert dict(cap.specializations.tensor_sizes()) == {LocalSource("x"): (3, 4), LocalSource("y"): (None, 2)}


def test_specializations_see_guards_added_to_the_capture_later():
    def f(x):
        return x + 1

    cap = capture(*_frame(f, torch.randn(3)))
    fixed = cap.specializations
    assert list(fixed.numbers()) == []
    cap.guards.add(EqualsMatch(LocalSource("k"), 7))  # a stage's guard sink, added by the policy
    assert list(fixed.numbers()) == [(LocalSource("k"), 7)]


# -- fake inputs and op names ------------------------------------------------------------------

def test_fake_inputs_stand_for_the_example_inputs():
    def f(x, w):
        return (x @ w).relu()

    x, w = torch.randn(3, 4), torch.randn(4, 5)
    cap = capture(*_frame(f, x, w))
    assert len(cap.fake_inputs) == len(cap.example_inputs) == 2
    for fake, real in zip(cap.fake_inputs, cap.example_inputs, strict=True):
        assert fake is not real and fake.shape == real.shape and fake.dtype == real.dtype


def test_op_names_are_the_graphs_calls_in_order():
    def f(x):
        return (x * 2).sin().sum(-1)

    cap = capture(*_frame(f, torch.randn(3)))
    assert cap.op_names == ["mul", "sin", "sum"]
    assert len(cap.op_names) == cap.op_count
