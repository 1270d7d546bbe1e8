"""``AotgradConfig``: kiln.aotgrad's stage config, the fields ``kiln.compile``'s ``options``
may set as ``"aotgrad.<field>"`` (the umbrella builds it; ``aot_compile`` reads it).

Imports nothing: the umbrella builds every stage's config when ``kiln.compile`` is called,
long before (and whether or not) the first graph reaches aotgrad, whose tracer imports sympy
and torch's meta kernels (about 0.3 s).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["AotgradConfig"]


@dataclass(frozen=True, slots=True)
class AotgradConfig:
    """kiln.aotgrad's: how it partitions the joint graph."""

    partitioner: str = field(default="min_cut", metadata={
        "help": "how the joint graph splits into forward and backward: min_cut recomputes "
                "cheap ops in backward instead of saving them; save_all saves every "
                "intermediate the backward reads",
        "choices": ("min_cut", "save_all")})
