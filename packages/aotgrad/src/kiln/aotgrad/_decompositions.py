"""Decompositions: composite ATen ops replaced, while tracing, by the core ATen ops they are
made of, for a backend that compiles a small op set (kiln.inductor).

The table maps an ``OpOverload`` to a Python function computing it from other ATen ops; the
recorder runs that function instead of recording the op, so its inner ops are recorded
(and decomposed again where the table says so). ``aot_eager`` traces without a table (the
graph runs the ops torch dispatches to).

Where the entries come from: every entry of torch's ``torch._decomp.core_aten_decompositions()``
(torch's map to its core ATen op set, e.g. ``silu``, ``hardswish``, ``gelu_backward``,
``native_layer_norm_backward``, ``mse_loss``, ``t``, ``transpose``, ``cat``'s legacy forms),
less the ops a backend keeps whole (``keep``). kiln adds no entry of its own yet. torch builds
its table anew at each call (about 50 ms: it walks every registered op); it is built once per
process here, and each call returns a new dict of it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["core_aten_decompositions"]


def core_aten_decompositions(keep: Iterable[Any] = ()) -> dict[Any, Callable[..., Any]]:
    """torch's map of composite ops to core ATen, without the ops in ``keep`` (overloads, or
    packets for all their overloads)."""
    kept = set(keep)
    return {op: fn for op, fn in _torch_table() if op not in kept and op.overloadpacket not in kept}


@functools.cache
def _torch_table() -> tuple[tuple[Any, Callable[..., Any]], ...]:
    from torch._decomp import core_aten_decompositions as torch_table

    return tuple(torch_table().items())
