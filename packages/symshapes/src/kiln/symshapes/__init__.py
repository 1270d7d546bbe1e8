"""kiln.symshapes: SymInt/SymFloat/SymBool over sympy, ShapeEnv, value ranges, shape guards; fake tensors (torch bridge). (not built yet)."""

__version__ = "0.1.0"
__all__: list[str] = []
