"""Node: one operation of a Graph, and the helpers that walk nested arguments.

A Node is ``(op, target, args, kwargs)`` plus a unique readable ``name``. The op kinds are
those of torch.fx:

- ``placeholder``: a function input; ``target`` is the argument name, ``args`` is empty or
  holds the default value.
- ``get_attr``: fetches an attribute of the owning GraphModule; ``target`` is its dotted name.
- ``call_function``: calls a free function (``torch.relu``, ``operator.add``); ``target`` is
  the callable.
- ``call_method``: calls a method on ``args[0]``; ``target`` is the method name.
- ``call_module``: calls a submodule of the owning GraphModule; ``target`` is its dotted name.
- ``output``: the value the graph returns, in ``args[0]``.

Arguments may nest tuples, lists, dicts and slices around Nodes and constants. Invariants,
kept incrementally whenever ``args``/``kwargs`` change: ``n in m.users`` if and only if ``m``
appears in ``n``'s arguments, and every Node in the arguments belongs to the same Graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._graph import Graph

__all__ = ["OPS", "Argument", "GraphError", "Node", "map_aggregate", "map_arg"]

OPS = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")

Argument = Any  # a Node, a constant, or a tuple/list/dict/slice nesting them


class GraphError(ValueError):
    """A graph was used in a way that would break its invariants."""


class _NoDefault:
    """Marks a placeholder without a default value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT = _NoDefault()


def map_aggregate(a: Argument, fn: Callable[[Any], Any]) -> Argument:
    """Apply ``fn`` to every leaf of a nested argument, rebuilding the containers."""
    t = type(a)
    if t is tuple:
        return tuple(map_aggregate(x, fn) for x in a)
    if t is list:
        return [map_aggregate(x, fn) for x in a]
    if t is dict:
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if t is slice:
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn), map_aggregate(a.step, fn))
    if isinstance(a, tuple) and hasattr(a, "_fields"):  # namedtuple: keep its type
        return t(*(map_aggregate(x, fn) for x in a))
    return fn(a)


def map_arg(a: Argument, fn: Callable[[Node], Any]) -> Argument:
    """Apply ``fn`` to every Node inside a nested argument; other leaves are kept."""
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def _collect_nodes(a: Argument, out: dict[Node, None]) -> None:
    t = type(a)
    if t is Node:
        out[a] = None
    elif t is tuple or t is list:
        for x in a:
            _collect_nodes(x, out)
    elif t is dict:
        for x in a.values():
            _collect_nodes(x, out)
    elif t is slice:
        _collect_nodes(a.start, out)
        _collect_nodes(a.stop, out)
        _collect_nodes(a.step, out)
    elif isinstance(a, Node):
        out[a] = None
    elif isinstance(a, tuple):
        for x in a:
            _collect_nodes(x, out)


