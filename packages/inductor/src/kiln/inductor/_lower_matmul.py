"""Lowering rules for matrix products as Triton templates: ``mm``, ``addmm`` and ``bmm``.

Under ``FusionPolicy.matmul_templates`` (max-autotune), a product of Triton tensors (CUDA, or
CPU ones under ``cpu_backend='triton'``) of float32, bfloat16 or float16 becomes a buffer with
a ``Matmul`` body (``_ir``) where the lowering's ``matmul_choice`` says the template is worth
it (on a GPU: measured against the vendor library, ``triton._template_choice``, which credits
the template with the pass over the result an elementwise reader would take after the
library's call); otherwise,
and always without the policy, it stays an ATen call (cuBLAS). ``addmm``'s ``beta * bias +
alpha * product`` is a pointwise value over the product, so it, and what reads it elementwise
(a GELU), fuse into the template's kernel as its epilogue (``_scheduler``).

Without a template, an ``addmm`` of Triton tensors whose every reader is elementwise (through
reshapes; not an output) is an ATen ``mm`` and the bias a pointwise value over it, added in
its readers' kernel (a GELU's, a residual add's), as torch.compile does on a GPU: cuBLAS's
``addmm`` with a bias takes its cuBLASLt path, whose kernel for GPT-2's MLP (float32, 1024 x
256 x 1024 on an H200) measured 27 us against 16 us for the plain product's, and the bias
costs its readers' kernel one load of a vector. Half types round the product before the bias
is added (torch.compile's rounding, not eager's single one).
"""

from __future__ import annotations

from typing import Any

import sympy
import torch

from ._ir import Matmul, TensorValue, sym
from ._lowering import Fallback, LoweringContext, out_dtype, pointwise, register
from ._ops import compute_type

aten = torch.ops.aten

__all__ = ["TEMPLATE_DTYPES", "TEMPLATE_MIN_SIZE"]

TEMPLATE_DTYPES = frozenset({torch.float32, torch.bfloat16, torch.float16})
# a product with a (static) size below this stays an ATen call: a tile of tl.dot is at least 16
# wide, and so small a product is the vendor library's
TEMPLATE_MIN_SIZE = 16


def _window(value: TensorValue, batched: bool) -> tuple[str, tuple[sympy.Expr, ...], sympy.Expr]:
    name, strides, offset = value.view
    strides = tuple(strides)
    return name, strides if batched else (sympy.S.Zero, *strides), offset


def _product(ctx: LoweringContext, node: Any, a: TensorValue, b: TensorValue) -> TensorValue:
    """``a @ b`` (2-D, or 3-D batched) as a template buffer, or ``Fallback``."""
    mode = ctx.policy.matmul_templates
    if mode == "off":
        raise Fallback("matrix products are ATen calls (matmul templates are for max-autotune)")
    if ctx.language != "triton":
        raise Fallback("matmul templates are Triton kernels")
    dtype = out_dtype(node)
    if dtype not in TEMPLATE_DTYPES or a.dtype != dtype or b.dtype != dtype:
        raise Fallback(f"no matmul template for {a.dtype} @ {b.dtype}")
    batched = a.ndim == 3
    sizes = tuple(sym(s) for s in node.meta["val"].shape)
    k = a.sizes[-1]
    for size in (*sizes[-2:], k):
        if sympy.sympify(size).is_Integer and int(size) < TEMPLATE_MIN_SIZE:
            raise Fallback(f"a size {size} below {TEMPLATE_MIN_SIZE}: the vendor library's")
    if batched and (a.sizes[0] != b.sizes[0] or a.sizes[0] != sizes[0]):
        raise Fallback("batched operands of other batch sizes")
    a, b = ctx.realize(a), ctx.realize(b)
    precision = "tf32" if dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32 else "ieee"
    body = Matmul(_window(a, batched), _window(b, batched), k, dtype, precision)
    if not ctx.matmul_choice(body, sizes, dtype, _elementwise_reader(node)):
        raise Fallback("the vendor library's product measured faster than the template")
    return ctx.matmul(sizes, dtype, body)


_RESHAPES = frozenset({aten.view.default, aten._unsafe_view.default, aten.reshape.default})


def _readers(node: Any) -> list[Any]:
    """The nodes reading ``node``, through reshapes (a reshape nothing reads counts as a
    reader itself)."""
    stack, seen, found = list(node.users), set(), []
    while stack:
        user = stack.pop()
        if user in seen:
            continue
        seen.add(user)
        if getattr(user, "target", None) in _RESHAPES and user.users:
            stack.extend(user.users)
        else:
            found.append(user)
    return found


def _pointwise(user: Any) -> bool:
    return getattr(user, "op", None) != "output" and torch.Tag.pointwise in getattr(getattr(user, "target", None),
                                                                                   "tags", ())


def _elementwise_reader(node: Any) -> bool:
    """Whether an elementwise op (ATen's ``pointwise`` tag) reads the product, directly or
    through reshapes: an epilogue the template would fuse, which after the vendor library's
    call is a pass over the result of its own."""
    return any(_pointwise(user) for user in _readers(node))


def _only_elementwise_readers(node: Any) -> bool:
    """Whether every reader of ``node`` is elementwise (ATen's ``pointwise`` tag), directly or
    through reshapes, and none is the graph's output."""
    readers = _readers(node)
    return bool(readers) and all(_pointwise(user) for user in readers)


@register(aten.mm.default, aten.bmm.default)
def _mm(ctx: LoweringContext, node: Any, a: TensorValue, b: TensorValue) -> TensorValue:
    return _product(ctx, node, a, b)


@register(aten.addmm.default)
def _addmm(ctx: LoweringContext, node: Any, bias: Any, a: TensorValue, b: TensorValue, *, beta: Any = 1,
           alpha: Any = 1) -> TensorValue:
    if not isinstance(bias, TensorValue) or type(beta) not in (int, float) or type(alpha) not in (int, float):
        raise Fallback("addmm of a bias or scale known only at run time")
    try:
        product = _product(ctx, node, a, b)
    except Fallback as why:
        if ctx.language != "triton" or alpha != 1 or a.ndim != 2 or not _only_elementwise_readers(node):
            raise
        product = ctx.aten_call(aten.mm.default, node, (a, b), str(why))
    compute = compute_type(product.dtype)

    def fn(ops: Any, p: Any, c: Any) -> Any:
        if alpha != 1:
            p = ops.mul(p, ops.constant(alpha, compute))
        if beta == 0:
            return p  # eager ignores the bias (NaN in it included) when beta is 0
        if beta != 1:
            c = ops.mul(c, ops.constant(beta, compute))
        return ops.add(p, c)

    return pointwise(node, fn, product, bias, dtype=product.dtype)
