"""Graph: an ordered list of Nodes with an insertion point.

Nodes form a doubly linked list around a sentinel, so inserting, moving and erasing are
O(1). Invariants (checked by ``lint``): names are unique identifiers; every Node reads only
Nodes of this graph that come before it; ``users`` mirror the arguments; at most one
``output`` node and it is last; placeholder names are unique and exact (they are the
function's argument names).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ._import_path import find_import_path, load_import_path
from ._namespace import Namespace
from ._node import NO_DEFAULT, OPS, Argument, GraphError, Node, _target_text, map_arg

__all__ = ["Graph"]


def _candidate_name(op: str, target: Any, args: tuple) -> str:
    if op == "output":
        return "output"
    if target is getattr and len(args) >= 2 and isinstance(args[1], str):
        return args[1]  # ``x.shape`` reads better as ``shape`` than ``getattr_1``
    if op in ("call_method", "get_attr", "call_module"):
        return str(target).replace(".", "_")
    name = getattr(target, "__name__", None)
    if isinstance(name, str):
        # ``add.Tensor`` (an ATen overload) reads better as ``add``.
        return name.split(".")[0]
    return type(target).__name__


class _NodeList:
    """A live view of a graph's nodes in order (``len``, iteration, ``reversed``)."""

    __slots__ = ("_graph", "_reverse")

    def __init__(self, graph: Graph, reverse: bool = False) -> None:
        self._graph = graph
        self._reverse = reverse

    def __len__(self) -> int:
        return self._graph._len

    def __iter__(self) -> Iterator[Node]:
        root = self._graph._root
        step = "_prev" if self._reverse else "_next"
        cur = getattr(root, step)
        while cur is not root:
            nxt = getattr(cur, step)
            if not cur._erased:
                yield cur
            cur = nxt

    def __reversed__(self) -> Iterator[Node]:
        return iter(_NodeList(self._graph, not self._reverse))

    def __repr__(self) -> str:
        return f"<{len(self)} nodes: {', '.join(n.name for n in self)}>"


