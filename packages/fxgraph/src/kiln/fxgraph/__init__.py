"""kiln.fxgraph: the graph IR every kiln stage passes around.

A ``Graph`` is an ordered list of ``Node(op, target, args, kwargs)``; a ``GraphModule`` pairs
a graph with the attributes it reads and runs it through generated Python source;
``Interpreter`` and ``Transformer`` walk a graph node by node to evaluate or rewrite it; the
``passes`` subpackage holds dead-code and common-subexpression elimination and a tabular
printer; ``kiln.fxgraph.torch_fx`` converts to and from ``torch.fx`` (the only module that
imports torch).
"""

from ._codegen import PythonCode, python_code
from ._graph import Graph
from ._graph_module import GraphModule
from ._impurity import is_impure, register_impure, register_impure_method, register_impure_rule
from ._interpreter import Interpreter, Transformer
from ._node import NO_DEFAULT, OPS, GraphError, Node, map_aggregate, map_arg
from .passes import eliminate_common_subexpressions, eliminate_dead_code, format_graph_table

__version__ = "0.1.0"
__all__ = [
    "NO_DEFAULT",
    "OPS",
    "Graph",
    "GraphError",
    "GraphModule",
    "Interpreter",
    "Node",
    "PythonCode",
    "Transformer",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "format_graph_table",
    "is_impure",
    "map_aggregate",
    "map_arg",
    "python_code",
    "register_impure",
    "register_impure_method",
    "register_impure_rule",
]
