"""kiln.guards: Sources, guard kinds, the guard compiler and failure explanations. (not built yet)."""

__version__ = "0.1.0"
__all__: list[str] = []