class Graph:
    """A graph of operations; build it with ``placeholder``, ``call_function``, ... ``output``."""

    def __init__(self) -> None:
        self._root = Node.__new__(Node)
        self._root._prev = self._root._next = self._root
        self._root._erased = False
        self._root.name = "<root>"
        self._root.graph = self
        self._insert_before: Node = self._root
        self._namespace = Namespace()
        self._placeholders: dict[str, Node] = {}
        self._len = 0

    # -- reading -----------------------------------------------------------------------------

    @property
    def nodes(self) -> _NodeList:
        """The nodes in order; a live view, safe to iterate while erasing the current node."""
        return _NodeList(self)

    def find_nodes(self, op: str, target: Any = None) -> list[Node]:
        """Nodes with this op (and this target, when given), in order."""
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    @property
    def output_node(self) -> Node | None:
        """The ``output`` node, or None while the graph has none."""
        last = self._root._prev
        return last if last is not self._root and last.op == "output" else None

    # -- building ----------------------------------------------------------------------------

    def create_node(
        self,
        op: str,
        target: Any,
        args: tuple = (),
        kwargs: dict | None = None,
        name: str | None = None,
        type_: Any = None,
    ) -> Node:
        """Create a node at the insertion point; ``name`` is a wish, made unique if taken."""
        if op not in OPS:
            raise GraphError(f"unknown op {op!r}; expected one of {', '.join(OPS)}")
        if op == "call_function" and not callable(target):
            raise GraphError(f"call_function target must be callable, got {target!r}")
        if op in ("call_method", "get_attr", "call_module") and not isinstance(target, str):
            raise GraphError(f"{op} target must be a str, got {target!r}")
        if op == "output" and self.output_node is not None:
            raise GraphError("graph already has an output node")
        if not isinstance(args, tuple):
            raise GraphError(f"args must be a tuple, got {type(args).__name__}")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise GraphError(f"kwargs must be a dict, got {type(kwargs).__name__}")
        if name is None or not self._namespace.claim(name):
            name = self._namespace.create_name(name or _candidate_name(op, target, args))
        try:
            node = Node(self, name, op, target, args, dict(kwargs or {}), type_)
        except GraphError:
            self._namespace.release(name)
            raise
        self._link_before(node, self._insert_before)
        return node

    def placeholder(self, name: str, type_: Any = None, default: Any = NO_DEFAULT) -> Node:
        """A function input named exactly ``name``, optionally with a default value."""
        if not isinstance(name, str) or not name.isidentifier():
            raise GraphError(f"placeholder name must be an identifier, got {name!r}")
        if name in self._placeholders:
            raise GraphError(f"duplicate placeholder name {name!r}")
        if not self._namespace.claim(name):
            raise GraphError(f"placeholder name {name!r} is reserved or already used by a node")
        args = () if default is NO_DEFAULT else (default,)
        node = Node(self, name, "placeholder", name, args, {}, type_)
        self._link_before(node, self._insert_before)
        self._placeholders[name] = node
        return node

    def get_attr(self, qualified_name: str, type_: Any = None) -> Node:
        """Fetch the attribute ``qualified_name`` (dotted) of the owning GraphModule."""
        return self.create_node("get_attr", qualified_name, type_=type_)

    def call_function(
        self, the_function: Callable, args: tuple = (), kwargs: dict | None = None, type_: Any = None
    ) -> Node:
        """Call a free function."""
        return self.create_node("call_function", the_function, tuple(args), kwargs, type_=type_)

    def call_method(
        self, method_name: str, args: tuple = (), kwargs: dict | None = None, type_: Any = None
    ) -> Node:
        """Call ``args[0].method_name(*args[1:], **kwargs)``."""
        if not args:
            raise GraphError(f"call_method {method_name!r} needs the object as args[0]")
        return self.create_node("call_method", method_name, tuple(args), kwargs, type_=type_)

    def call_module(
        self, module_name: str, args: tuple = (), kwargs: dict | None = None, type_: Any = None
    ) -> Node:
        """Call the submodule ``module_name`` (dotted) of the owning GraphModule."""
        return self.create_node("call_module", module_name, tuple(args), kwargs, type_=type_)

    def output(self, result: Argument, type_: Any = None) -> Node:
        """The value the graph returns (any nesting of Nodes and constants)."""
        return self.create_node("output", "output", (result,), type_=type_)

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Argument] = lambda n: n) -> Node:
        """Copy ``node`` (from any graph) here, mapping its input Nodes through ``arg_transform``."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        if node.op == "placeholder":
            default = args[0] if args else NO_DEFAULT
            new = self.placeholder(node.target, node.type, default)
        else:
            new = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        new.meta = dict(node.meta)
        return new

    def graph_copy(self, other: Graph, val_map: dict[Node, Node]) -> Argument:
        """Copy every node of ``other`` except its output here; returns the output's value mapped."""
        for n in other.nodes:
            if n.op == "output":
                return map_arg(n.args[0], lambda x: val_map[x])
            val_map[n] = self.node_copy(n, lambda x: val_map[x])
        return None

    # -- insertion points --------------------------------------------------------------------

    @contextlib.contextmanager
    def inserting_before(self, node: Node | None = None) -> Iterator[None]:
        """New nodes go just before ``node`` (before the first node when None), in creation order."""
        anchor = self._root._next if node is None else node
        saved, self._insert_before = self._insert_before, anchor
        try:
            yield
        finally:
            self._insert_before = saved

    @contextlib.contextmanager
    def inserting_after(self, node: Node | None = None) -> Iterator[None]:
        """New nodes go just after ``node`` (at the very start when None), in creation order."""
        anchor = self._root._next if node is None else node._next
        saved, self._insert_before = self._insert_before, anchor
        try:
            yield
        finally:
            self._insert_before = saved

    # -- removing ----------------------------------------------------------------------------

    def erase_node(self, node: Node) -> None:
        """Remove ``node``; refuses while other nodes still use it."""
        if node.graph is not self:
            raise GraphError(f"cannot erase node {node.name!r}: it belongs to another graph")
        if node._erased:
            raise GraphError(f"node {node.name!r} was already erased")
        if node.users:
            users = ", ".join(u.name for u in node.users)
            raise GraphError(f"cannot erase node {node.name!r}: it is still used by {users}")
        if node is self._insert_before:
            self._insert_before = node._next
        node._update_args_kwargs((), {})
        node._prev._next = node._next
        node._next._prev = node._prev
        node._erased = True
        self._len -= 1
        self._namespace.release(node.name)
        if node.op == "placeholder":
            del self._placeholders[node.target]

    # -- checking ----------------------------------------------------------------------------

    def lint(self, owner: Any = None) -> None:
        """Check every invariant; raises GraphError naming the first broken one.

        With ``owner`` (a GraphModule), get_attr and call_module targets must resolve on it.
        """
        seen: set[Node] = set()
        names: set[str] = set()
        placeholders: set[str] = set()
        for n in self.nodes:
            where = f"node {n.name!r} ({n.op} {_target_text(n.target)})"
            if n.graph is not self:
                raise GraphError(f"{where} belongs to another graph")
            if n.op not in OPS:
                raise GraphError(f"{where} has unknown op {n.op!r}")
            if not n.name.isidentifier() or n.name in names:
                raise GraphError(f"{where}: name is not a unique identifier")
            names.add(n.name)
            for inp in n._input_nodes:
                if inp.graph is not self:
                    raise GraphError(f"{where} reads {inp.name!r}, a node of another graph")
                if inp not in seen:
                    raise GraphError(f"{where} reads {inp.name!r} before it is defined")
                if n not in inp.users:
                    raise GraphError(f"{where} is missing from the users of {inp.name!r}")
            for user in n.users:
                if user.graph is not self or user._erased or n not in user._input_nodes:
                    raise GraphError(f"{where} lists {user.name!r} as a user, which does not read it")
            self._lint_op(n, where, placeholders)
            if n.op == "output" and n._next is not self._root:
                raise GraphError(f"{where} is not the last node")
            if n.op in ("get_attr", "call_module") and owner is not None and not owner.has_attr(n.target):
                raise GraphError(f"{where}: the module has no attribute {n.target!r}")
            seen.add(n)
        if len(seen) != self._len:
            raise GraphError(f"graph counts {self._len} nodes but links {len(seen)}")

    @staticmethod
    def _lint_op(n: Node, where: str, placeholders: set[str]) -> None:
        if n.op == "placeholder":
            if n.target != n.name or n.target in placeholders:
                raise GraphError(f"{where}: placeholder name must be unique and equal its target")
            if len(n.args) > 1 or n.kwargs:
                raise GraphError(f"{where}: a placeholder takes at most a default value")
            placeholders.add(n.target)
        elif n.op == "call_function" and not callable(n.target):
            raise GraphError(f"{where}: target is not callable")
        elif n.op in ("call_method", "get_attr", "call_module") and not isinstance(n.target, str):
            raise GraphError(f"{where}: target must be a str")
        elif n.op == "output" and len(n.args) != 1:
            raise GraphError(f"{where}: output takes exactly one value")

    # -- code --------------------------------------------------------------------------------

    def python_code(self, root_name: str = "self", root_param: bool = True, boxed: bool = False) -> Any:
        """Generate the Python source of this graph (see ``kiln.fxgraph.python_code``)."""
        from ._codegen import python_code

        return python_code(self, root_name, root_param, boxed)

    def __str__(self) -> str:
        lines = ["graph():"]
        lines += [f"    {n.format_node()}" for n in self.nodes]
        return "\n".join(lines)

    # -- copying and pickling ----------------------------------------------------------------

    def __getstate__(self) -> dict:
        # A flat list of records: pickling the linked list as is would recurse once per node.
        index: dict[Node, int] = {}
        records = []
        for i, n in enumerate(self.nodes):
            records.append(
                (n.op, _pickled_target(n.target), map_arg(n.args, lambda x: _Ref(index[x])),
                 map_arg(n.kwargs, lambda x: _Ref(index[x])), n.name, n.type, n.meta)
            )
            index[n] = i
        return {"records": records}

    def __setstate__(self, state: dict) -> None:
        self.__init__()
        built: list[Node] = []
        for op, target, args, kwargs, name, type_, meta in state["records"]:
            if type(target) is _ByPath:
                target = load_import_path(target.path)
            args = _unref(args, built)
            kwargs = _unref(kwargs, built)
            if op == "placeholder":
                node = self.placeholder(target, type_, args[0] if args else NO_DEFAULT)
            else:
                node = self.create_node(op, target, args, kwargs, name, type_)
            node.meta = meta
            built.append(node)

    # -- linked list -------------------------------------------------------------------------

    def _link_before(self, node: Node, anchor: Node) -> None:
        prev = anchor._prev
        node._prev, node._next = prev, anchor
        prev._next = node
        anchor._prev = node
        self._len += 1

    def _move_before(self, node: Node, anchor: Node) -> None:
        if node is anchor:
            return
        if node.graph is not self or anchor.graph is not self:
            raise GraphError(f"cannot move {node.name!r}: both nodes must belong to this graph")
        node._prev._next = node._next
        node._next._prev = node._prev
        self._len -= 1
        self._link_before(node, anchor)


class _ByPath:
    """A target pickled by its import path (ATen operators do not pickle by value)."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (_ByPath, (self.path,))


def _pickled_target(target: Any) -> Any:
    if isinstance(target, str):
        return target
    path = find_import_path(target)
    return target if path is None else _ByPath(path)


class _Ref:
    """A node reference by position, used only inside a pickled graph."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __reduce__(self) -> tuple:
        return (_Ref, (self.index,))


def _unref(a: Argument, built: list[Node]) -> Argument:
    from ._node import map_aggregate

    return map_aggregate(a, lambda x: built[x.index] if type(x) is _Ref else x)
