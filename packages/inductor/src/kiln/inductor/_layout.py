"""Layout optimization: 2-D convolutions run channels-last, and so do the values between them.

On CPU, ATen's convolutions (oneDNN) are several times faster on channels-last tensors
(NHWC in memory) than in eager's NCHW layout, forward and backward. The lowering
(``_graph``) asks this module three things:

- which ATen calls run channels-last (``channels_last_call``): the convolutions of
  ``LAYOUT_OPS`` whose tensors pass ``FusionPolicy``'s rule (``conv_refusal``): 4-D input
  and weight, a dtype of ``channels_last_dtypes``, CPU, static sizes, not transposed, at
  least ``channels_last_min_channels`` input or output channels; its pooling ops when their
  input is channels-last already. Their listed arguments are realized channels-last, and
  their listed results are channels-last buffers;
- in which order a value's dimensions are laid out when the lowering may choose it
  (``follow_order``): a value read elementwise from a buffer whose layout this pass chose
  takes that buffer's order (so the BatchNorm/ReLU/add kernels between convolutions loop
  over NHWC, reading and writing unit-stride), every other value keeps today's contiguous
  layout;
- the strides of a layout (``ordered_strides``).

A buffer laid out in ``order`` (its dimensions from the outermost in memory) is a
contiguous buffer of the permuted sizes, read through a permuted view; the loop-level IR
needs no other notion of layout, and the scheduler loops over it in memory order.

Invariants (``_graph`` keeps them): a graph output the user sees has the traced (eager's)
strides: one returned from a buffer laid out here is copied into them. Outputs the forward
hands to the backward keep the chosen layout: the output node's ``meta["free_layout"]``
(set by kiln.aotgrad) lists the outputs only the backward reads, through ops that do not
read storage by strides; the compiled forward reports the strides it returned
(``changed_strides``, ``CompiledGraph.output_strides``) and aotgrad gives the backward's
placeholders those strides. Nothing reads the storage of a buffer laid out here by eager's
strides: an ``as_strided`` of it, an ATen call that may return a view of it, or a graph
output viewing part of it raise ``LayoutConflict``, and the graph is lowered again with the
optimization off.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch

from ._ir import TensorValue, loop_vars
from ._ops import ReadsOps
from ._policy import FusionPolicy

__all__ = ["CHANNELS_LAST", "LAYOUT_OPS", "LayoutConflict", "OpLayout", "changed_strides", "channels_last_call",
           "conv_refusal", "dense_layout", "follow_order", "integer_strides", "ordered_strides",
           "static_strides"]

aten = torch.ops.aten

CHANNELS_LAST = (0, 2, 3, 1)  # N, H, W, C: the memory order of a channels-last 4-D tensor


@dataclass(frozen=True, slots=True)
class OpLayout:
    """An ATen op run channels-last: the positions of the arguments it is given channels-last,
    the items of its result that come back channels-last (None: a single tensor), the
    position of its data input, and a convolution's of its weight, ``transposed`` flag and
    ``groups``. ``follows``: it runs channels-last only when its data input is already
    (pooling: its own cost barely depends on the layout, a copy around it would)."""

    inputs: tuple[int, ...]
    outputs: tuple[int | None, ...]
    data: int
    weight: int | None = None
    transposed: int | None = None
    groups: int | None = None
    follows: bool = False


# measured on this machine's oneDNN (1 thread, float32, 16x3..64x32x32): forward 1.1-7x faster
# channels-last, backward 1.1-5x; the results come back channels-last, the weight's gradient too.
# The weight is given channels-last as well: 3-35% faster forward (3 input channels: the most),
# 2% backward, for a copy of a few microseconds. Pooling of a channels-last input is faster
# channels-last too (max 2x2: 40x, its backward 25x, average 70x, adaptive average 3.5x:
# ATen's NCHW kernels of a channels-last tensor), and returns channels-last results
LAYOUT_OPS: dict[Any, OpLayout] = {
    aten.convolution.default: OpLayout((0, 1), (None,), data=0, weight=1, transposed=6, groups=8),
    aten.convolution_backward.default: OpLayout((0, 1, 2), (0, 1), data=1, weight=2, transposed=7, groups=9),
    aten.max_pool2d_with_indices.default: OpLayout((0,), (0, 1), data=0, follows=True),
    aten.max_pool2d_with_indices_backward.default: OpLayout((0, 1, 7), (None,), data=1, follows=True),
    aten.avg_pool2d.default: OpLayout((0,), (None,), data=0, follows=True),
    aten.avg_pool2d_backward.default: OpLayout((0, 1), (None,), data=1, follows=True),
    aten._adaptive_avg_pool2d.default: OpLayout((0,), (None,), data=0, follows=True),
    aten._adaptive_avg_pool2d_backward.default: OpLayout((0, 1), (None,), data=1, follows=True),
}


class LayoutConflict(Exception):
    """A buffer whose layout this pass chose would be read by eager's strides (``as_strided``,
    an aliasing ATen call, an output viewing part of it): the graph is lowered again without
    layout optimization."""


def conv_refusal(node: Any, policy: FusionPolicy) -> str | None:
    """Why the ATen call ``node`` (an op of ``LAYOUT_OPS``) stays in eager's layout, or None
    when it may run channels-last (the rule in the module docstring; a pooling op only when
    its input is channels-last already, which the caller knows)."""
    if not policy.layout_optimization:
        return "layout optimization is off"
    spec = LAYOUT_OPS[node.target]
    data = _arg_val(node, spec.data)
    weight = _arg_val(node, spec.weight) if spec.weight is not None else data
    if not isinstance(data, torch.Tensor) or not isinstance(weight, torch.Tensor):
        return "no traced input or weight"
    if data.ndim != 4 or weight.ndim != 4:
        return f"a {data.ndim - 2}-D convolution"
    if data.device.type != "cpu" or weight.device.type != "cpu":
        return "not on the CPU"
    if str(data.dtype).removeprefix("torch.") not in policy.channels_last_dtypes:
        return f"dtype {data.dtype}"
    if not all(type(s) is int for t in (data, weight) for s in (*t.shape, *t.stride())):
        return "symbolic sizes"
    if spec.weight is None:
        return None
    if _arg(node, spec.transposed) is not False:
        return "a transposed convolution"
    groups = _arg(node, spec.groups)
    if type(groups) is not int:
        return "no traced groups"
    channels = max(weight.shape[0], weight.shape[1] * groups)
    if channels < policy.channels_last_min_channels:
        return f"{channels} channels (fewer than {policy.channels_last_min_channels})"
    return None


def channels_last_call(node: Any, policy: FusionPolicy, channels_last: Callable[[Any], bool]) -> OpLayout | None:
    """The layout of the ATen call ``node`` when it runs channels-last, else None;
    ``channels_last(arg)``: whether the lowering holds argument ``arg`` channels-last (a
    ``follows`` op needs its data input so)."""
    spec = LAYOUT_OPS.get(getattr(node, "target", None))
    if spec is None or conv_refusal(node, policy) is not None:
        return None
    if spec.follows and not channels_last(_arg(node, spec.data)):
        return None
    return spec


def _arg(node: Any, k: int) -> Any:
    return node.args[k] if k < len(node.args) else None


def _arg_val(node: Any, k: int) -> Any:
    arg = _arg(node, k)
    return arg.meta.get("val") if hasattr(arg, "meta") else None


def ordered_strides(sizes: Sequence[sympy.Expr], order: Sequence[int]) -> tuple[sympy.Expr, ...]:
    """The strides of a dense tensor of ``sizes`` whose dimensions lie in memory in ``order``
    (the outermost first): ``(0, 2, 3, 1)`` gives torch's channels-last strides."""
    strides: list[sympy.Expr] = [sympy.S.Zero] * len(sizes)
    step = sympy.Integer(1)
    for d in reversed(order):
        strides[d] = step
        step = step * sizes[d]
    return tuple(strides)


