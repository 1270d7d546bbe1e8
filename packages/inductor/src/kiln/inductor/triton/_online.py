"""Online softmax: a row's max and the sum of ``exp(v - max)`` in one loop over its blocks.

A Triton row kernel that loops over a row (wider than ``FusionPolicy.triton_persistent_max``,
or of unknown size) would compute a softmax's max in one pass and the sum of the
exponentials in a second. When the sum is marked ``online_of`` the max (``_ir.Reduction``:
its elements are ``exp(v - max)``), both fold in one pass, per lane of the block:

    run = maximum(acc_max, v)
    acc_sum = acc_sum * rescale(acc_max, run) + exp(v - run)
    acc_max = run

and at the end the lanes combine: ``max = max(acc_max)``, ``sum = sum(acc_sum *
rescale(acc_max, max))``, where ``rescale(old, new)`` is ``exp(old - new)``, and 1 where the two
are equal (both -inf: nothing summed yet in that lane; ``exp(-inf - -inf)`` would be NaN). A
lane that has seen only -inf adds nothing (its exponentials are 0 against the row's max).
NaN propagates as in eager: a NaN max makes every rescale, and so the sum, NaN; a +inf max
gives ``exp(inf - inf)``, NaN, as eager's ``exp(x - max)`` does.

The sum's own loader computes ``exp(v - M)``: it runs with the buffer ``M`` bound to the
running max (``run_<M>``, a block), so the summand is written once, by the lowering.
"""

from __future__ import annotations

from typing import Any

from .._ir import Reduction, loop_vars
from .._ops import compute_type
from .._scheduler import Stage
from ._ops import TL_TYPES, TritonVar

__all__ = ["online_softmax"]

_BLOCK = "[XBLOCK, RBLOCK]"
_NEG_INF = "float('-inf')"


def online_softmax(writer: Any, peak: Stage, total: Stage) -> tuple[list[str], list[str], list[str]]:
    """``(before, inside, after)``: the accumulators, one block's folding of the max ``peak``
    and the sum ``total`` (``total.buffer.body.online_of == peak.buffer.name``), and their
    results (stored, or kept in registers when ``local``)."""
    m, s = peak.buffer.name, total.buffer.name
    m_body, s_body = peak.buffer.body, total.buffer.body
    assert isinstance(m_body, Reduction) and isinstance(s_body, Reduction)
    vtype = compute_type(peak.buffer.dtype)
    acc_type = TL_TYPES[vtype]
    r_vars = list(loop_vars("r", len(peak.inner)))
    ops = writer.ops()
    value = ops.to_dtype(m_body.loader(peak.index, r_vars, ops), vtype)
    barrier = writer.barrier(ops, None if peak.local else peak.buffer.storage or m)
    inside = [f"# {m}, {s}: max and sum of exponentials in one pass (online softmax)", *barrier,
              *writer.absorb(ops),
              f"run_{m} = kiln_maximum(acc_{m}, tl.where(xmask & rmask, {value.name}, {_NEG_INF}))"]
    outer = writer.locals.get(m)
    writer.locals[m] = TritonVar(f"run_{m}", vtype, frozenset({"x", "r"}))
    ops = writer.ops()
    term = ops.to_dtype(s_body.loader(total.index, r_vars, ops), compute_type(total.buffer.dtype))
    if outer is None:
        del writer.locals[m]
    else:
        writer.locals[m] = outer
    barrier = writer.barrier(ops, None if total.local else total.buffer.storage or s)
    inside += [*barrier, *writer.absorb(ops),
               f"acc_{s} = acc_{s} * {_rescale(f'acc_{m}', f'run_{m}')} + "
               f"tl.where(xmask & rmask & (run_{m} != {_NEG_INF}), {term.name}, 0)",
               f"acc_{m} = run_{m}"]
    before = [f"acc_{m} = tl.full({_BLOCK}, {_NEG_INF}, {acc_type})", f"acc_{s} = tl.zeros({_BLOCK}, {acc_type})"]
    after = [f"val_{m} = tl.reduce(acc_{m}, 1, kiln_maximum)[:, None]",
             f"val_{s} = tl.sum(acc_{s} * {_rescale(f'acc_{m}', f'val_{m}')}, 1)[:, None]"]
    for stage, name, dtype in ((peak, m, vtype), (total, s, compute_type(total.buffer.dtype))):
        out = TritonVar(f"val_{name}", dtype, frozenset({"x"}))
        if stage.local:
            writer.locals[name] = out
        else:
            after.append(writer.store(writer.ops(), stage.buffer, stage.index, out))
    return before, inside, after


def _rescale(old: str, new: str) -> str:
    return f"tl.where({old} == {new}, 1.0, tl.exp({old} - {new}))"
