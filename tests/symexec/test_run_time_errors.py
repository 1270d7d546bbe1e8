"""may_raise: which ops of a traced graph can fail on values the trace never saw."""

import torch

from kiln.symexec import capture
from kiln.symexec._output_graph import MUTATES
from kiln.symexec._run_time_errors import may_raise


def _ops(fn, *args):
    """{op name: may_raise} of the graph traced from ``fn(*args)``."""
    names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    c = capture(fn.__code__, dict(zip(names, args, strict=True)), fn.__globals__)
    found = {}
    for node in c.graph_module.graph.nodes:
        if node.op in ("call_function", "call_method"):
            name = node.target if isinstance(node.target, str) else node.target.__name__
            found[name] = may_raise(node, MUTATES)
    return found


def test_float_arithmetic_views_and_slices_cannot_raise():
    def fn(x):
        return (x * 2 + 1).relu().sum(), x[1:, None].transpose(0, 1), torch.tanh(x).view(-1)

    ops = _ops(fn, torch.randn(3, 3))
    assert ops and not any(ops.values()), ops


def test_tensor_indices_in_place_ops_and_integer_division_may_raise():
    x, i = torch.randn(4, 3), torch.tensor([1])
    assert _ops(lambda x, i: x[i], x, i) == {"getitem": True}
    assert _ops(lambda x, i: x.index_add_(0, i, x[:1]), x, i)["index_add_"] is True
    # in place on one float tensor cannot fail; with another tensor (which may overlap it)
    # or on integers it may
    assert _ops(lambda x: x.add_(1), x) == {"add_": False}
    assert _ops(lambda x, y: x.add_(y), x, x.clone()) == {"add_": True}
    assert _ops(lambda k: k.add_(1), torch.arange(3)) == {"add_": True}
    assert _ops(lambda k, i: k // i, torch.arange(3), i) == {"floordiv": True}
    assert _ops(lambda k: k + 1, torch.arange(3)) == {"add": True}  # not a float tensor


def test_unknown_ops_may_raise():
    assert _ops(lambda x: torch.nonzero(x), torch.randn(3)) == {"nonzero": True}
