"""kiln.symexec: Bytecode decoding/assembly per CPython version, the symbolic interpreter, variable trackers, graph breaks and resume functions. (not built yet)."""

__version__ = "0.1.0"
__all__: list[str] = []
