"""Which graph ops can raise when the graph runs, on data the trace never saw.

The trace runs every op on fake tensors, and the guards fix what the fakes assumed (dtype,
device, shape, strides, no aliasing between inputs). What is left are errors only the real
values show: an index out of range through a tensor index, overlapping memory in
``index_add_``/``copy_``, a failed ``torch._assert``, an integer division by zero, and any op
kiln knows nothing about. ``may_raise(node)`` answers True for all of those: only the ops of
``_SAFE_FUNCTIONS`` / ``_SAFE_METHODS`` on floating-point tensors of guarded shapes, changing
no argument (or, in place, only the one tensor they read: ``x.relu_()``, ``x *= 0.5``), and
the factories of ``_FACTORIES`` reading no graph value, are known never to raise (the answer is conservative: a wrong True costs an
effect replayed after the graph, a wrong False a side effect eager would not have made).
"""

from __future__ import annotations

import operator
from typing import Any

import torch

from kiln.fxgraph import Node

__all__ = ["may_raise"]

# pointwise arithmetic, reductions and views: on floating-point tensors whose shapes the
# guards fix, nothing about the values can make them fail
_SAFE_FUNCTIONS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.neg, operator.pos,
    operator.matmul, torch.add, torch.sub, torch.mul, torch.neg, torch.abs, torch.relu,
    torch.sigmoid, torch.tanh, torch.exp, torch.sin, torch.cos, torch.sum, torch.mean,
    torch.matmul, torch.mm, torch.clone, torch.transpose, torch.permute, torch.reshape,
    torch.unsqueeze, torch.squeeze, torch.flatten,
})
_SAFE_METHODS = frozenset({
    "add", "sub", "mul", "neg", "abs", "relu", "sigmoid", "tanh", "exp", "sin", "cos", "sum",
    "mean", "matmul", "mm", "clone", "detach", "contiguous", "view", "reshape", "transpose",
    "permute", "t", "unsqueeze", "squeeze", "flatten", "expand",
})
_PLAIN_INDEX = (int, slice, type(None), type(Ellipsis))
# ``x += 1``: the in-place operator of a safe one, changing only its one tensor
_IN_PLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
             operator.itruediv: operator.truediv}
# factories: with no graph value among their arguments they make the same tensor every run
_FACTORIES = frozenset({torch.ones, torch.zeros, torch.empty, torch.full, torch.tensor, torch.eye})


def may_raise(node: Node, mutates_key: str) -> bool:
    """Whether ``node`` (a call in a traced graph) might raise at run time; see the module
    docstring. ``mutates_key``: the ``node.meta`` key marking ops that change an argument."""
    mutates = bool(node.meta.get(mutates_key))
    if "out" in node.kwargs or (mutates and len(node.all_input_nodes) != 1):
        return True  # another tensor written into or read while writing may overlap it
    if node.op == "call_function" and not node.all_input_nodes and _is_factory(node.target):
        return False
    if node.op == "call_method":
        name = node.target[:-1] if mutates and node.target.endswith("_") else node.target
        safe = (not mutates or name != node.target) and name in _SAFE_METHODS
    elif node.op == "call_function" and node.target is operator.getitem:
        safe = not mutates and _plain_index(node.args[1])
    else:
        target = _IN_PLACE.get(node.target) if mutates else node.target
        safe = node.op == "call_function" and target is not None and _is_safe_function(target)
    result = node.meta.get("val")
    return not (safe and _holds_tensor(result) and all(_static_float(v) for v in _values(node)))


def _holds_tensor(value: Any) -> bool:
    # a number computed from numbers may divide by zero: only tensor results are judged
    if isinstance(value, (tuple, list)):
        return bool(value) and all(_holds_tensor(v) for v in value)
    return isinstance(value, torch.Tensor)


def _is_safe_function(target: Any) -> bool:
    try:
        return target in _SAFE_FUNCTIONS
    except TypeError:  # an unhashable callable
        return False


def _is_factory(target: Any) -> bool:
    try:
        return target in _FACTORIES
    except TypeError:
        return False


def _plain_index(index: Any) -> bool:
    """An index of ints, slices, None and Ellipsis (no tensor: a tensor index may be out of
    range; an int out of range on a static shape fails on the fakes already)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, _PLAIN_INDEX) and not isinstance(i, bool) for i in items)


def _values(node: Node) -> list[Any]:
    """The example values of the node's result and of the nodes it reads."""
    return [node.meta.get("val"), *(n.meta.get("val") for n in node.all_input_nodes)]


def _static_float(value: Any) -> bool:
    """A floating-point tensor whose shape the guards fix: sizes are plain ints, or symbols
    with an example value (``dynamic=True``: every relation the trace relied on between them,
    a matmul's inner sizes or a broadcast, is a shape guard, so the real sizes satisfy it).
    A data-dependent size is not: what the trace assumed of it is checked when the graph
    runs. A number computed by the graph (a dynamic float) is not judged either: what it
    does as a size or a dim is unknown."""
    if isinstance(value, (tuple, list)):
        return all(_static_float(v) for v in value)
    if isinstance(value, torch.Tensor):
        return value.dtype.is_floating_point and all(_guarded_size(s) for s in value.shape)
    return False


def _guarded_size(size: Any) -> bool:
    if type(size) is int:
        return True
    return isinstance(size, torch.SymInt) and getattr(size.node, "hint", None) is not None
