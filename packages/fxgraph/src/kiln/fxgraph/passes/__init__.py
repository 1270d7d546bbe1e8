"""Graph passes: functions from a graph to the same graph, rewritten in place."""

from ._cse import eliminate_common_subexpressions
from ._dce import eliminate_dead_code
from ._tabular import format_graph_table

__all__ = ["eliminate_common_subexpressions", "eliminate_dead_code", "format_graph_table"]
