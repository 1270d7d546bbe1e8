"""Interpreter and Transformer: walk a graph node by node through one ``run_node`` dispatch.

``Interpreter.run_node`` fetches a node's argument values and calls the method named after its
op (``call_function(target, args, kwargs)``, ...); subclasses override one op to change what
it means. ``Transformer`` is the Interpreter whose "values" are Nodes of a new graph, so the
same overrides rewrite a graph instead of evaluating it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._graph import Graph
from ._graph_module import GraphModule
from ._node import NO_DEFAULT, Argument, GraphError, Node, map_arg

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Runs a graph node by node; override ``call_function`` etc. to change behaviour.

    ``module`` supplies the attributes for get_attr/call_module; ``graph`` defaults to its
    graph. With ``garbage_collect_values`` a value is dropped after its last use.
    """

    def __init__(
        self,
        module: GraphModule | None = None,
        graph: Graph | None = None,
        garbage_collect_values: bool = True,
    ) -> None:
        if graph is None:
            if module is None:
                raise GraphError("Interpreter needs a module or a graph")
            graph = module.graph
        self.module = module
        self.graph = graph
        self.env: dict[Node, Any] = {}
        self.garbage_collect_values = garbage_collect_values
        self._last_uses: dict[Node, list[Node]] = {}
        if garbage_collect_values:
            seen: set[Node] = set()
            for n in reversed(graph.nodes):
                for inp in n._input_nodes:
                    if inp not in seen:
                        seen.add(inp)
                        self._last_uses.setdefault(n, []).append(inp)
        self._args_iter: Iterator[Any] = iter(())

    def run(self, *args: Any, initial_env: dict[Node, Any] | None = None) -> Any:
        """Run the graph on ``args``; returns the output node's value."""
        self.env = dict(initial_env or {})
        self._args_iter = iter(args)
        result = None
        for n in self.graph.nodes:
            if n in self.env:
                continue
            value = self.run_node(n)
            if n.op == "output":
                result = value
                break
            self.env[n] = value
            for dead in self._last_uses.get(n, ()):
                self.env.pop(dead, None)
        self.env = {}
        return result

    def run_node(self, n: Node) -> Any:
        """Evaluate one node: fetch its arguments, then dispatch on its op."""
        args = self.map_nodes_to_values(n.args, n)
        kwargs = self.map_nodes_to_values(n.kwargs, n)
        return getattr(self, n.op)(n.target, args, kwargs)

    def map_nodes_to_values(self, a: Argument, n: Node) -> Argument:
        """Replace each Node in ``a`` by its value in the environment."""

        def load(x: Node) -> Any:
            try:
                return self.env[x]
            except KeyError:
                raise GraphError(f"node {n.name!r} reads {x.name!r}, which has no value yet") from None

        return map_arg(a, load)

    # -- one method per op -------------------------------------------------------------------

    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Any:
        try:
            return next(self._args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise TypeError(f"missing value for graph input {target!r}") from None

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Any:
        return self.fetch_attr(target)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        return target(*args, **kwargs)

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Any:
        obj, *rest = args
        return getattr(obj, target)(*rest, **kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Any:
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target: str, args: tuple, kwargs: dict) -> Any:
        return args[0]

    def fetch_attr(self, target: str) -> Any:
        """The module's attribute at the dotted path ``target``."""
        if self.module is None:
            raise GraphError(f"graph reads attribute {target!r} but the Interpreter has no module")
        return self.module.get_attr(target)


class Transformer(Interpreter):
    """Rewrites a GraphModule: each op method returns a Node of ``self.new_graph``.

    The default methods copy the node unchanged (same name, same meta); override one to
    rewrite it. ``transform()`` returns a new GraphModule sharing the module's attributes.
    """

    def __init__(self, module: GraphModule) -> None:
        super().__init__(module, garbage_collect_values=False)
        self.new_graph = Graph()
        self._current: Node | None = None

    def transform(self) -> GraphModule:
        """Build the rewritten graph and wrap it with the original attributes."""
        self.env = {}
        for n in self.graph.nodes:
            self.env[n] = self.run_node(n)
        self.env = {}
        return GraphModule(self.module.attrs, self.new_graph)

    def run_node(self, n: Node) -> Any:
        self._current = n
        result = super().run_node(n)
        if isinstance(result, Node) and not result.meta:
            result.meta = dict(n.meta)
        return result

    def _copy(self, op: str, target: Any, args: tuple, kwargs: dict) -> Node:
        name = self._current.name if self._current is not None else None
        return self.new_graph.create_node(op, target, args, kwargs, name=name)

    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Node:
        return self.new_graph.placeholder(target, default=args[0] if args else NO_DEFAULT)

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Node:
        return self._copy("get_attr", target, args, kwargs)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Node:
        return self._copy("call_function", target, args, kwargs)

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Node:
        return self._copy("call_method", target, args, kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Node:
        return self._copy("call_module", target, args, kwargs)

    def output(self, target: str, args: tuple, kwargs: dict) -> Node:
        return self.new_graph.output(args[0])
