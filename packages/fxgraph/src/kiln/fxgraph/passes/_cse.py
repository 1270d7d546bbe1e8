"""Common-subexpression elimination: one node per distinct pure computation.

Two nodes merge when they have the same op and target and equal arguments, where constants
compare by type and value (``1``, ``1.0`` and ``True`` stay distinct, as do ``0.0`` and
``-0.0``) and Nodes by identity. Impure nodes and call_module nodes (modules may hold state,
e.g. dropout or batch-norm statistics) never merge; nodes with unhashable arguments are
left alone.
"""

from __future__ import annotations

import math
from typing import Any

from .._graph import Graph
from .._impurity import is_impure
from .._node import Node

__all__ = ["eliminate_common_subexpressions"]


class _Unhashable(Exception):
    pass


def _freeze(a: Any) -> Any:
    t = type(a)
    if t is Node:
        return a
    if t is tuple or t is list:
        return (t, tuple(_freeze(x) for x in a))
    if t is dict:
        return (dict, tuple((_freeze(k), _freeze(v)) for k, v in a.items()))
    if t is slice:
        return (slice, _freeze(a.start), _freeze(a.stop), _freeze(a.step))
    if t is float:
        return (float, a, math.copysign(1.0, a))
    try:
        hash(a)
    except TypeError:
        raise _Unhashable from None
    return (t, a)


def eliminate_common_subexpressions(graph: Graph) -> int:
    """Merge repeated pure computations in ``graph``; returns how many nodes were removed."""
    seen: dict[Any, Node] = {}
    removed = 0
    for n in graph.nodes:
        if n.op not in ("call_function", "call_method", "get_attr") or is_impure(n):
            continue
        try:
            key = (n.op, _freeze(n.target), _freeze(n.args), _freeze(n.kwargs))
        except _Unhashable:
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = n
            continue
        n.replace_all_uses_with(first)
        graph.erase_node(n)
        removed += 1
    return removed
