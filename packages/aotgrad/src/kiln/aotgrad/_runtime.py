"""The callable that runs compiled forward and backward graphs in place of the original.

``make_runtime`` returns ``call(*inputs) -> tuple`` with the original graph's signature:
- Without a backward graph (no input requires grad, or grad mode off when traced) it runs
  the forward graph under ``no_grad`` (the trace refused outputs that require grad then).
- With one, an ``autograd.Function`` runs the forward graph, keeps what the backward needs
  (tensors through ``save_for_backward``, sizes as numbers) and, in ``backward``, runs the
  backward graph on them and the incoming gradients (made contiguous, as the tangents were
  traced; zeros for an output that got none). A backward with ``boxed_call`` (the default
  compiler's ``GraphModule.boxed_forward``) is handed one list holding the only references
  to the saved tensors (autograd's are released first, unless ``retain_graph``), so each is
  freed after its last use in the backward graph, not when the whole backward returns. A
  boxed forward (``boxed_call``) is handed a new list of the inputs. Outputs that need no gradient are marked
  non-differentiable; double backward raises (``once_differentiable``).
- Inputs the program writes are written by the forward graph itself, where the program
  wrote them (``copy_``); what the backward needs of them was copied before.
- The grad mode the original graph leaves set (its last ``set_grad_enabled``) is set after
  the call; the ATen graphs themselves switch no mode (their ops recorded the effect).
- An output that is a view of an input in eager is returned as a view of that input
  (``as_strided`` with the view's sizes, strides and offset), so writes to one show in the
  other, as in eager.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd.function import once_differentiable

__all__ = ["RuntimeMeta", "make_runtime"]


@dataclass(frozen=True)
class RuntimeMeta:
    num_inputs: int
    num_outputs: int
    output_aliases: tuple[int | None, ...]  # per output: the input it is a view of
    # per output that is a view of an input written by the program: its sizes, strides and
    # storage offset (relative to the input's) from the trace, all ints; else None
    alias_layouts: tuple[tuple | None, ...] = ()
    grad_inputs: tuple[int, ...] = ()
    diff_outputs: tuple[int, ...] = ()
    saved_tensor: tuple[bool, ...] = ()  # per saved value: whether it is a tensor
    final_grad_mode: bool | None = None  # the grad mode the original graph leaves set

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON values (tuples as lists), for a disk cache of compiled graphs."""
        return {f: _lists(getattr(self, f)) for f in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RuntimeMeta:
        """The RuntimeMeta ``to_json`` gave ``data`` for (lists back to tuples); a KeyError or
        TypeError for data of another shape."""
        def layout(v: Any) -> tuple | None:
            return None if v is None else (tuple(v[0]), tuple(v[1]), int(v[2]))

        return cls(int(data["num_inputs"]), int(data["num_outputs"]), tuple(data["output_aliases"]),
                   tuple(layout(v) for v in data["alias_layouts"]), tuple(data["grad_inputs"]),
                   tuple(data["diff_outputs"]), tuple(bool(v) for v in data["saved_tensor"]),
                   data["final_grad_mode"])


def _lists(value: Any) -> Any:
    return [_lists(v) for v in value] if isinstance(value, (tuple, list)) else value


def make_runtime(forward: Callable[..., Any], backward: Callable[..., Any] | None, meta: RuntimeMeta) -> Callable:
    n_out = meta.num_outputs
    aliased = any(a is not None for a in meta.output_aliases)  # once, not per call
    fw_boxed = getattr(forward, "boxed_call", False)
    if backward is None:
        no_grad = torch.no_grad

        def call(*args: Any) -> tuple:
            with no_grad():  # what eager computes here records no gradient either
                outs = forward(list(args)) if fw_boxed else forward(*args)
            return _views_of_inputs(args, outs, meta, aliased)

        return call

    diff = frozenset(meta.diff_outputs)
    boxed = getattr(backward, "boxed_call", False)

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> tuple:
            results = forward(list(args)) if fw_boxed else forward(*args)
            outs = results[:n_out]
            saved = results[n_out:]
            tensors, ctx.numbers = _pack_saved(saved, meta.saved_tensor)
            ctx.save_for_backward(*tensors)
            ctx.tangent_meta = [(outs[i].shape, outs[i].dtype, outs[i].device) for i in meta.diff_outputs]
            fixed = [o for i, o in enumerate(outs) if i not in diff and isinstance(o, torch.Tensor)]
            ctx.mark_non_differentiable(*fixed)
            return tuple(outs)

        @staticmethod
        @once_differentiable
        def backward(ctx: Any, *grads: Any) -> tuple:
            args = _unpack_saved(ctx.saved_tensors, ctx.numbers, meta.saved_tensor)
            for i, (shape, dtype, device) in zip(meta.diff_outputs, ctx.tangent_meta, strict=True):
                g = grads[i]
                args.append(torch.zeros(shape, dtype=dtype, device=device) if g is None else g.contiguous())
            if boxed:
                # the list holds the only references left: the graph frees each saved
                # activation after its last use (ctx's own go now, unless retain_graph)
                ctx.maybe_clear_saved_tensors()
                grads_in = backward(args)
            else:
                grads_in = backward(*args)
            result: list[Any] = [None] * meta.num_inputs
            for i, g in zip(meta.grad_inputs, grads_in, strict=True):
                result[i] = g
            return tuple(result)

    def call(*args: Any) -> tuple:
        return _views_of_inputs(args, CompiledFunction.apply(*args), meta, aliased)

    return call


class _Saved:
    """Where a tensor of a saved tuple was (it went through ``save_for_backward``)."""

    def __repr__(self) -> str:
        return "<saved tensor>"


_SAVED = _Saved()


def _pack_saved(saved: Sequence[Any], is_tensor: Sequence[bool]) -> tuple[list[torch.Tensor], list[Any]]:
    """The forward's saved values as what ``save_for_backward`` takes (every tensor, those in
    a tuple too: autograd frees them once the backward ran, unless ``retain_graph``; a tuple
    kept on ``ctx`` would live as long as the graph, the caller's loss) and the rest, a
    tuple's tensors replaced by ``_SAVED``."""
    tensors, numbers = [], []
    for value, tensor in zip(saved, is_tensor, strict=True):
        if tensor:
            tensors.append(value)
        elif isinstance(value, tuple):
            tensors += [v for v in value if isinstance(v, torch.Tensor)]
            numbers.append(tuple(_SAVED if isinstance(v, torch.Tensor) else v for v in value))
        else:
            numbers.append(value)
    return tensors, numbers


def _unpack_saved(tensors: Sequence[torch.Tensor], numbers: Sequence[Any], is_tensor: Sequence[bool]) -> list[Any]:
    """The saved values back from ``_pack_saved``'s two lists, in the forward's order."""
    tensor_at, number_at = iter(tensors), iter(numbers)
    values = []
    for tensor in is_tensor:
        if tensor:
            values.append(next(tensor_at))
            continue
        value = next(number_at)
        if isinstance(value, tuple):
            value = tuple(next(tensor_at) if v is _SAVED else v for v in value)
        values.append(value)
    return values


def _views_of_inputs(args: tuple, outs: Any, meta: RuntimeMeta, aliased: bool) -> tuple:
    if meta.final_grad_mode is not None:
        torch._C._set_grad_enabled(meta.final_grad_mode)
    if aliased:
        outs = list(outs)
        for k, i in enumerate(meta.output_aliases):
            if i is None or not isinstance(outs[k], torch.Tensor):
                continue
            layout = meta.alias_layouts[k] if meta.alias_layouts else None
            if layout is not None:
                size, stride, offset = layout
                outs[k] = args[i].as_strided(size, stride, args[i].storage_offset() + offset)
            else:
                # not written: the forward graph made it with view ops on the input itself
                o, base = outs[k], args[i]
                if o.dtype != base.dtype:  # view_as_complex, view(dtype): sizes count o's elements
                    try:
                        base = base.view(o.dtype)
                    except RuntimeError:
                        continue  # the graph's own output: the values, if not the aliasing
                outs[k] = base.as_strided(o.size(), o.stride(), o.storage_offset())
    return tuple(outs)
