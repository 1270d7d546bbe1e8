"""kiln.aotgrad: ATen-level joint forward+backward tracing, functionalization, decompositions, partitioning, the runtime autograd wrapper. (not built yet)."""

__version__ = "0.1.0"
__all__: list[str] = []
