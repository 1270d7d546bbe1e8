"""Lowering rules for scans: ``cumsum`` and ``cumprod``.

A scan is a buffer of its own (``_ir.Scan``): each element is the fold of the elements up to
it along the dimension, computed in order. As eager on CPU, the input is first converted to
the result's dtype, the fold accumulates in the wider type (double for float32, float for the
half types, int64 for integers) and each partial result is rounded to the result's dtype as
it is stored, so the results are eager's bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ._ir import TensorValue
from ._lower_indexing import wrap_dim
from ._lowering import KERNEL_DTYPES, Fallback, LoweringContext, out_dtype, register
from ._ops import HALF_DTYPES, compute_type

aten = torch.ops.aten

__all__: list[str] = []


def accumulator(dtype: torch.dtype) -> torch.dtype:
    """What eager's CPU scans of ``dtype`` accumulate in."""
    if dtype in (torch.float32, torch.float64):
        return torch.float64
    if dtype in HALF_DTYPES:
        return torch.float32
    return torch.int64


@register(aten.cumsum.default, aten.cumprod.default)
def _cumulative(ctx: LoweringContext, node: Any, x: TensorValue, dim: int, *,
                dtype: torch.dtype | None = None) -> TensorValue:
    result = out_dtype(node)
    if result not in KERNEL_DTYPES or result == torch.bool:
        raise Fallback(f"a scan giving {result}")
    kind = "sum" if node.target is aten.cumsum.default else "prod"
    compute = compute_type(result)
    load = x.loader

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        value = load(index, ops)
        if x.dtype != result:  # eager converts the input to the result's dtype first
            value = ops.to_dtype(value, result)
        return ops.to_dtype(value, compute)

    if x.ndim == 0:  # the element itself
        return TensorValue((), result, loader, None, x.ops_count + 1)
    dim = wrap_dim(dim, x.ndim)
    return ctx.scan(x.sizes, result, kind, dim, loader, accumulator(result))
