"""Input mutations: what the lowering needs to write a graph input's memory from a kernel.

aotgrad records an in-place op on a graph input as its functional op followed by
``copy_(input, result)``, one per in-place op: ``m.mul_(b).add_(g)`` is two ``copy_`` into
``m``. The lowering turns a ``copy_`` of a whole input into a kernel stage that stores into
the input (``ComputedBuffer.into``) instead of an ATen call, and skips a ``copy_`` whose
value nothing can see (``overwritten_copies``): the next node to touch the input, or any
view of it, is another ``copy_`` of the whole input.
"""

from __future__ import annotations

from typing import Any

import torch

from kiln.fxgraph import Graph, Node

__all__ = ["is_input_copy", "overwritten_copies", "returns_alias", "shared_storage_inputs"]

aten = torch.ops.aten


def is_input_copy(node: Node) -> bool:
    """``copy_(placeholder, src)``: a write of a whole graph input."""
    return (node.op == "call_function" and node.target is aten.copy_.default and bool(node.args)
            and isinstance(node.args[0], Node) and node.args[0].op == "placeholder")


def returns_alias(target: Any, unknown: bool) -> bool:
    """Whether ``target``'s result may share memory with an argument: its schema says so, or
    it is a CompositeImplicitAutograd op, whose kernel is other ops' calls and may return an
    argument itself whatever its schema promises (``conj_physical`` and ``type_as`` of a real
    tensor return it: a result taken for fresh memory was written in place, or its argument's
    memory handed to another buffer, a wrong gradient of ``tanh(x * x.abs()) - y``);
    ``unknown``: the answer for a target without a schema."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return unknown
    if any(r.alias_info is not None for r in schema.returns):
        return True
    return _composite(target)


def _composite(target: Any) -> bool:
    name = getattr(target, "name", None)
    try:
        return callable(name) and torch._C._dispatch_has_kernel_for_dispatch_key(name(), "CompositeImplicitAutograd")
    except RuntimeError:  # not an operator the dispatcher knows
        return False


def _aliases(graph: Graph, target: Node) -> set[Node]:
    """``target`` and every node whose result may share its memory (views of views, the items
    of a split (``getitem``, which has no schema, counts as one), and the
    results of in-place ops on any of them)."""
    family = {target}
    for node in graph.nodes:
        if node.op == "call_function" and node.args and isinstance(node.args[0], Node) \
                and node.args[0] in family and returns_alias(node.target, unknown=True):
            family.add(node)
    return family


def overwritten_copies(graph: Graph) -> set[Node]:
    """The ``copy_`` nodes into a graph input whose result nothing reads and whose value
    the next node touching the input's memory overwrites whole (a ``copy_`` of the same
    input that does not read it otherwise): writing them would change nothing anyone sees."""
    nodes = list(graph.nodes)
    dead: set[Node] = set()
    families: dict[Node, set[Node]] = {}
    for k, node in enumerate(nodes):
        if not is_input_copy(node) or node.users:
            continue
        target = node.args[0]
        family = families.get(target)
        if family is None:
            family = families[target] = _aliases(graph, target)
        for later in nodes[k + 1:]:
            touched = [inp for inp in later.all_input_nodes if inp in family]
            if not touched:
                continue
            # the next node to touch the input writes it whole and reads it nowhere else
            # (``touched`` has the input once even when it is also the source: check that too)
            if is_input_copy(later) and later.args[0] is target and touched == [target] \
                    and all(a is not target for a in (*later.args[1:], *later.kwargs.values())):
                dead.add(node)
            break
    return dead


def shared_storage_inputs(graph: Graph) -> set[Node]:
    """Placeholders whose traced tensor shares its storage with another placeholder's (a
    kernel must not write one while reading the other), and those whose storage is not known
    (not a kiln fake tensor): either may alias another input."""
    by_storage: dict[int, list[Node]] = {}
    unknown: set[Node] = set()
    for node in graph.nodes:
        val = node.meta.get("val") if node.op == "placeholder" else None
        if not isinstance(val, torch.Tensor):
            continue
        storage = getattr(val, "fake_storage", None)
        if storage is None:
            unknown.add(node)
        else:
            by_storage.setdefault(id(storage), []).append(node)
    return unknown | {n for group in by_storage.values() if len(group) > 1 for n in group}
