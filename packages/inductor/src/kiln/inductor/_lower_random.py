"""Random ops in kernels (``InductorConfig.random_in_kernels``): ``rand``, ``randn``, their
``_like`` forms, ``bernoulli`` with a number ``p``, and ``native_dropout`` (what
``nn.Dropout`` in training becomes in aotgrad's graphs) as values computed where they are
read, fused with their neighbours.

The numbers come from a counter-based generator (Philox4x32-10, in the kernels' headers,
``cpp._ops`` and ``triton._runtime``: the same numbers in C++ and Triton kernels): element ``i`` of the graph's random op number ``k`` is a function of the
call's seed, ``k`` and ``i`` (``ops.random``), nothing else. So an element is the same
whichever thread computes it, in whatever loop order, and however often (a value inlined
into two readers gives both the same numbers; the threads setting changes nothing). The
seed is one int64 per call of the compiled graph, drawn by the wrapper from torch's default
generator (``draw_seed``): ``torch.manual_seed(s)`` before a call makes it reproducible,
successive calls differ, and the generator's state advances. Under CUDA graphs
(``inductor.cudagraphs``) a recorded launch would keep the seed it was recorded with, so
there the Triton kernels load it from device memory (``SeedCell``), which the runner writes
with a new seed before each replay. A graph's random op ``k`` is
its ``k``-th node tagged ``nondeterministic_seeded``; the index of an element is its flat
index in the op's result, row-major over its sizes (not its memory layout).

Training: aotgrad never recomputes a random op in the backward (``_mincut``); it saves what
the forward drew (dropout's mask, a ``rand``'s result), and the backward reads that buffer.

With the config off every rule here raises ``Fallback``: the ops are ATen calls, with eager's
numbers. Arguments eager rejects (a probability outside [0, 1]), an explicit generator, a
``p`` tensor (``bernoulli.Tensor`` checks every element; ``torch.bernoulli(p)`` is
decomposed by torch's table into ``rand_like(p) < p`` before lowering) and ``rand``,
``randn`` or dropout of other dtypes than the floating ones are ATen calls too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ._ir import TensorValue, contiguous_strides, flat_index, sym
from ._lowering import EXPENSIVE, KERNEL_DTYPES, Fallback, LoweringContext, register
from ._ops import compute_type

__all__ = ["SEED_CELL", "SeedCell", "draw_seed", "random_value"]

aten = torch.ops.aten
_FLOAT = frozenset({torch.float32, torch.float64, torch.bfloat16, torch.float16})


def draw_seed() -> int:
    """The seed of one call of a compiled graph: an int64 in [0, 2**63 - 1) drawn from torch's
    default CPU generator (so ``torch.manual_seed`` decides it, and the generator advances)."""
    return int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))


SEED_CELL = "_seed_cell"  # the wrapper's global holding its ``SeedCell`` (the graph's ``seed``)


class SeedCell:
    """A compiled graph's seed in device memory, for Triton kernels recorded into CUDA graphs
    (``_ir.SEED_PTR``): one int64 tensor per device, holding ``value``.

    The wrapper's ``take(device)`` gives the kernels the tensor; unless ``managed``, it first
    draws a new seed (one per call, as the int seed). A CUDA graph runner manages the cell
    (``_cudagraphs``): it calls ``draw()`` before each call, replay or plain, outside any
    capture, so a replay's kernels read that call's seed; ``take`` then draws nothing (inside
    a capture a draw would be recorded once and repeated). A tensor made by ``take`` starts at
    ``value``, the seed drawn last."""

    def __init__(self) -> None:
        self.value = 0
        self.managed = False
        self.tensors: dict[torch.device, torch.Tensor] = {}

    def draw(self) -> None:
        """A new seed, written into every tensor of the cell."""
        self.value = draw_seed()
        for t in self.tensors.values():
            t.fill_(self.value)

    def take(self, device: str) -> torch.Tensor:
        """The seed tensor the kernels on ``device`` read."""
        if not self.managed:
            self.draw()
        where = torch.device(device)
        if where.type == "cuda" and where.index is None:
            where = torch.device("cuda", torch.cuda.current_device())
        t = self.tensors.get(where)
        if t is None:
            t = self.tensors[where] = torch.full((), self.value, dtype=torch.int64, device=where)
        return t


def random_value(sizes: Sequence[sympy.Expr], dtype: torch.dtype, distribution: str, offset: int) -> TensorValue:
    """The value of random op number ``offset`` of a graph: ``sizes`` elements of ``dtype``
    (a floating type), ``"uniform"`` in [0, 1) or ``"normal"`` (mean 0, standard deviation 1)."""
    sizes = tuple(sizes)
    strides = contiguous_strides(sizes)

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        return ops.random(distribution, offset, flat_index(index, strides), dtype)

    return TensorValue(sizes, dtype, loader, None, EXPENSIVE if distribution == "uniform" else 2 * EXPENSIVE)


def _uniform_below(sizes: Sequence[sympy.Expr], p: float, offset: int) -> TensorValue:
    """A bool value: whether each element's uniform number (a multiple of 2**-24 in [0, 1)) is
    below ``p`` (so 0 never, 1 always), compared in float against the least multiple of
    2**-24 not below ``p``: the same as comparing with ``p`` itself, exactly."""
    uniform = random_value(sizes, torch.float32, "uniform", offset)
    load = uniform.loader
    threshold = math.ceil(p * 2**24) / 2**24  # exact: p * 2**24 only moves the exponent

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        return ops.lt(load(index, ops), ops.constant(threshold, torch.float32))

    return TensorValue(uniform.sizes, torch.bool, loader, None, uniform.ops_count + 1)


def _select(ops: Any, flag: Any, dtype: torch.dtype) -> Any:
    """1 or 0 in ``dtype`` (a compute type) for a bool: a select, not a conversion (a loop
    converting bools to floats does not vectorize)."""
    return ops.where(flag, ops.constant(1, dtype), ops.constant(0, dtype))


def _offset(ctx: LoweringContext, node: Any) -> int:
    """``node``'s number among the graph's random ops (ops tagged ``nondeterministic_seeded``),
    or ``Fallback`` when the config keeps random ops out of kernels."""
    if not ctx.policy.random_in_kernels:
        raise Fallback("a random op: an ATen call with eager's numbers (inductor.random_in_kernels is off)")
    if node.kwargs.get("generator") is not None:
        raise Fallback("a random op with a generator of its own")
    if torch.Tag.nondeterministic_seeded not in node.target.tags:  # it would share the next op's number
        raise Fallback(f"{node.target} is not tagged nondeterministic_seeded")
    count = 0
    for other in node.graph.nodes:
        if other is node:
            return count
        tags = getattr(other.target, "tags", ())
        count += torch.Tag.nondeterministic_seeded in tags
    raise AssertionError(f"{node.name} is not in its graph")


def _float_result(node: Any) -> torch.dtype:
    val = node.meta["val"]
    if val.dtype not in _FLOAT or val.layout != torch.strided:
        raise Fallback(f"a random {val.dtype} tensor")
    return val.dtype


def _probability(p: Any) -> float:
    """``p`` as a float in [0, 1], or ``Fallback`` (eager raises for others; a traced number's
    value is known only when the graph runs)."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise Fallback(f"probability {p!r}")
    return float(p)


