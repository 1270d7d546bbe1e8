"""The matrix product template: a kernel whose first stage is an ``_ir.Matmul`` (``mm``,
``bmm``, ``addmm``'s product under max-autotune), with its epilogue.

Each program computes one ``[XBLOCK, RBLOCK]`` tile of the result (rows ``m``, columns
``n``; for a batched product, of one batch): it walks ``K`` in steps of ``KBLOCK``, loading a
``[XBLOCK, KBLOCK]`` block of ``a`` and a ``[KBLOCK, RBLOCK]`` block of ``b`` and folding
their ``tl.dot`` into a float32 accumulator. Programs go through the tiles in groups of
``GROUP_M`` rows of tiles, column after column within a group, so that programs running at
once share blocks of ``a`` and ``b`` in the L2 cache. Loads past the edges are masked (a
ragged last tile; along ``K`` only where ``K`` is not a static multiple of 128, the widest
``KBLOCK``: ``even_k``).

The tile's rows are the kernel's ``xindex`` (row ``m`` of batch ``b`` is ``b * M + m``, the
outer loop variables decomposed from it) and its columns the ``rindex`` of the one inner
variable, so the epilogue's stages (pointwise, over the product's columns: ``_scheduler``)
render as a persistent row kernel's do (``_kernel._Writer.pointwise``), reading the product
from the accumulator: a register, never memory (``_Writer.locals``). The product itself is
stored only where something after the kernel reads it; a half type's product read by the
epilogue as well is rounded first, as the stored elements are.

Launch (``TritonKernel.meta``): ``XBLOCK``, ``RBLOCK``, ``KBLOCK``, ``GROUP_M``,
``num_warps``, ``num_stages`` (software pipelining of the ``K`` loop); the heuristic's
(``template_launch``) or, with max-autotune, measured among ``template_candidates``.
"""

from __future__ import annotations

import sympy
import torch

from .._ir import Matmul, loop_vars
from .._ops import HALF_DTYPES
from .._policy import FusionPolicy
from .._scheduler import Kernel
from ._kernel import TritonKernel, _decompose, _function, _next_pow2, _static, _Writer
from ._ops import TRITON, TritonVar, tstore

__all__ = ["render_template", "template_candidates", "template_launch"]


def template_launch(m: int | None, n: int | None, dtype: torch.dtype) -> dict[str, int]:
    """The heuristic's launch for a product with ``m`` rows and ``n`` columns (None: a
    symbolic size) of ``dtype``: 128 x 128 tiles (steps of 64 along ``K`` for half types, 32
    for float32, whose blocks are twice as large), narrower where the product is."""
    half = dtype in HALF_DTYPES
    xblock = min(128, max(16, _next_pow2(m))) if m is not None else 128
    rblock = min(128, max(16, _next_pow2(n))) if n is not None else 128
    kblock = 64 if half else 32
    warps = 4 if xblock * rblock <= 128 * 128 and half else 8
    return {"XBLOCK": xblock, "RBLOCK": rblock, "KBLOCK": kblock, "GROUP_M": 8, "num_warps": warps,
            "num_stages": 3}


# (XBLOCK, RBLOCK, KBLOCK, num_warps, num_stages): tiles measured by max-autotune
_CANDIDATES_HALF = ((128, 128, 64, 4, 3), (128, 128, 64, 8, 4), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3),
                    (64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (64, 64, 64, 4, 4), (128, 128, 32, 4, 4),
                    (64, 256, 32, 4, 4), (32, 64, 64, 2, 5), (64, 32, 64, 2, 5), (16, 64, 128, 2, 4))
_CANDIDATES_FLOAT = ((128, 128, 32, 8, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 32, 4, 4),
                     (128, 128, 16, 8, 4), (256, 64, 32, 8, 3), (64, 256, 32, 8, 3), (32, 64, 32, 2, 5),
                     (64, 32, 32, 2, 5), (16, 64, 64, 2, 4), (128, 32, 32, 4, 4), (32, 128, 32, 4, 4))