def dense_layout(sizes: Sequence[sympy.Expr], strides: Sequence[sympy.Expr]) -> bool:
    """Whether (sizes, strides) is a permutation of a contiguous layout: taken from the
    innermost, each dimension's stride is the product of the sizes inside it. Symbolic
    strides count where they are exactly such products (``(s1*s2, 1, s1)`` for sizes
    ``(s0, s1, s2)``), as the traced strides of a pointwise op over permuted inputs are."""
    dims = [(sympy.sympify(st), sympy.sympify(sz)) for sz, st in zip(sizes, strides, strict=True) if sz != 1]
    expected: sympy.Expr = sympy.S.One
    while dims:
        at = next((i for i, (st, _) in enumerate(dims) if st == expected), None)
        if at is None:
            at = next((i for i, (st, _) in enumerate(dims) if sympy.expand(st - expected) == 0), None)
        if at is None:
            return False
        _, size = dims.pop(at)
        expected = expected * size
    return True


def follow_order(value: TensorValue, layouts: dict[str, tuple[int, ...]]) -> tuple[int, ...] | None:
    """The memory order for ``value`` when it reads a buffer of ``layouts`` (buffers laid out
    by this pass, with their order) elementwise: its dimensions ordered by the stride each has
    in that read, the largest first; None when it reads none that way, or when that order is
    the contiguous one."""
    if not layouts or value.ndim < 2:
        return None
    index = loop_vars("x", value.ndim)
    reads = ReadsOps()
    value.loader(list(index), reads)
    for read in reads.reads:
        if read.name not in layouts:
            continue
        flat = sympy.expand(read.index)
        steps = [flat.coeff(v) for v in index]
        varying = [d for d in range(value.ndim) if value.sizes[d] != 1]
        if not all(isinstance(steps[d], sympy.Integer) and steps[d] > 0 for d in varying) \
                or len({steps[d] for d in varying}) != len(varying):
            continue  # not read elementwise (broadcast, gathered or symbolic): no order to follow
        order = tuple(sorted(range(value.ndim), key=lambda d: (-steps[d] if d in varying else -float("inf"), d)))
        return None if order == tuple(range(value.ndim)) else order
    return None


