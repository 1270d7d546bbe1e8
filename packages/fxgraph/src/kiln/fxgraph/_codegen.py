"""Python code generation: a Graph becomes the source of one readable function.

The generated function reads like hand-written code: one statement per node, named after the
node, infix operators for ``operator`` functions, ``x.attr`` for constant ``getattr``, and
intermediates deleted after their last use so memory is released as early as in eager code.
Objects that are not literals (functions, modules, dtypes) are reached through the globals of
the generated code, by their import path when one leads back to the same object
(``torch.relu``), otherwise under a private name. No name in the globals ever collides with a
node name.
"""

from __future__ import annotations

import builtins
import keyword
import math
import operator
import sys
from dataclasses import dataclass, field
from typing import Any

from ._import_path import find_import_path
from ._namespace import Namespace, sanitize
from ._node import Argument, GraphError, Node

__all__ = ["PythonCode", "python_code"]

_BINARY = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
    operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
    operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<",
    operator.rshift: ">>", operator.eq: "==", operator.ne: "!=", operator.lt: "<",
    operator.le: "<=", operator.gt: ">", operator.ge: ">=",
}
_IDENTITY = {operator.is_: "is", operator.is_not: "is not"}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~", operator.not_: "not "}


@dataclass(slots=True)
class PythonCode:
    """Generated source plus the globals it needs; ``src`` defines ``fn_name``."""

    src: str
    globals: dict[str, Any] = field(default_factory=dict)
    fn_name: str = "forward"


class _Globals:
    """Names in the generated code's globals, never colliding with node names."""

    def __init__(self, node_names: set[str]) -> None:
        self.values: dict[str, Any] = {}
        self._names = Namespace()
        for n in node_names:
            self._names.claim(n)
        self._by_id: dict[int, str] = {}

    def add(self, preferred: str, obj: Any) -> str:
        key = id(obj)
        if key in self._by_id:
            return self._by_id[key]
        name = preferred if self._names.claim(preferred) else self._names.create_name(preferred)
        self.values[name] = obj
        self._by_id[key] = name
        return name

    def reference(self, obj: Any) -> str:
        """An expression evaluating to ``obj`` in the generated code."""
        key = id(obj)
        if key in self._by_id:
            return self._by_id[key]
        if getattr(obj, "__module__", None) == "builtins":
            name = getattr(obj, "__name__", None)
            if isinstance(name, str) and getattr(builtins, name, None) is obj and name not in self._names:
                return name
        path = find_import_path(obj)
        if path is not None:
            root, _, rest = path.partition(".")
            alias = self.add(root, sys.modules[root])
            expr = f"{alias}.{rest}" if rest else alias
            self._by_id[key] = expr
            return expr
        base = getattr(obj, "__name__", None) or type(obj).__name__
        return self.add("_" + sanitize(str(base)), obj)


