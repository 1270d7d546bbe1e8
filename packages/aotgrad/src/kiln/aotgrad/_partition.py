"""Splitting a joint graph into the forward graph and the backward graph.

The forward graph takes the primals and returns ``(*outputs, *saved)`` (it writes the inputs
the program writes itself); the backward graph takes ``(*saved, *tangents)``, recomputes the
forward ops the min cut chose not to save (``_mincut``), and returns the gradients of the
inputs that get one. A saved input that the forward writes is saved as a
copy taken before the write. With ``save_all``, ``saved`` is every forward value the backward reads (primals included:
passing an input on costs nothing), in graph order; a size a backward op needs is saved as
a number. Constants (``get_attr``) are available to both graphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kiln.fxgraph import Graph, Node, eliminate_dead_code, map_arg

from ._mincut import exact_reads, min_cut_saved
from ._trace import TraceResult

__all__ = ["Partition", "partition"]


@dataclass
class Partition:
    forward: Graph
    backward: Graph | None
    saved: list[Node]  # the joint graph's nodes the forward hands to the backward
    num_outputs: int


def partition(result: TraceResult, partitioner: str = "min_cut") -> Partition:
    """Forward and backward graphs of ``result`` (the backward is None without gradients).
    ``partitioner``: ``"min_cut"`` saves a cheapest set of values and recomputes cheap ops in
    backward (``_mincut``); ``"save_all"`` saves every forward value the backward reads."""
    if partitioner not in ("min_cut", "save_all"):
        raise ValueError(f"unknown partitioner {partitioner!r}; expected 'min_cut' or 'save_all'")
    joint = result.graph
    output = joint.output_node
    n_out = len(result.outputs)
    values = list(output.args[0])
    forward_values, grad_values = values[:n_out], values[n_out:]
    written = {i for i, _ in result.mutated}
    backward_nodes = {n for n in joint.nodes if n.meta.get("phase") == "backward"}
    if not any(g is not None for g in grad_values):
        graph = _copy(joint, lambda n: n.op != "output" and n not in backward_nodes, forward_values,
                      written_inputs=written)
        return Partition(graph, None, [], n_out)
    forward_nodes = [n for n in joint.nodes if n not in backward_nodes and n.op not in ("output", "get_attr")]
    needed: list[Node] = []
    for node in forward_nodes:
        if any(user in backward_nodes for user in node.users) or node in grad_values:
            needed.append(node)
    if partitioner == "save_all":
        saved, recompute = needed, []
    else:
        free = {n for n in forward_nodes if n.op == "placeholder"}
        free.update(v for v in forward_values if isinstance(v, Node))
        cut = set(min_cut_saved(forward_nodes, needed, free, exact_reads(backward_nodes)))
        saved, recompute = _closure(forward_nodes, needed, cut)
    forward = _copy(joint, lambda n: n.op != "output" and n not in backward_nodes, forward_values + saved,
                    written_inputs=written)
    backward = Graph()
    env: dict[Node, Node] = {}
    for node in saved:
        placeholder = backward.placeholder(node.name)
        placeholder.meta.update(node.meta)
        env[node] = placeholder
    for node in joint.nodes:
        if node.op == "placeholder" and node in backward_nodes:
            env[node] = backward.placeholder(node.name)
            env[node].meta.update(node.meta)
    # forward ops run again in backward just before the first backward op that reads them
    # (not all at its start, where each would stay alive through the whole backward)
    recomputed = set(recompute)

    def lookup(n: Node) -> Node:
        if n in recomputed and n not in env:
            _emit_recomputed(n, recomputed, env, backward)
        return _lookup(env, backward, n)

    for node in joint.nodes:
        if node in backward_nodes and node.op != "placeholder":
            env[node] = backward.node_copy(node, lookup)
    backward.output(tuple(map_arg(tuple(grad_values), lambda n: _lookup(env, backward, n))))
    eliminate_dead_code(backward)
    return Partition(forward, backward, saved, n_out)


def _closure(forward_nodes: list[Node], needed: list[Node], cut: set[Node]) -> tuple[list[Node], list[Node]]:
    """The saved nodes the backward actually reaches from ``needed`` through recomputed
    nodes, and those recomputed nodes, each in graph order."""
    saved, recompute = set(), set()
    forward = set(forward_nodes)
    stack = list(needed)
    while stack:
        node = stack.pop()
        if node in cut:
            saved.add(node)
            continue
        if node in recompute:
            continue
        if node.op == "placeholder":
            raise AssertionError(f"min cut left input {node.name} unsaved")
        recompute.add(node)
        stack.extend(n for n in node.all_input_nodes if n in forward)
    return [n for n in forward_nodes if n in saved], [n for n in forward_nodes if n in recompute]


def _emit_recomputed(root: Node, recomputed: set[Node], env: dict[Node, Node], graph: Graph) -> None:
    """Copy ``root`` into ``graph``, after the recomputed values it reads that are not there
    yet (iteratively: a long chain of pointwise ops must not hit the recursion limit)."""
    stack = [root]
    while stack:
        node = stack[-1]
        if node in env:
            stack.pop()
            continue
        missing = [n for n in node.all_input_nodes if n in recomputed and n not in env]
        if missing:
            stack.extend(reversed(missing))
            continue
        stack.pop()
        env[node] = graph.node_copy(node, lambda n: _lookup(env, graph, n))


def _lookup(env: dict[Node, Node], graph: Graph, node: Node) -> Node:
    found = env.get(node)
    if found is None:
        if node.op != "get_attr":
            raise AssertionError(f"backward reads {node.name}, which is neither saved nor computed in backward")
        found = env[node] = graph.get_attr(node.target)
        found.meta.update(node.meta)
    return found


def _copy(joint: Graph, keep: Any, outputs: list[Any], written_inputs: set[int] = frozenset()) -> Graph:
    """The kept nodes of ``joint`` returning ``outputs``. A written input handed on as is
    (saved for backward, or returned) is a copy taken before the graph writes it."""
    graph = Graph()
    env: dict[Node, Node] = {}
    placeholders = joint.find_nodes("placeholder")
    first_copies: dict[Node, Node] = {}
    for node in joint.nodes:
        if keep(node):
            env[node] = graph.node_copy(node, lambda n: env[n])
    written = {placeholders[i] for i in written_inputs}
    if written:
        first_op = next((n for n in graph.nodes if n.op != "placeholder"), None)
        for p in written:
            if p in env and p in outputs:
                with graph.inserting_before(first_op):
                    first_copies[p] = graph.call_function(torch.ops.aten.clone.default, (env[p],))
                first_copies[p].meta.update(p.meta)
    graph.output(tuple(map_arg(tuple(outputs), lambda n: first_copies.get(n, env[n]))))
    eliminate_dead_code(graph)
    return graph