class Node:
    """One operation in a Graph; see the module docstring for the op kinds."""

    __slots__ = (
        "_args",
        "_erased",
        "_input_nodes",
        "_kwargs",
        "_next",
        "_prev",
        "graph",
        "meta",
        "name",
        "op",
        "target",
        "type",
        "users",
    )

    def __init__(
        self,
        graph: Graph,
        name: str,
        op: str,
        target: Any,
        args: tuple,
        kwargs: dict,
        type_: Any = None,
    ) -> None:
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.type = type_
        self.meta: dict[str, Any] = {}
        self.users: dict[Node, None] = {}
        self._input_nodes: dict[Node, None] = {}
        self._args: tuple = ()
        self._kwargs: dict = {}
        self._prev: Node = self
        self._next: Node = self
        self._erased = False
        self._update_args_kwargs(args, kwargs)

    # -- arguments ---------------------------------------------------------------------------

    @property
    def args(self) -> tuple:
        """Positional arguments; assigning them keeps ``users`` up to date."""
        return self._args

    @args.setter
    def args(self, value: tuple) -> None:
        self._update_args_kwargs(tuple(value), self._kwargs)

    @property
    def kwargs(self) -> dict:
        """Keyword arguments; assigning them keeps ``users`` up to date."""
        return self._kwargs

    @kwargs.setter
    def kwargs(self, value: dict) -> None:
        self._update_args_kwargs(self._args, dict(value))

    @property
    def all_input_nodes(self) -> list[Node]:
        """The distinct Nodes this node reads, in order of first appearance."""
        return list(self._input_nodes)

    def _update_args_kwargs(self, args: tuple, kwargs: dict) -> None:
        found: dict[Node, None] = {}
        _collect_nodes(args, found)
        _collect_nodes(kwargs, found)
        for n in found:
            if n.graph is not self.graph:
                raise GraphError(
                    f"node {self.name!r} ({self.op} {_target_text(self.target)}) takes "
                    f"node {n.name!r}, which belongs to another graph"
                )
            if n._erased:
                raise GraphError(f"node {self.name!r} takes node {n.name!r}, which was erased")
        for old in self._input_nodes:
            if old not in found:
                old.users.pop(self, None)
        for n in found:
            n.users[self] = None
        self._input_nodes = found
        self._args = args
        self._kwargs = kwargs

    # -- rewriting ---------------------------------------------------------------------------

    def replace_all_uses_with(
        self,
        replace_with: Node,
        delete_user_cb: Callable[[Node], bool] | None = None,
    ) -> list[Node]:
        """Make every user of this node read ``replace_with`` instead.

        ``delete_user_cb(user)`` may return False to leave that user alone. Returns the users
        that were rewritten.
        """
        if replace_with.graph is not self.graph:
            raise GraphError(
                f"cannot replace {self.name!r} with {replace_with.name!r}: "
                "the replacement belongs to another graph"
            )
        changed = []
        for user in list(self.users):
            if user is replace_with or (delete_user_cb is not None and not delete_user_cb(user)):
                continue
            user.replace_input_with(self, replace_with)
            changed.append(user)
        return changed

    def replace_input_with(self, old: Node, new: Node) -> None:
        """Replace every occurrence of ``old`` in this node's arguments with ``new``."""

        def swap(n: Node) -> Node:
            return new if n is old else n

        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    # -- order -------------------------------------------------------------------------------

    @property
    def next(self) -> Node:
        """The following node (the graph's root sentinel after the last one)."""
        return self._next

    @property
    def prev(self) -> Node:
        """The preceding node (the graph's root sentinel before the first one)."""
        return self._prev

    def prepend(self, x: Node) -> None:
        """Move ``x`` to just before this node."""
        self.graph._move_before(x, self)

    def append(self, x: Node) -> None:
        """Move ``x`` to just after this node."""
        self.graph._move_before(x, self._next)

    # -- display -----------------------------------------------------------------------------

    def format_node(self) -> str:
        """One line describing the node, in the style of a graph listing."""
        if self.op == "placeholder":
            default = f" = {self._args[0]!r}" if self._args else ""
            return f"%{self.name} : placeholder[{self.target}]{default}"
        if self.op == "output":
            return f"return {_format_arg(self._args[0])}"
        kw = f", kwargs = {_format_arg(self._kwargs)}" if self._kwargs else ""
        return (
            f"%{self.name} : {self.op}[target={_target_text(self.target)}]"
            f"(args = {_format_arg(self._args)}{kw})"
        )

    def __repr__(self) -> str:
        return self.name


def _target_text(target: Any) -> str:
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if module in ("builtins", "_operator", "operator") and name:
        return name if module == "builtins" else f"operator.{name}"
    if module and name:
        return f"{module}.{name}"
    return repr(target)


def _format_arg(a: Argument) -> str:
    if isinstance(a, Node):
        return f"%{a.name}"
    if type(a) is tuple:
        inner = ", ".join(_format_arg(x) for x in a)
        return f"({inner},)" if len(a) == 1 else f"({inner})"
    if type(a) is list:
        return "[" + ", ".join(_format_arg(x) for x in a) + "]"
    if type(a) is dict:
        return "{" + ", ".join(f"{k!r}: {_format_arg(v)}" for k, v in a.items()) + "}"
    if type(a) is slice:
        return f"slice({_format_arg(a.start)}, {_format_arg(a.stop)}, {_format_arg(a.step)})"
    return repr(a)
