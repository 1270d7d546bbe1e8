"""Min-cut rematerialization: which forward values to save for backward, and which to
recompute there.

The forward values the backward reads must reach it: saved, or recomputed in backward from
saved values. Recomputing cheap ops (pointwise, views, size arithmetic) instead of saving
their outputs can save memory: GELU's backward needs its input ``h`` and the next matmul's
needs ``gelu(h)``; saving ``h`` alone and recomputing ``gelu(h)`` halves what is kept.

As a flow network: each forward node ``n`` is an edge ``n.in -> n.out`` whose capacity is
the bytes of its value (what saving it costs); data flows along uses (``n.out -> u.in``,
unbounded); the source feeds the inputs and every node that must not be recomputed; each
forward value the backward reads drains to the sink. A minimum cut then is a cheapest set
of values to save such that everything the backward reads follows from them by
recomputable ops. Never recomputed (fed by the source): matrix products, convolutions,
reductions and every other op not known to be cheap, random ops (a recomputation would
draw other numbers), in-place ops (the graph's writes to its inputs). Inputs and the
forward's outputs cost nothing to save: they are alive anyway.

The maximum flow is Dinic's algorithm over integer capacities.
"""

from __future__ import annotations

import operator
from collections import deque
from typing import Any

import torch

from kiln.fxgraph import Node

__all__ = ["exact_reads", "min_cut_saved"]

_INF = float("inf")
# cheap ops that are not tagged pointwise but only move or re-view data, or compute sizes
_CHEAP = frozenset({"view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t", "unsqueeze",
                    "squeeze", "slice", "select", "as_strided", "alias", "detach", "clone", "_to_copy",
                    "sym_size", "split", "split_with_sizes", "chunk", "unbind", "contiguous", "view_as"})
_SIZE_ARITHMETIC = (operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.truediv,
                    operator.pow, operator.getitem, torch.sym_max, torch.sym_min)


def _recomputable(node: Node) -> bool:
    if node.op != "call_function":
        return False
    target = node.target
    if target in _SIZE_ARITHMETIC:
        return True
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded in target.tags:
        return False
    schema = target._schema
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return False
    name = target.overloadpacket.__name__
    return torch.Tag.pointwise in target.tags or name in _CHEAP


def _bytes(node: Node) -> int:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        numel = 1
        for size in val.shape:
            numel *= _hint(size)
        return max(numel * val.element_size(), 1)
    return 1  # a number


def _hint(size: Any) -> int:
    if isinstance(size, torch.SymInt):
        hint = size.node.hint
        return int(hint) if hint is not None else 1024
    return int(size)


class _Flow:
    """A flow network with Dinic's algorithm."""

    def __init__(self) -> None:
        self.to: list[int] = []
        self.cap: list[float] = []
        self.adj: list[list[int]] = []

    def vertex(self) -> int:
        self.adj.append([])
        return len(self.adj) - 1

    def edge(self, a: int, b: int, cap: float) -> None:
        self.adj[a].append(len(self.to))
        self.to.append(b)
        self.cap.append(cap)
        self.adj[b].append(len(self.to))
        self.to.append(a)
        self.cap.append(0)

    def max_flow(self, s: int, t: int) -> None:
        while True:
            level = [-1] * len(self.adj)
            level[s] = 0
            queue = deque([s])
            while queue:
                v = queue.popleft()
                for e in self.adj[v]:
                    if self.cap[e] > 0 and level[self.to[e]] < 0:
                        level[self.to[e]] = level[v] + 1
                        queue.append(self.to[e])
            if level[t] < 0:
                return
            pointer = [0] * len(self.adj)
            while self._push(s, t, _INF, level, pointer) > 0:
                pass

    def _push(self, s: int, t: int, limit: float, level: list[int], pointer: list[int]) -> float:
        # iterative depth-first search for one augmenting path in the level graph
        path: list[int] = []
        v = s
        while True:
            if v == t:
                amount = min([limit] + [self.cap[e] for e in path])
                for e in path:
                    self.cap[e] -= amount
                    self.cap[e ^ 1] += amount
                return amount
            edges = self.adj[v]
            while pointer[v] < len(edges):
                e = edges[pointer[v]]
                if self.cap[e] > 0 and level[self.to[e]] == level[v] + 1:
                    break
                pointer[v] += 1
            else:
                if not path:
                    return 0
                level[v] = -1  # dead end
                e = path.pop()
                v = self.to[e ^ 1]
                pointer[v] += 1
                continue
            path.append(edges[pointer[v]])
            v = self.to[edges[pointer[v]]]

    def reachable(self, s: int) -> set[int]:
        seen = {s}
        queue = deque([s])
        while queue:
            v = queue.popleft()
            for e in self.adj[v]:
                if self.cap[e] > 0 and self.to[e] not in seen:
                    seen.add(self.to[e])
                    queue.append(self.to[e])
        return seen


# comparisons whose result changes with the last bit of an operand
_EXACT = frozenset({"eq", "ne"})


def exact_reads(backward_nodes: set[Node]) -> frozenset[Node]:
    """The forward values the backward compares for equality (``amax``'s and ``amin``'s
    backward: ``x == amax(x)``, with the saved result). Recomputed, such a value may not have
    the bits the forward reduced: another kernel computes it (a vectorized loop against a
    scalar one: glibc's vector ``tanhf`` and its scalar one differ in an ulp), and no element
    equals the saved extreme; the gradient divides 0 by 0."""
    found = set()
    for node in backward_nodes:
        target = node.target
        if isinstance(target, torch._ops.OpOverload) and target.overloadpacket.__name__ in _EXACT:
            found.update(a for a in node.all_input_nodes if a not in backward_nodes)
    return frozenset(found)


def min_cut_saved(forward_nodes: list[Node], needed: list[Node], free: set[Node],
                  pinned: frozenset[Node] = frozenset()) -> list[Node]:
    """The forward nodes to save (in graph order) so that every node of ``needed`` can be
    had in backward from them by recomputable ops; ``free`` nodes cost nothing to save;
    ``pinned`` ones are never recomputed (their forward bits are needed: ``exact_reads``)."""
    flow = _Flow()
    source, sink = flow.vertex(), flow.vertex()
    ends: dict[Node, tuple[int, int]] = {}
    for node in forward_nodes:
        ends[node] = (flow.vertex(), flow.vertex())
    for node in forward_nodes:
        v_in, v_out = ends[node]
        flow.edge(v_in, v_out, 0 if node in free else _bytes(node))
        if node.op != "call_function" or not _recomputable(node) or node in pinned:
            flow.edge(source, v_in, _INF)
        for user in node.users:
            if user in ends:
                flow.edge(v_out, ends[user][0], _INF)
    for node in needed:
        flow.edge(ends[node][1], sink, _INF)
    flow.max_flow(source, sink)
    reached = flow.reachable(source)
    return [n for n in forward_nodes if ends[n][0] in reached and ends[n][1] not in reached]