def integer_strides(val: Any) -> bool:
    """Whether a traced value's strides (every item's, for a tuple) are plain integers: where
    ``changed_strides`` can report another layout to the backward. A saved value whose traced
    strides are symbolic keeps them (``_graph``: laid out contiguously instead, the backward
    read it transposed, a wrong gradient of ``sigmoid(x).cumprod(-1)`` with ``x`` transposed
    and dynamic sizes)."""
    if isinstance(val, (tuple, list)):
        return all(integer_strides(v) for v in val)
    return not isinstance(val, torch.Tensor) or all(type(s) is int for s in val.stride())


def static_strides(strides: Any) -> bool:
    """Whether lowered strides are all integers: only such a layout other than the traced one
    can be reported to the backward (``changed_strides``); a saved output laid out with
    symbolic ones is copied to the traced layout instead (``_graph_outputs``)."""
    return all(isinstance(s, sympy.Integer) for s in strides)


def changed_strides(gm: Any, graph: Any) -> tuple[Any, ...]:
    """Per output of ``graph`` (``gm`` lowered): the strides it is returned with where they
    are not the traced ones (outputs of ``meta["free_layout"]`` laid out here), per item for a
    tuple, else None; symbolic strides are not reported."""
    def changed(out: Any, val: Any) -> Any:
        if out.items is not None and isinstance(val, (tuple, list)):
            items = tuple(changed(o, v) for o, v in zip(out.items, val, strict=True))
            return items if any(i is not None for i in items) else None
        if out.buffer is None or not isinstance(val, torch.Tensor) or not integer_strides(val) \
                or not static_strides(out.strides):
            return None
        strides = tuple(int(s) for s in out.strides)
        return strides if strides != tuple(val.stride()) else None

    return tuple(changed(out, arg.meta.get("val") if hasattr(arg, "meta") else None)
                 for arg, out in zip(gm.graph.output_node.args[0], graph.outputs, strict=True))
