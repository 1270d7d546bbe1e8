"""A tabular listing of a graph: one row per node (opcode, name, target, args, kwargs)."""

from __future__ import annotations

from .._graph import Graph
from .._node import _format_arg, _target_text

__all__ = ["format_graph_table"]

_HEADERS = ("opcode", "name", "target", "args", "kwargs")


def format_graph_table(graph: Graph) -> str:
    """The graph as an aligned text table."""
    rows = [
        (n.op, n.name, _target_text(n.target), _format_arg(n.args), _format_arg(n.kwargs))
        for n in graph.nodes
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(_HEADERS)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(_HEADERS, widths, strict=True)).rstrip(), line]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(out)