def template_candidates(heuristic: dict[str, int], m: int, n: int, dtype: torch.dtype) -> list[dict[str, int]]:
    """The launches max-autotune measures for a product of ``m`` x ``n`` (hinted): the
    heuristic's first, then tiles no wider than the product's next power of two (at least 16)."""
    out = [dict(heuristic)]
    cap_m, cap_n = max(16, _next_pow2(m)), max(16, _next_pow2(n))
    for x, r, k, warps, stages in _CANDIDATES_HALF if dtype in HALF_DTYPES else _CANDIDATES_FLOAT:
        meta = {"XBLOCK": min(x, cap_m), "RBLOCK": min(r, cap_n), "KBLOCK": k, "GROUP_M": 8, "num_warps": warps,
                "num_stages": stages}
        if meta not in out:
            out.append(meta)
    return out


_MAX_KBLOCK = 128  # the widest step along K of the heuristic and of every candidate


def even_k(k: sympy.Expr) -> bool:
    """Whether every launch's step along ``K`` divides ``k`` (a static multiple of the widest
    step), so that the loop's loads need no mask along ``K``: a mask that varies along the
    contiguous dimension keeps triton from vectorizing the loads."""
    static = _static(k)
    return static is not None and static % _MAX_KBLOCK == 0


def tiles(kernel: Kernel) -> tuple[sympy.Expr, sympy.Expr, sympy.Expr]:
    """The template's (batches, rows, columns)."""
    sizes = kernel.stages[0].buffer.sizes
    return (sizes[0] if len(sizes) == 3 else sympy.S.One), sizes[-2], sizes[-1]


def render_template(kernel: Kernel, policy: FusionPolicy, dtypes: dict[str, torch.dtype]) -> TritonKernel:
    """The template ``kernel``'s function (the tile's product, then its epilogue stages) and
    its launch: the heuristic's tiles (``template_launch``), one program per tile."""
    batch, m, n = tiles(kernel)
    dtype = kernel.stages[0].buffer.body.operand_dtype
    writer, body = _body(kernel, policy)
    code, params, checks = _function(kernel, writer, body, ["XBLOCK", "RBLOCK", "KBLOCK", "GROUP_M"], dtypes,
                                     policy)
    meta = template_launch(_static(m), _static(n), dtype)
    return TritonKernel(kernel.name, code, params, meta, "template", batch * m, None, checks, False, (batch, m, n),
                        dtype)


