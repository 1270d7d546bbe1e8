"""In-place writes: a pointwise stage stores into the memory of a buffer that dies at its
kernel, instead of into memory of its own (``ComputedBuffer.storage``).

A stage ``S`` takes buffer ``B`` when (``take_dead_buffers``):
- ``B`` is memory the wrapper allocated for a kernel and may hand on (``_wrapper``'s
  reusable buffers: not an input, not an ATen result, not an output, no ATen call holding a
  view of it), of ``S``'s sizes, strides and dtype; or the result of an ATen call that
  shares no argument's memory (a convolution's, a matrix product's), not an output, no ATen
  call holding a view of it, of ``S``'s dtype and number of elements, both dense (so batch
  norm + ReLU is written over the convolution's result, as torch's Inductor does);
- ``S``'s kernel is the last step that reads ``B``;
- every read of ``B`` in that kernel is of the element ``S`` stores, by ``S`` or by a stage
  before it over the same inner sizes (so in the same outer iteration and, within it,
  before ``S`` overwrites the element), and no stage after ``S`` reads ``B``;
- nothing else in the kernel reads ``S`` (it would read ``B``'s memory under another name).

Softmax, for one: the exponentials are stored once, summed, and divided in place, so the
row is computed and written once and the result takes the exponentials' memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from ._graph import LoweredGraph
from ._ir import Buffer, ComputedBuffer, ExternBuffer, Pointwise, flat_index, loop_vars
from ._layout import dense_layout
from ._mutation import returns_alias
from ._scheduler import Kernel, Stage, extern_reads, output_buffers, reads_of, step_readers

__all__ = ["take_dead_buffers"]


def take_dead_buffers(graph: LoweredGraph, steps: Sequence[Kernel | ExternBuffer], reusable: set[str]) -> set[str]:
    """Mark each stage of ``steps`` that can store into a dead buffer of ``reusable`` (see the
    module docstring); the names of the buffers taken."""
    last = {name: max(at) for name, at in step_readers(steps).items()}
    outputs = output_buffers(graph)
    by_name = {b.name: b for b in graph.buffers}
    results = _fresh_results(steps)
    taken: set[str] = set()
    for k, step in enumerate(steps):
        if not isinstance(step, Kernel):
            continue
        for position, stage in enumerate(step.stages):
            buffer = stage.buffer
            if not isinstance(buffer.body, Pointwise) or stage.local or buffer.into is not None:
                continue
            for name in _candidates(step, stage):
                dead = by_name.get(name)
                if name in taken or name in outputs or last.get(name) != k:
                    continue
                own = name in reusable and isinstance(dead, ComputedBuffer) and _same_layout(dead, buffer)
                aten = name in results and _same_memory(dead, buffer)
                if (own or aten) and _only_here(step, position, name):
                    buffer.storage = name
                    taken.add(name)
                    break
    return taken


def _fresh_results(steps: Sequence[Kernel | ExternBuffer]) -> set[str]:
    """ATen results in memory of their own: of ops whose schema says the result shares no
    argument's memory, starting at their storage, never handed to an ATen call whose result
    may share its memory (a view of it could still be alive)."""
    names = {s.name for s in steps if isinstance(s, ExternBuffer) and not returns_alias(s.node.target, unknown=True)
             and s.storage_offset == 0}
    for step in steps:
        if isinstance(step, ExternBuffer) and returns_alias(step.node.target, unknown=True):
            names -= set(extern_reads(step))
    return names


def _same_memory(a: Buffer, b: ComputedBuffer) -> bool:
    """Whether ``a`` and ``b`` take the same memory (the same dtype and number of elements, both
    dense): an ATen result of other sizes but the same elements (a channels-last convolution's
    result and the NHWC buffer computed from it); ``_only_here`` checks the element order."""
    if a.dtype != b.dtype:
        return False
    if _same_layout(a, b):
        return True
    return dense_layout(a.sizes, a.strides()) and dense_layout(b.sizes, b.strides()) \
        and sympy.Mul(*a.sizes) == sympy.Mul(*b.sizes)


def _candidates(kernel: Kernel, stage: Stage) -> list[str]:
    outer_vars = loop_vars("x", len(kernel.outer))
    return list(dict.fromkeys(r.name for r in reads_of(stage, outer_vars)))


def _same_layout(a: Buffer, b: ComputedBuffer) -> bool:
    return a.dtype == b.dtype and tuple(a.sizes) == tuple(b.sizes) and tuple(a.strides()) == tuple(b.strides())


def _only_here(kernel: Kernel, position: int, name: str) -> bool:
    """Whether the kernel reads ``name`` only at the element its stage ``position`` stores,
    at or before that stage, and reads that stage's buffer nowhere else."""
    outer_vars = loop_vars("x", len(kernel.outer))
    stage = kernel.stages[position]
    store = flat_index(stage.index, stage.buffer.strides())
    for k, other in enumerate(kernel.stages):
        reads = reads_of(other, outer_vars)
        if k != position and any(r.name == stage.buffer.name for r in reads):
            return False
        if not any(r.name == name for r in reads):
            continue
        if k > position or other.inner != stage.inner:
            return False
        if any(r.name == name and sympy.expand(r.index - store) != 0 for r in reads):
            return False
    return True
