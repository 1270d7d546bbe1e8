"""A scatter (``_ir.Scatter``: ``index_put``, ``scatter``, ``scatter_add``, ``index_add``, the
gradients of indexing and embedding) as a flat Triton kernel.

The scheduler gives a scatter a kernel of its own, after the kernel that filled the buffer it
writes. Its range (the index's sizes) is split into 1-D blocks over all its elements, as a
flat pointwise kernel; each element computes its place (loaded indices checked as gathers
check them: ``kiln_index_check``) and its value, then stores it there (``mode`` None) or adds
it with ``tl.atomic_add`` (``mode`` ``"sum"``). These are eager's CUDA semantics: where two
elements meet one place, which store wins is not defined, and atomic sums of floats add in
any order (the lowering keeps scatters ATen calls under ``torch.use_deterministic_algorithms``,
and for the folds atomics do not have here: ``prod``, ``max``, ``min``). Under triton's
interpreter the programs run one after the other and a block's stores in order, so the later
element wins, as in eager's CPU loops.
"""

from __future__ import annotations

from typing import Any

from .._ir import Scatter, flat_index
from .._ops import IndirectIndex, compute_type
from .._scheduler import Stage
from ._ops import TRITON, tstore

__all__ = ["scatter_lines"]


def scatter_lines(writer: Any, stage: Stage) -> list[str]:
    """The lines of a scatter stage in a flat kernel (``writer``: the kernel's ``_Writer``)."""
    buffer, body = stage.buffer, stage.buffer.body
    assert isinstance(body, Scatter) and body.mode in (None, "sum")
    dest, dtype = buffer.into, buffer.dtype
    ops = writer.ops()
    place = flat_index(body.target(stage.index, ops), body.strides)
    value = ops.to_dtype(body.loader(stage.index, ops), compute_type(dtype))
    lines = [f"# {buffer.name}: {'add' if body.mode else 'store'} at loaded places of {dest}", *writer.absorb(ops)]
    writer.writes[dest] = dtype
    writer.symbols |= {v for v in place.free_symbols if not isinstance(v, IndirectIndex) and v.name not in writer.dims}
    at = TRITON(place) if ops.index_dims(place) else f"{TRITON(place)} + 0 * xindex"
    stored = tstore(value.name, dtype)
    if body.mode is None:
        lines.append(f"tl.store({dest} + ({at}), {stored}, xmask)")
    else:
        lines.append(f"tl.atomic_add({dest} + ({at}), {stored}, xmask, sem='relaxed')")
    writer.stored.add(dest)
    return lines