def _body(kernel: Kernel, policy: FusionPolicy) -> tuple[_Writer, list[str]]:
    """The writer (its reads, writes and sizes filled) and the body lines of the template
    ``kernel``."""
    first = kernel.stages[0]
    buffer, product = first.buffer, first.buffer.body
    assert isinstance(product, Matmul)
    batch, m, n = tiles(kernel)
    writer = _Writer(kernel, policy)
    outer_vars = loop_vars("x", len(kernel.outer))
    writer.dims.update({v.name: frozenset({"x"}) for v in outer_vars})
    for v in loop_vars("r", len(first.inner)):
        writer.dims[v.name] = frozenset({"r"})
    (a, sa, oa), (b, sb, ob) = product.a, product.b
    sizes = [batch, m, n, product.k, *sa, *sb, oa, ob]
    for size in sizes:
        writer.symbols |= sympy.sympify(size).free_symbols
    writer.reads |= {a, b}
    extents = [batch * m * product.k, batch * product.k * n, batch * m * n]
    big = any(_static(e) is None or _static(e) >= 2**31 for e in extents) \
        or any(_static(s) is None for s in (*sa, *sb, oa, ob))
    pid = "tl.program_id(0).to(tl.int64)" if big else "tl.program_id(0)"
    batched = batch != 1
    lines = [f"# {buffer.name}: the product of {', '.join(buffer.origins) or 'a matmul'}",
             f"mnumel = {TRITON(m)}", f"rnumel = {TRITON(n)}", f"knumel = {TRITON(product.k)}",
             f"pid = {pid}",
             "tiles_m = (mnumel + XBLOCK - 1) // XBLOCK", "tiles_n = (rnumel + RBLOCK - 1) // RBLOCK"]
    if batched:
        lines += ["bindex = pid // (tiles_m * tiles_n)", "pid = pid % (tiles_m * tiles_n)"]
    lines += ["group = GROUP_M * tiles_n", "first_m = (pid // group) * GROUP_M",
              "group_m = tl.minimum(tiles_m - first_m, GROUP_M)",
              "pid_m = first_m + (pid % group) % group_m", "pid_n = (pid % group) // group_m",
              "mindex = pid_m * XBLOCK + tl.arange(0, XBLOCK)[:, None]",
              "rindex = pid_n * RBLOCK + tl.arange(0, RBLOCK)[None, :]",
              "xmask = mindex < mnumel", "rmask = rindex < rnumel",
              "xindex = bindex * mnumel + mindex" if batched else "xindex = mindex",
              *_decompose(outer_vars, kernel.outer, "xindex"),
              *(f"{v.name} = rindex" for v in loop_vars("r", len(first.inner))),
              "kindex = tl.arange(0, KBLOCK)"]
    at_batch = f"bindex * {TRITON(sa[0])} + " if batched and sa[0] != 0 else ""
    bt_batch = f"bindex * {TRITON(sb[0])} + " if batched and sb[0] != 0 else ""
    lines += [f"a_ptr = {a} + ({TRITON(oa)} + {at_batch}mindex * {TRITON(sa[1])} + kindex[None, :] * {TRITON(sa[2])})",
              f"b_ptr = {b} + ({TRITON(ob)} + {bt_batch}kindex[:, None] * {TRITON(sb[1])} + rindex * {TRITON(sb[2])})",
              "acc = tl.zeros([XBLOCK, RBLOCK], dtype=tl.float32)"]
    if product.operand_dtype in HALF_DTYPES:  # (``_runtime.resolve_half_dot``: tl.dot on a GPU)
        dot = "acc = kiln_half_dot(a_block, b_block, acc)"
    else:
        dot = f"acc = tl.dot(a_block, b_block, acc, input_precision={product.precision!r})"
    if even_k(product.k):  # no mask along K: the loads are vectorized along a contiguous K
        a_mask, b_mask = "xmask", "rmask"
    else:
        a_mask, b_mask = "xmask & (kindex[None, :] < knumel - k)", "(kindex[:, None] < knumel - k) & rmask"
    lines += ["for k in range(0, knumel, KBLOCK):",
              f"    a_block = tl.load(a_ptr, mask={a_mask}, other=0.0)",
              f"    b_block = tl.load(b_ptr, mask={b_mask}, other=0.0)",
              f"    {dot}",
              f"    a_ptr += KBLOCK * {TRITON(sa[2])}",
              f"    b_ptr += KBLOCK * {TRITON(sb[1])}"]
    acc = TritonVar("acc", torch.float32, frozenset({"x", "r"}))
    if first.local:
        writer.locals[buffer.name] = acc  # read by the epilogue alone: never rounded, never stored
    else:
        ops = writer.ops()
        lines.append(writer.store(ops, buffer, first.index, acc))
        if buffer.dtype in HALF_DTYPES:  # the epilogue reads what was stored: the rounded product
            lines.append(f"acc_rounded = {tstore('acc', buffer.dtype)}.to(tl.float32)")
            writer.locals[buffer.name] = TritonVar("acc_rounded", torch.float32, acc.dims, buffer.dtype)
        else:
            writer.locals[buffer.name] = acc
        writer.absorb(ops)
    for stage in kernel.stages[1:]:
        lines += writer.pointwise(stage)
    return writer, lines
