"""Splitting a joint graph into the forward graph and the backward graph.

The forward graph takes the primals and returns ``(*outputs, *written input values,
*saved)``; the backward graph takes ``(*saved, *tangents)`` and returns the gradients of the
inputs that get one. ``saved`` is every forward value the backward reads (primals included:
passing an input on costs nothing), in graph order; a size a backward op needs is saved as
a number. Constants (``get_attr``) are available to both graphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kiln.fxgraph import Graph, Node, eliminate_dead_code, map_arg

from ._trace import TraceResult

__all__ = ["Partition", "partition"]


@dataclass
class Partition:
    forward: Graph
    backward: Graph | None
    saved: list[Node]  # the joint graph's nodes the forward hands to the backward
    num_outputs: int
    num_mutated: int


def partition(result: TraceResult) -> Partition:
    """Forward and backward graphs of ``result`` (the backward is None without gradients)."""
    joint = result.graph
    output = joint.output_node
    n_out, n_mut = len(result.outputs), len(result.mutated)
    values = list(output.args[0])
    forward_values, grad_values = values[: n_out + n_mut], values[n_out + n_mut :]
    backward_nodes = {n for n in joint.nodes if n.meta.get("phase") == "backward"}
    if not any(g is not None for g in grad_values):
        graph = _copy(joint, lambda n: n.op != "output" and n not in backward_nodes, forward_values)
        return Partition(graph, None, [], n_out, n_mut)
    saved: list[Node] = []
    seen: set[Node] = set()
    for node in joint.nodes:
        if node in backward_nodes or node.op in ("output", "get_attr"):
            continue
        read_by_backward = any(user in backward_nodes for user in node.users) or node in grad_values
        if read_by_backward and node not in seen:
            seen.add(node)
            saved.append(node)
    forward = _copy(joint, lambda n: n.op != "output" and n not in backward_nodes, forward_values + saved)
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
    for node in joint.nodes:
        if node in backward_nodes and node.op != "placeholder":
            env[node] = backward.node_copy(node, lambda n: _lookup(env, backward, n))
    backward.output(tuple(map_arg(tuple(grad_values), lambda n: _lookup(env, backward, n))))
    eliminate_dead_code(backward)
    return Partition(forward, backward, saved, n_out, n_mut)


def _lookup(env: dict[Node, Node], graph: Graph, node: Node) -> Node:
    found = env.get(node)
    if found is None:
        if node.op != "get_attr":
            raise AssertionError(f"backward reads {node.name}, which is neither saved nor computed in backward")
        found = env[node] = graph.get_attr(node.target)
        found.meta.update(node.meta)
    return found


def _copy(joint: Graph, keep: Any, outputs: list[Any]) -> Graph:
    graph = Graph()
    env: dict[Node, Node] = {}
    for node in joint.nodes:
        if keep(node):
            env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(tuple(map_arg(tuple(outputs), lambda n: env[n])))
    eliminate_dead_code(graph)
    return graph