class _Renderer:
    def __init__(self, glob: _Globals) -> None:
        self.glob = glob

    def arg(self, a: Argument) -> str:
        t = type(a)
        if t is Node:
            return a.name
        if a is None or t is bool or t is int or t is str or t is bytes:
            return repr(a)
        if t is float:
            return repr(a) if math.isfinite(a) else f"{self.glob.reference(float)}('{a}')"
        if t is complex:
            return f"{self.glob.reference(complex)}({self.arg(a.real)}, {self.arg(a.imag)})"
        if a is Ellipsis:
            return "..."
        if t is tuple:
            inner = ", ".join(self.arg(x) for x in a)
            return f"({inner},)" if len(a) == 1 else f"({inner})"
        if t is list:
            return "[" + ", ".join(self.arg(x) for x in a) + "]"
        if t is dict:
            return "{" + ", ".join(f"{self.arg(k)}: {self.arg(v)}" for k, v in a.items()) + "}"
        if t is slice:
            return f"{self.glob.reference(slice)}({self.arg(a.start)}, {self.arg(a.stop)}, {self.arg(a.step)})"
        if isinstance(a, tuple) and hasattr(a, "_fields"):
            return f"{self.glob.reference(t)}({', '.join(self.arg(x) for x in a)})"
        return self.glob.reference(a)

    def operand(self, a: Argument) -> str:
        text = self.arg(a)
        simple = type(a) is Node or a is None or type(a) in (bool, str, bytes) or (
            type(a) in (int, float) and a >= 0 and math.isfinite(a)
        )
        return text if simple else f"({text})"

    def identity_operand(self, a: Argument) -> str:
        if type(a) is Node or a is None or a is True or a is False or a is Ellipsis:
            return self.arg(a)
        return self.glob.add("_const", a)

    def index(self, a: Argument) -> str:
        if type(a) is slice:
            parts = ["" if x is None else self.arg(x) for x in (a.start, a.stop, a.step)]
            return f"{parts[0]}:{parts[1]}" + (f":{parts[2]}" if a.step is not None else "")
        if type(a) is tuple and a:
            inner = ", ".join(self.index(x) for x in a)
            return inner + ("," if len(a) == 1 else "")
        return self.arg(a)

    def call_args(self, args: tuple, kwargs: dict) -> str:
        parts = [self.arg(a) for a in args]
        named = {k: v for k, v in kwargs.items() if k.isidentifier() and not keyword.iskeyword(k)}
        parts += [f"{k}={self.arg(v)}" for k, v in named.items()]
        others = [f"{k!r}: {self.arg(v)}" for k, v in kwargs.items() if k not in named]
        if others:  # a keyword argument named ``from`` (aten.uniform): passed through a dict
            parts.append("**{" + ", ".join(others) + "}")
        return ", ".join(parts)

    def attr_path(self, root: str, dotted: str) -> str:
        expr = root
        for p in dotted.split("."):
            if p.isidentifier() and not keyword.iskeyword(p):
                expr = f"{expr}.{p}"
            else:
                expr = f"{self.glob.reference(getattr)}({expr}, {p!r})"
        return expr

    def expression(self, n: Node, root_name: str) -> str:
        op, target, args, kwargs = n.op, n.target, n.args, n.kwargs
        if op == "get_attr":
            return self.attr_path(root_name, target)
        if op == "call_module":
            return f"{self.attr_path(root_name, target)}({self.call_args(args, kwargs)})"
        if op == "call_method":
            return f"{self.operand(args[0])}.{target}({self.call_args(args[1:], kwargs)})"
        if not kwargs:
            if target in _BINARY and len(args) == 2:
                return f"{self.operand(args[0])} {_BINARY[target]} {self.operand(args[1])}"
            if target in _IDENTITY and len(args) == 2:
                # ``is`` compares with the very object in the graph, not a re-created literal.
                a, b = (self.identity_operand(x) for x in args)
                return f"{a} {_IDENTITY[target]} {b}"
            if target in _UNARY and len(args) == 1:
                return f"{_UNARY[target]}{self.operand(args[0])}"
            if target is operator.getitem and len(args) == 2:
                return f"{self.operand(args[0])}[{self.index(args[1])}]"
            if (target is builtins.getattr and len(args) == 2 and type(args[1]) is str
                    and args[1].isidentifier()):
                return f"{self.operand(args[0])}.{args[1]}"
        return f"{self.glob.reference(target)}({self.call_args(args, kwargs)})"


def python_code(graph: Any, root_name: str = "self", root_param: bool = True, boxed: bool = False) -> PythonCode:
    """The source of ``def forward(<root_name>, <placeholders>): ...`` for ``graph``.

    Attributes are read as ``<root_name>.weight``; with ``root_param=False`` the root is not a
    parameter and the caller binds ``root_name`` in the globals instead.

    ``boxed=True``: the function takes one list of the inputs, ``forward(args)``, unpacks it
    and empties it, and deletes each input after its last use as it does intermediates: a
    caller that hands over its only references (a backward's saved activations) has each
    freed as soon as the graph is done with it. Placeholders with defaults are refused there.
    """
    nodes = list(graph.nodes)
    names = {n.name for n in nodes}
    glob = _Globals(names | {root_name})
    r = _Renderer(glob)

    last_use: dict[Node, Node] = {}
    for n in reversed(nodes):
        for inp in n._input_nodes:
            if inp not in last_use:
                last_use[inp] = n
    # Intermediates are deleted after their last use so that memory (activations) is released
    # as early as in eager code. Inputs are not (the caller still holds them), unless boxed.
    to_free: dict[Node, list[str]] = {}
    for value, user in last_use.items():
        if user.op != "output" and (boxed or value.op != "placeholder"):
            to_free.setdefault(user, []).append(value.name)

    params = [root_name] if root_param else []
    inputs: list[str] = []
    body: list[str] = []
    seen_default = False
    result = "None"
    for n in nodes:
        if n.op == "placeholder":
            if n.args and boxed:
                raise GraphError(f"placeholder {n.name!r} has a default: boxed code takes one list of inputs")
            if n.args:
                seen_default = True
                params.append(f"{n.name}={r.arg(n.args[0])}")
            elif seen_default:
                raise GraphError(f"placeholder {n.name!r} without a default follows one with a default")
            else:
                (inputs if boxed else params).append(n.name)
        elif n.op == "output":
            result = r.arg(n.args[0])
        else:
            expr = r.expression(n, root_name)
            line = f"{n.name} = {expr}" if n.users else expr
            freed = to_free.get(n)
            if freed:
                line += ";  del " + ", ".join(freed)
            body.append(line)
    if boxed:
        box = next(c for c in ("args", *(f"args_{i}" for i in range(len(names) + 1))) if c not in names | {root_name})
        params.append(box)
        unused = [n.name for n in nodes if n.op == "placeholder" and n not in last_use]
        unpack = f"{', '.join(inputs)}{',' if len(inputs) == 1 else ''} = {box};  {box}.clear()" if inputs else f"{box}.clear()"
        if unused:
            unpack += ";  del " + ", ".join(unused)
        body.insert(0, unpack)
    body.append(f"return {result}")
    src = f"def forward({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body)
    return PythonCode(src, glob.values)
