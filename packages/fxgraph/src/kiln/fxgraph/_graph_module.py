"""GraphModule: a Graph plus the attributes it reads, callable through generated code.

``GraphModule(attrs, graph)`` installs ``attrs`` (dotted names allowed: ``"layer1.weight"``
creates a namespace ``layer1`` unless ``attrs`` already gives an object there) and generates
the Python source of ``forward`` once. Each instance gets its own subclass whose ``__call__``
*is* the generated function (a staticmethod; the generated code reaches the module through
its global ``self``), so ``gm(*args)`` costs one Python call, like calling a hand-written
function. After editing ``gm.graph`` call ``gm.recompile()``.
"""

from __future__ import annotations

import copy
import hashlib
import linecache
from collections.abc import Mapping
from typing import Any

from ._graph import Graph
from ._node import GraphError

__all__ = ["GraphModule"]

_OWN_NAMES = frozenset(
    {"graph", "code", "forward", "attrs", "recompile", "has_attr", "get_attr", "print_readable"}
)


_MISSING = object()


class _AttrNamespace:
    """An intermediate level of dotted attribute names (``layer1`` in ``layer1.weight``)."""

    def __repr__(self) -> str:
        return f"namespace({', '.join(sorted(vars(self)))})"


class GraphModule:
    """A callable graph with its attributes; see the module docstring."""

    def __new__(cls, *args: Any, **kwargs: Any) -> GraphModule:
        # One subclass per instance, so that each can carry its own ``__call__``.
        if cls.__dict__.get("_kiln_per_instance", False):
            return super().__new__(cls)
        sub = type(cls.__name__, (cls,), {"_kiln_per_instance": True, "__module__": cls.__module__})
        return super().__new__(sub)

    def __init__(
        self, attrs: Mapping[str, Any] | None, graph: Graph, class_name: str = "GraphModule"
    ) -> None:
        if not isinstance(graph, Graph):
            raise GraphError(f"GraphModule needs a kiln.fxgraph.Graph, got {type(graph).__name__}")
        type(self).__name__ = type(self).__qualname__ = class_name
        self._class_name = class_name
        self._attrs: dict[str, Any] = {}
        for name, value in dict(attrs or {}).items():
            self._install(name, value)
        self._graph = graph
        self.recompile()

    # -- attributes --------------------------------------------------------------------------

    def _install(self, dotted: str, value: Any) -> None:
        parts = dotted.split(".")
        if not all(parts) or parts[0] in _OWN_NAMES or parts[0].startswith("_"):
            raise GraphError(f"invalid attribute name {dotted!r} for a GraphModule")
        obj: Any = self
        for p in parts[:-1]:
            nxt = obj.__dict__.get(p) if obj is self else getattr(obj, p, None)
            if nxt is None:
                nxt = _AttrNamespace()
                setattr(obj, p, nxt)
            obj = nxt
        leaf = parts[-1]
        if obj is not self and not isinstance(obj, _AttrNamespace):
            if getattr(obj, leaf, _MISSING) is not value:
                raise GraphError(
                    f"attribute {dotted!r} would overwrite {leaf!r} on the object at "
                    f"{'.'.join(parts[:-1])!r}; give that object a matching attribute instead"
                )
        else:
            setattr(obj, leaf, value)
        self._attrs[dotted] = value

    @property
    def attrs(self) -> dict[str, Any]:
        """The attributes given at construction, by their dotted names."""
        return dict(self._attrs)

    def get_attr(self, dotted: str) -> Any:
        """Fetch the attribute ``dotted`` (as get_attr/call_module nodes do)."""
        obj: Any = self
        for p in dotted.split("."):
            obj = getattr(obj, p)
        return obj

    def has_attr(self, dotted: str) -> bool:
        """Whether ``dotted`` resolves on this module."""
        try:
            self.get_attr(dotted)
        except AttributeError:
            return False
        return True

    # -- code --------------------------------------------------------------------------------

    @property
    def graph(self) -> Graph:
        """The graph; assign a new one to regenerate the code."""
        return self._graph

    @graph.setter
    def graph(self, graph: Graph) -> None:
        self._graph = graph
        self.recompile()

    @property
    def code(self) -> str:
        """The generated source of ``forward``."""
        return self._code

    def recompile(self) -> str:
        """Regenerate and recompile ``forward`` from the graph; returns the source."""
        # ``self`` is a global of the generated code rather than a parameter: calling an
        # instance whose ``__call__`` is a staticmethod skips binding it, which keeps
        # ``gm(*args)`` as cheap as calling a plain function.
        code = self._graph.python_code("self", root_param=False)
        fn = self._function(code, "forward")
        cls = type(self)
        cls.forward = staticmethod(fn)
        cls.__call__ = staticmethod(fn)
        self._code = code.src
        return code.src

    def boxed_forward(self) -> Any:
        """A new function computing ``forward`` from one list of the inputs, which it empties,
        deleting each input after its last use (``python_code(boxed=True)``); its
        ``boxed_call`` attribute is True. The module keeps no reference to it."""
        fn = self._function(self._graph.python_code("self", root_param=False, boxed=True), "boxed_forward")
        fn.boxed_call = True
        return fn

    def _function(self, code: Any, name: str) -> Any:
        digest = hashlib.sha1(code.src.encode()).hexdigest()[:12]
        filename = f"<kiln.fxgraph {self._class_name} {digest}>"
        linecache.cache[filename] = (len(code.src), None, code.src.splitlines(True), filename)
        namespace: dict[str, Any] = dict(code.globals)
        namespace["self"] = self
        exec(compile(code.src, filename, "exec"), namespace)
        fn = namespace[code.fn_name]
        fn.__qualname__ = f"{self._class_name}.{name}"
        return fn

    def print_readable(self) -> str:
        """The class as source text: its name and its generated forward."""
        body = "".join(f"    {line}\n" for line in self._code.splitlines())
        return f"class {self._class_name}:\n{body}"

    def __repr__(self) -> str:
        return self.print_readable()

    # -- copying and pickling ----------------------------------------------------------------

    def __reduce__(self) -> tuple:
        return (_rebuild, (self._attrs, self._graph, self._class_name))

    def __deepcopy__(self, memo: dict) -> GraphModule:
        attrs = copy.deepcopy(self._attrs, memo)
        graph = copy.deepcopy(self._graph, memo)
        return GraphModule(attrs, graph, self._class_name)

    def __copy__(self) -> GraphModule:
        return GraphModule(self._attrs, self._graph, self._class_name)


def _rebuild(attrs: dict[str, Any], graph: Graph, class_name: str) -> GraphModule:
    return GraphModule(attrs, graph, class_name)
