"""``InductorConfig``: kiln.inductor's stage config, the fields ``kiln.compile``'s ``options``
may set as ``"inductor.<field>"`` (the umbrella builds it; ``compile_graph`` reads it).
Imports nothing heavy: the umbrella builds it at every ``kiln.compile``."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["InductorConfig"]


@dataclass(frozen=True, slots=True)
class InductorConfig:
    """kiln.inductor's."""

    fuse: bool = field(default=True, metadata={
        "help": "fuse buffers that share a loop into one kernel (False: one kernel per buffer, to "
                "bisect numerics)"})
    cudagraphs: bool = field(default=False, metadata={
        "help": "replay CUDA graphs of the compiled kernels (cuts launch overhead; GPU only, not built yet)"})
    max_autotune: bool = field(default=False, metadata={
        "help": "search kernel configurations (and vendor libraries) for the fastest (not built yet)"})
    cache_dir: str = field(default="", metadata={
        "help": "where compiled kernels are kept across processes; empty: $KILN_CACHE_DIR, else "
                "~/.cache/kiln"})
