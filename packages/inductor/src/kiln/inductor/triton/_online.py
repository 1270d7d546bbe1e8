"""Two reductions of a row in one loop over its blocks (``_ir.Reduction.online``): a softmax's
max and sum of exponentials (online softmax), a variance's sum and sum of squared deviations
(Welford's algorithm).

Online softmax. A Triton row kernel that loops over a row (wider than ``FusionPolicy.triton_persistent_max``,
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

Welford. A looped variance would sum the row in one pass and the squared deviations from its
mean in a second. Each lane instead keeps the count, sum and sum of squared deviations
(``m2``) of the elements it has seen, updated per element by Welford's rule (``m2 += (v -
old mean) * (v - new mean)``, each mean its sum over its count). At the end the row's sum is
the lanes' sums added (``tl.sum``, as the two-pass kernel adds them) and its ``m2``, the
squares' sum, is ``sum(m2 + count * (lane mean - row mean)**2)`` over the lanes (the
parallel-axis rule; Chan's pairwise combine gives the same, but as a custom ``tl.reduce``
that triton's interpreter folds left to right, 4x eager's error on a row of mean 100). Lanes
keep sums, not running means: a running mean updated by ``(v - mean) / count`` gathers a
rounding error per element (10x eager's on that row). Infinities and NaN give NaN squares,
as eager's two passes do.
"""

from __future__ import annotations

from typing import Any

from .._ir import Reduction, loop_vars
from .._ops import compute_type
from .._scheduler import Stage
from ._ops import TL_TYPES, TritonVar

__all__ = ["online_softmax", "welford"]

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
    after = [f"val_{m} = kiln_reduce(acc_{m}, 1, kiln_maximum)[:, None]",
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


def welford(writer: Any, total: Stage, squares: Stage) -> tuple[list[str], list[str], list[str]]:
    """``(before, inside, after)``: the lanes' count, mean and ``m2``, one block's update from
    the elements of the sum ``total``, and the two results (``squares.buffer.body.online ==
    ("welford", total.buffer.name)``), stored or kept in registers."""
    t, q = total.buffer.name, squares.buffer.name
    body = total.buffer.body
    assert isinstance(body, Reduction)
    vtype = compute_type(total.buffer.dtype)
    acc_type = TL_TYPES[vtype]
    ops = writer.ops()
    value = ops.to_dtype(body.loader(total.index, list(loop_vars("r", len(total.inner))), ops), vtype)
    barrier = writer.barrier(ops, None if total.local else total.buffer.storage or t)
    w = f"w_{q}"
    inside = [f"# {t}, {q}: sum and squared deviations in one pass (Welford)", *barrier, *writer.absorb(ops),
              f"{w}_in = xmask & rmask",
              f"{w}_old = {w}_sum / tl.maximum({w}_count, 1.0)",
              f"{w}_count = {w}_count + {w}_in.to({acc_type})",
              f"{w}_sum = {w}_sum + tl.where({w}_in, {value.name}, 0.0)",
              f"{w}_m2 = tl.where({w}_in, {w}_m2 + ({value.name} - {w}_old) * ({value.name} - {w}_sum / "
              f"tl.maximum({w}_count, 1.0)), {w}_m2)"]
    before = [f"{w}_sum = tl.zeros({_BLOCK}, {acc_type})", f"{w}_m2 = tl.zeros({_BLOCK}, {acc_type})",
              f"{w}_count = tl.zeros({_BLOCK}, {acc_type})"]
    after = [f"val_{t} = tl.sum({w}_sum, 1)[:, None]",
             f"{w}_dev = {w}_sum / tl.maximum({w}_count, 1.0) - val_{t} / tl.sum({w}_count, 1)[:, None]",
             f"val_{q} = tl.sum({w}_m2 + {w}_count * {w}_dev * {w}_dev, 1)[:, None]"]
    for stage, name in ((total, t), (squares, q)):
        out = TritonVar(f"val_{name}", compute_type(stage.buffer.dtype), frozenset({"x"}))
        if stage.local:
            writer.locals[name] = out
        else:
            after.append(writer.store(writer.ops(), stage.buffer, stage.index, out))
    return before, inside, after
