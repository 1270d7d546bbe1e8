"""A lowered graph's outputs (``_graph._Lowering``'s part that makes them): each output is a
buffer read through a view, or a constant; the caller sees eager's strides.

- An output computed only for the output is realized in its traced strides where they are
  dense (eager's layout, a permutation of a contiguous one: ``realize(value, strides)``), else
  contiguously; one only the backward reads (``saved``: ``free_layout``) follows the layout
  of what it reads (channels-last).
- An output read by other nodes is in memory before the output is reached: ``_Lowering.realize``
  gives its value the output's strides then (``eager_values``).
- An output that views a buffer laid out channels-last by the lowering (eager's is NCHW) is
  copied into eager's strides once per buffer and strides (``_eager_copy``); two outputs that
  would share one buffer, one a copy and one the buffer itself, are refused
  (``LayoutConflict``), as eager's outputs share memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy
import torch

from kiln.fxgraph import Node

from ._ir import ComputedBuffer, Pointwise, TensorValue, contiguous_strides, sym
from ._layout import (
    CHANNELS_LAST,
    LayoutConflict,
    dense_layout,
    follow_order,
    ordered_strides,
    static_strides,
)

__all__ = ["GraphOutput", "OutputsMixin"]


@dataclass(slots=True)
class GraphOutput:
    """An output: ``buffer`` read with ``sizes``/``strides``/``offset`` (a view of it), or
    ``constant`` (a number, None, a size expression) when ``buffer`` is None."""

    buffer: str | None
    sizes: tuple[sympy.Expr, ...] = ()
    strides: tuple[sympy.Expr, ...] = ()
    offset: sympy.Expr = sympy.S.Zero
    constant: Any = None
    items: list[GraphOutput] | None = None  # a tuple output (a multi-output op's result, saved whole)


class OutputsMixin:
    """The output methods of ``_graph._Lowering`` (its state: ``layouts``, ``moved``,
    ``by_name``, ``eager_copies``, ``direct_views``; its ``realize`` and ``_add``)."""

    def _output(self, v: Any, env: dict[Node, Any], saved: bool) -> GraphOutput:
        """Output ``v``; ``saved``: one only the backward reads (its layout is free)."""
        value = env[v] if isinstance(v, Node) else v
        if isinstance(value, tuple) and isinstance(v, Node):
            vals = v.meta.get("val")
            return GraphOutput(None, items=[self._output_value(item, val, saved)
                                            for item, val in zip(value, vals, strict=True)])
        return self._output_value(value, v.meta.get("val") if isinstance(v, Node) else None, saved)

    def _output_value(self, value: Any, val: Any, saved: bool) -> GraphOutput:
        if not isinstance(value, TensorValue):
            return GraphOutput(None, constant=sym(value) if isinstance(value, torch.SymInt) else value)

        strides = tuple(sym(s) for s in val.stride()) if isinstance(val, torch.Tensor) else contiguous_strides(value.sizes)
        self.device = str(val.device) if isinstance(val, torch.Tensor) else self._device_of(value)
        if value.view is None:
            order = follow_order(value, self.layouts) if saved else None
            if order is None and self.layouts and value.ndim == 4 and strides == ordered_strides(value.sizes,
                                                                                               CHANNELS_LAST):
                order = CHANNELS_LAST  # eager's layout is channels-last too: computed in that order
            value = self.realize_ordered(value, order) if order is not None else self.realize(value, strides)
        elif value.view[0] in self.moved and not saved:
            if tuple(value.view[1]) != strides:
                value = self._eager_copy(value, strides)
            else:
                self.direct_views.add(value.view[0])
        if saved and tuple(value.view[1]) != strides and not static_strides(value.view[1]):
            # another layout than traced, which the backward could not be told of: the traced
            # one, copied
            value = self._eager_copy(value, strides)
        name, view_strides, offset = value.view
        return GraphOutput(name, value.sizes, tuple(view_strides), offset)

    def _eager_copy(self, value: TensorValue, strides: tuple[sympy.Expr, ...]) -> TensorValue:
        """A copy with eager's (dense) ``strides`` of an output read from a buffer laid out
        channels-last (one per buffer and strides)."""
        name = value.view[0]
        if not dense_layout(value.sizes, strides) or value.view[2] != 0 \
                or sympy.Mul(*value.sizes) != sympy.Mul(*self.by_name[name].sizes):
            raise LayoutConflict(f"an output views part of {name}, laid out channels-last")
        known = self.eager_copies.get((name, strides))
        if known is not None:
            return known
        buffer = self._add(ComputedBuffer(self._new_name("buf"), value.sizes, value.dtype, Pointwise(value.loader),
                                          origins=[f"{name} in eager's layout"]), value)
        if strides != contiguous_strides(value.sizes):
            buffer.layout_strides = strides
        copy = self.eager_copies[(name, strides)] = buffer.value()
        return copy

    def _check_output_copies(self) -> None:
        """Outputs the user sees that view one buffer share its memory, as in eager, unless
        one is a copy in eager's layout (``_eager_copy``) and another the buffer itself: refused."""
        copied = {name for name, _ in self.eager_copies}
        if copied & self.direct_views:
            raise LayoutConflict(f"outputs share {sorted(copied & self.direct_views)[0]}, laid out channels-last")
