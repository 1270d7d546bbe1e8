"""kiln.frameeval: The PEP 523 frame hook (C extension) and the per-code-object cache of compiled entries. (not built yet)."""

__version__ = "0.1.0"
__all__: list[str] = []
