"""Conversion between kiln.fxgraph and torch.fx, and torch's impure targets.

``to_torch_fx(gm)`` builds a ``torch.fx.GraphModule`` whose root ``nn.Module`` holds the same
attributes (modules as submodules, parameters as parameters, other tensors as buffers) and
whose graph has the same nodes, names and meta. ``from_torch_fx(torch_gm)`` goes the other
way, taking every attribute its graph reads. A round trip runs the same computation.

This is the only module of kiln.fxgraph that imports torch.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.fx

from ._graph import Graph
from ._graph_module import GraphModule
from ._impurity import register_impure, register_impure_method, register_impure_rule
from ._node import NO_DEFAULT, GraphError, Node, map_arg

__all__ = ["from_torch_fx", "to_torch_fx"]


def to_torch_fx(gm: GraphModule) -> torch.fx.GraphModule:
    """A torch.fx.GraphModule computing the same as ``gm``."""
    root = torch.nn.Module()
    for dotted in sorted(gm.attrs, key=lambda k: k.count(".")):
        _install_torch(root, dotted, gm.attrs[dotted])
    graph = torch.fx.Graph()
    env: dict[Node, torch.fx.Node] = {}
    for n in gm.graph.nodes:
        args = map_arg(n.args, env.__getitem__)
        kwargs = map_arg(n.kwargs, env.__getitem__)
        if n.op == "placeholder":
            default = args[0] if args else inspect.Signature.empty
            tn = graph.placeholder(n.name, type_expr=n.type, default_value=default)
        elif n.op == "output":
            tn = graph.output(args[0], type_expr=n.type)
        else:
            tn = graph.create_node(n.op, n.target, args, kwargs, name=n.name, type_expr=n.type)
        tn.meta = dict(n.meta)
        env[n] = tn
    return torch.fx.GraphModule(root, graph, class_name=type(gm).__name__)


def from_torch_fx(torch_gm: torch.fx.GraphModule) -> GraphModule:
    """A kiln GraphModule computing the same as ``torch_gm``."""
    graph = Graph()
    env: dict[torch.fx.Node, Node] = {}
    attrs: dict[str, Any] = {}
    for tn in torch_gm.graph.nodes:
        args = _convert(tn.args, env)
        kwargs = _convert(tn.kwargs, env)
        if tn.op == "placeholder":
            if tn.target.startswith("*"):
                raise GraphError(f"placeholder {tn.target!r}: variadic inputs are not supported")
            node = graph.placeholder(tn.target, tn.type, args[0] if args else NO_DEFAULT)
        elif tn.op == "output":
            node = graph.output(args[0], tn.type)
        else:
            if tn.op in ("get_attr", "call_module"):
                attrs[tn.target] = _fetch(torch_gm, tn.target)
            node = graph.create_node(tn.op, tn.target, args, kwargs, tn.name, tn.type)
        node.meta = dict(tn.meta)
        env[tn] = node
    ordered = {k: attrs[k] for k in sorted(attrs, key=lambda k: k.count("."))}
    return GraphModule(ordered, graph, class_name=type(torch_gm).__name__)


def _convert(a: Any, env: dict) -> Any:
    # torch.fx stores arguments in its own immutable list/dict subclasses.
    if isinstance(a, torch.fx.Node):
        return env[a]
    if isinstance(a, tuple):
        items = tuple(_convert(x, env) for x in a)
        return type(a)(*items) if hasattr(a, "_fields") else items
    if isinstance(a, list):
        return [_convert(x, env) for x in a]
    if isinstance(a, dict):
        return {k: _convert(v, env) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(_convert(a.start, env), _convert(a.stop, env), _convert(a.step, env))
    return a


def _fetch(obj: Any, dotted: str) -> Any:
    for p in dotted.split("."):
        obj = getattr(obj, p)
    return obj


def _install_torch(root: torch.nn.Module, dotted: str, value: Any) -> None:
    *path, leaf = dotted.split(".")
    owner: Any = root
    for p in path:
        nxt = getattr(owner, p, None)
        if nxt is None:
            nxt = torch.nn.Module()
            owner.add_module(p, nxt)
        owner = nxt
    if getattr(owner, leaf, None) is value:
        return
    if isinstance(value, torch.nn.Module):
        owner.add_module(leaf, value)
    elif isinstance(value, torch.nn.Parameter):
        owner.register_parameter(leaf, value)
    elif isinstance(value, torch.Tensor):
        owner.register_buffer(leaf, value)
    else:
        setattr(owner, leaf, value)


# -- torch's impure targets ------------------------------------------------------------------
# Random ops advance the generator: dropping or merging them changes later random numbers.

_F = torch.nn.functional
for _fn in (
    torch.rand, torch.randn, torch.randint, torch.rand_like, torch.randn_like,
    torch.randint_like, torch.randperm, torch.bernoulli, torch.multinomial, torch.normal,
    torch.poisson, torch.dropout, torch.alpha_dropout, torch.feature_alpha_dropout,
    _F.dropout, _F.dropout1d, _F.dropout2d, _F.dropout3d, _F.alpha_dropout,
    _F.feature_alpha_dropout, torch.manual_seed, torch.seed, torch._assert,
    torch.set_grad_enabled, torch._C._set_grad_enabled,
):
    register_impure(_fn)
# torch.fx keeps its own set of side-effectful functions (asserts of concrete_args, profiler
# markers, ...); it is private, so read it defensively.
for _fn in getattr(torch.fx.node, "_side_effectful_functions", ()):
    register_impure(_fn)
_assert_is_none = getattr(torch.fx._symbolic_trace, "_assert_is_none", None)
if _assert_is_none is not None:  # checks a concrete_args value; torch's own set lacks it
    register_impure(_assert_is_none)
for _name in ("bernoulli", "multinomial", "record_stream", "backward", "retain_grad"):
    register_impure_method(_name)


@register_impure_rule
def _aten_effects(node: Node) -> bool:
    # ATen operators declare mutation and randomness in their schema and tags.
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    return target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags
