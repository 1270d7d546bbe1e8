"""A scan (``_ir.Scan``: ``cumsum``, ``cumprod``) as a Triton row kernel.

The scheduler gives a scan a kernel of its own: the dimensions other than the scanned one are
the kernel's outer range (``XBLOCK`` rows per program), the scanned one its inner range. Each
row is scanned left to right in blocks of ``RBLOCK`` elements: a block's inclusive scan
(``tl.cumsum``/``tl.cumprod`` along axis 1) is combined with the carry, the fold of every
element of the row before the block, and the carry then folds in the whole block. A row that
fits one block (``persistent``) has no loop and no carry.

Values accumulate in the scan's ``acc_dtype`` (float64 for float32 results, float32 for the
half types, int64 for integers: what eager's CPU kernels accumulate in) and each partial
result is rounded to the result's type as it is stored. Lanes past the end of a row hold the
identity (0, 1), so the carry never sees them. Within a block, Triton combines elements in a
tree rather than left to right: in float types the partial results may differ from eager's
serial fold in the last bits of the accumulator, which the rounding to the result's type
almost always hides.
"""

from __future__ import annotations

from typing import Any

from .._ir import Scan, flat_index
from .._ops import compute_type
from .._scheduler import Stage
from ._ops import TL_TYPES, TRITON, tstore

__all__ = ["scan_lines"]

# scan type -> (identity, the block's inclusive scan of {v}, {a} combined with {b}, fold of {v} over axis 1)
_SCANS = {
    "sum": ("0", "tl.cumsum({v}, 1)", "({a} + {b})", "tl.sum({v}, 1)"),
    "prod": ("1", "tl.cumprod({v}, 1)", "({a} * {b})", "kiln_reduce({v}, 1, kiln_mul)"),
}


def scan_lines(writer: Any, stage: Stage, persistent: bool) -> tuple[list[str], list[str]]:
    """``(before, body)``: the lines before the loop over a row's blocks (the carry) and the
    lines of one block: load, scan, combine with the carry, store; fold the carry."""
    buffer, body = stage.buffer, stage.buffer.body
    assert isinstance(body, Scan)
    name = buffer.name
    identity, block_scan, combine, fold = _SCANS[body.scan_type]
    acc_type = TL_TYPES[body.acc_dtype]
    ops = writer.ops()
    value = body.loader(stage.index, ops)
    wide = f"tl.where(xmask & rmask, {value.name}.to({acc_type}), {identity})"
    lines = [f"# {name}: {body.scan_type} scan along dim {body.dim}", *writer.absorb(ops),
             f"blk_{name} = {wide}"]
    scanned = block_scan.format(v=f"blk_{name}")
    before: list[str] = []
    if persistent:
        lines.append(f"scan_{name} = {scanned}")
    else:
        before.append(f"carry_{name} = tl.full([XBLOCK, 1], {identity}, {acc_type})")
        lines.append(f"scan_{name} = {combine.format(a=f'carry_{name}', b=scanned)}")
    store = flat_index(stage.index, buffer.strides())
    writer.symbols |= {s for s in store.free_symbols if s.name not in writer.dims}
    writer.writes[name] = buffer.dtype
    partial = f"scan_{name}.to({TL_TYPES[compute_type(buffer.dtype)]})"
    lines.append(f"tl.store({name} + ({TRITON(store)}), {tstore(partial, buffer.dtype)}, xmask & rmask)")
    if not persistent:
        lines.append(f"carry_{name} = {combine.format(a=f'carry_{name}', b=fold.format(v=f'blk_{name}') + '[:, None]')}")
    writer.stored.add(name)
    return before, lines

