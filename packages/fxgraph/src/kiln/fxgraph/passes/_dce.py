"""Dead-code elimination: erase nodes whose values nobody reads and that have no effects.

Placeholders stay (they are the function's signature) and so do impure nodes
(see ``kiln.fxgraph._impurity``). Walking backwards erases whole dead chains in one pass.
"""

from __future__ import annotations

from .._graph import Graph
from .._impurity import is_impure

__all__ = ["eliminate_dead_code"]


def eliminate_dead_code(graph: Graph) -> int:
    """Erase dead pure nodes from ``graph``; returns how many were erased."""
    erased = 0
    for n in reversed(graph.nodes):
        if not n.users and not is_impure(n):
            graph.erase_node(n)
            erased += 1
    return erased
