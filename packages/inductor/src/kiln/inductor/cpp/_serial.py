"""C++ for the stages computed in an order: a scatter (``_ir.Scatter``) and a scan
(``_ir.Scan``), each the only stage of its kernel (``_scheduler.serial``).

A scatter is serial loops over its range; each iteration computes its place in the buffer it
writes and stores there (or loads what is there, folds, stores). The innermost loop is an
``omp simd`` loop only where its iterations provably write distinct elements: the place
moves with the loop's variable by a constant step and no loaded index in it changes with
the variable. Lines that do not depend on the innermost variable (an index loaded and
checked for a whole row of an embedding's gradient) run once before that loop, where the
loop provably runs at least once (a check of an empty loop would raise what eager does
not).

A scan keeps an accumulator for each outer iteration and stores the partial result at
every step of its serial inner loop (``_lower_scan``: eager's accumulation types).
"""

from __future__ import annotations

from typing import Any

import sympy

from .._ir import Scan, Scatter, flat_index, loop_vars
from .._ops import IndirectIndex, compute_type
from .._scheduler import Stage
from ._loops import block, loops, split_invariant
from ._ops import CTYPES, cexpr, cstore

__all__ = ["scan_lines", "scatter_lines"]

_FOLD_OPS = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}


def scatter_lines(writer: Any, stage: Stage) -> list[str]:
    """The loops of a scatter stage (``writer``: the kernel's ``_kernel._Writer``)."""
    buffer, body = stage.buffer, stage.buffer.body
    assert isinstance(body, Scatter)
    dest, dtype = buffer.into, buffer.dtype
    ops = writer.ops()
    place = flat_index(body.target(stage.index, ops), body.strides)
    value = ops.to_dtype(body.loader(stage.index, ops), compute_type(dtype))
    if body.mode is not None:
        value = getattr(ops, _FOLD_OPS[body.mode])(ops.load(dest, place, dtype), value)
    writer.absorb(ops)
    writer.writes[dest] = dtype
    writer.symbols |= {v for v in place.free_symbols if not isinstance(v, IndirectIndex)}
    body_lines = [*ops.lines, f"{dest}[{cexpr(place)}] = {cstore(value.name, dtype)};"]
    variables = loop_vars("r", len(stage.inner))
    if not variables:
        return block(body_lines, "")
    last, size = variables[-1], stage.inner[-1]
    hoisted, varying = split_invariant(body_lines, last.name)
    if not sympy.sympify(size).is_positive:
        hoisted, varying = [], body_lines
    pragma = ["#pragma omp simd"] if _distinct_places(place, last, varying) else []
    innermost = [*pragma, *loops((last,), (size,), ""), *block(varying, "")]
    return [*loops(variables[:-1], stage.inner[:-1], ""), *block([*hoisted, *innermost], "")]


def _distinct_places(place: sympy.Expr, variable: sympy.Symbol, varying: list[str]) -> bool:
    """Whether the iterations of a loop over ``variable`` write distinct elements: ``place``
    moves by a nonzero constant step with it, and none of its loaded indices is computed in
    the loop (``varying``: the loop's lines)."""
    place = sympy.expand(place)
    step = place.coeff(variable)
    if not step.is_Integer or step == 0 or variable in (place - step * variable).free_symbols:
        return False
    loaded = {v.name for v in place.free_symbols if isinstance(v, IndirectIndex)}
    defined = {line.split(" = ", 1)[0].split()[-1] for line in varying if " = " in line and not line.startswith("if")}
    return not (loaded & defined)


def scan_lines(writer: Any, stage: Stage) -> list[str]:
    """The serial loop of a scan stage: fold, store each partial result."""
    buffer, body = stage.buffer, stage.buffer.body
    assert isinstance(body, Scan)
    ops = writer.ops()
    value = body.loader(stage.index, ops)
    writer.absorb(ops)
    acc, acc_type = f"acc_{buffer.name}", CTYPES[body.acc_dtype]
    op, start = ("+", "0") if body.scan_type == "sum" else ("*", "1")
    store = flat_index(stage.index, buffer.strides())
    writer.symbols |= store.free_symbols
    writer.writes[buffer.name] = buffer.dtype
    partial = f"static_cast<{CTYPES[compute_type(buffer.dtype)]}>({acc})"
    step = [*ops.lines, f"{acc} = {acc} {op} static_cast<{acc_type}>({value.name});",
            f"{buffer.name}[{cexpr(store)}] = {cstore(partial, buffer.dtype)};"]
    return [f"{acc_type} {acc} = {start};", *loops(loop_vars("r", 1), stage.inner, ""), *block(step, "")]
