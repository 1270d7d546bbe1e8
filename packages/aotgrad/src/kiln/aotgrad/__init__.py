"""kiln.aotgrad: ATen-level forward and backward graphs of a torch-level graph, functional
(no in-place ops or aliasing inside), split into a forward and a backward graph that an
``autograd.Function`` runs (see the package README)."""

from kiln.aotgrad._api import aot_compile
from kiln.aotgrad._decompositions import core_aten_decompositions
from kiln.aotgrad._functional import AotUnsupported, functional_variant
from kiln.aotgrad._partition import Partition, partition
from kiln.aotgrad._runtime import RuntimeMeta, make_runtime
from kiln.aotgrad._trace import TraceResult, trace

__version__ = "0.1.0"
__all__ = ["AotUnsupported", "Partition", "RuntimeMeta", "TraceResult", "aot_compile", "core_aten_decompositions",
           "functional_variant", "make_runtime", "partition", "trace"]