@register(aten.rand.default, aten.randn.default)
def _rand(ctx: LoweringContext, node: Any, size: Sequence[Any], **kwargs: Any) -> TensorValue:
    offset = _offset(ctx, node)
    distribution = "uniform" if node.target is aten.rand.default else "normal"
    return random_value([sym(s) for s in size], _float_result(node), distribution, offset)


@register(aten.rand_like.default, aten.randn_like.default)
def _rand_like(ctx: LoweringContext, node: Any, x: TensorValue, **kwargs: Any) -> TensorValue:
    offset = _offset(ctx, node)
    distribution = "uniform" if node.target is aten.rand_like.default else "normal"
    return random_value(x.sizes, _float_result(node), distribution, offset)


@register(aten.bernoulli.p)
def _bernoulli(ctx: LoweringContext, node: Any, x: TensorValue, p: Any = 0.5, **kwargs: Any) -> TensorValue:
    """``x.bernoulli(p)``: 1 with probability ``p``, else 0, in ``x``'s dtype."""
    offset = _offset(ctx, node)
    dtype = node.meta["val"].dtype
    if dtype not in KERNEL_DTYPES:
        raise Fallback(f"bernoulli of {dtype}")
    below = _uniform_below(x.sizes, _probability(p), offset)
    load, compute = below.loader, compute_type(dtype)

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        flag = load(index, ops)
        return flag if dtype == torch.bool else _select(ops, flag, compute)

    return TensorValue(x.sizes, dtype, loader, None, below.ops_count + 1)


@register(aten.native_dropout.default)
def _native_dropout(ctx: LoweringContext, node: Any, x: TensorValue, p: Any,
                    train: bool | None = None) -> tuple[TensorValue, TensorValue]:
    """``(x * mask * scale, mask)``, ``mask`` true with probability ``1 - p``, ``scale``
    ``1 / (1 - p)`` (0 for ``p`` 1), multiplied in that order as eager does (a dropped inf
    or NaN gives NaN); not training: ``(x, ones)``. The output reads the mask's numbers, not
    its buffer: both are the same function of the element's index."""
    offset = _offset(ctx, node)
    out_val, mask_val = node.meta["val"]
    if x.dtype not in _FLOAT or out_val.dtype != x.dtype or mask_val.dtype != torch.bool:
        raise Fallback(f"dropout of {x.dtype}")
    p = _probability(p)
    if train is False:
        ones = TensorValue(x.sizes, torch.bool, lambda index, ops: ops.constant(True, torch.bool))
        return TensorValue(x.sizes, x.dtype, x.loader, None, x.ops_count), ones
    mask = _uniform_below(x.sizes, 1.0 - p, offset)
    scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
    load_x, load_mask, compute = x.loader, mask.loader, compute_type(x.dtype)

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        kept = ops.mul(load_x(index, ops), _select(ops, load_mask(index, ops), compute))
        return ops.mul(kept, ops.constant(scale, compute))

    return TensorValue(x.sizes, x.dtype, loader, None, x.ops_count + mask.ops_count + 3), mask
