"""The scheduler: the lowered graph's buffers grouped into kernels, in execution order.

A ``Kernel`` is one loop nest over an ``outer`` range (the sizes of its outer loops, which
run in parallel) holding ``Stage``s run one after the other in each outer iteration: a
pointwise stage loops over its ``inner`` sizes, a reduction stage folds over its reduced
sizes into one value per outer iteration. So softmax (a max, a sum, a division over each
row) is one kernel of three stages, and a chain of pointwise ops that the lowering inlined
is one stage.

A buffer joins the kernel before it when (``_fits``):
- its sizes (size-1 dimensions aside) start with the kernel's outer sizes (a reduction's
  result has exactly them), and
- every element it reads of a buffer of that kernel was written in the same outer
  iteration: the read index equals the writer's index with the same outer variables (and,
  for a pointwise writer with inner loops, the same inner sizes and variables). Outer
  iterations then share nothing, so they can run on different threads.
A buffer that fits neither may join the kernel before the last one, when both are kernels,
it reads nothing the last kernel writes and it writes no graph input (``_join_before``): a
split reduction's partials and results alternate, and so the partial sums over the same rows
share one kernel, their results another.
ATen calls (``ExternBuffer``) are steps of their own and end the kernel before them; a buffer
on another device than the kernel's starts a kernel of its own. A stage
that writes a graph input (``ComputedBuffer.into``) joins a kernel only when the kernel's
stages read that input only where it writes it, in the same outer iteration; later stages
reading the input are placed as readers of what it wrote.

A reduction result read only inside its kernel stays a local variable of the loop
(``Stage.local``): no memory.

A matrix product (``_ir.Matmul``, a Triton template) starts a kernel of its own, its outer
range the result's rows, its inner one the columns; only pointwise stages over the same
columns join it (its epilogue: each program computes a tile of rows and columns, so no stage
may fold a whole row), reading the product only at their own element. The first such stage
may view the rows as several dimensions (a linear layer's ``(batch * tokens, features)``
product read as ``(batch, tokens, features)``): the kernel's outer range becomes those.

A scatter (``_ir.Scatter``) or a scan (``_ir.Scan``) is a kernel of its own: a scatter's
places are known only as it runs (no outer iteration owns an element), and it runs after
the kernel that fills the buffer it writes; a scan is serial along its dimension, its outer
loops over the other dimensions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy

from ._graph import LoweredGraph
from ._ir import (
    ComputedBuffer,
    ExternBuffer,
    Matmul,
    Pointwise,
    Reduction,
    Scan,
    Scatter,
    contiguous_strides,
    flat_index,
    loop_vars,
)
from ._ops import ReadsOps, has_indirect
from ._policy import FusionPolicy

__all__ = ["Kernel", "Stage", "extern_reads", "new_kernel", "output_buffers", "reads_of", "schedule", "serial",
           "step_readers"]


@dataclass(slots=True)
class Stage:
    buffer: ComputedBuffer
    inner: tuple[sympy.Expr, ...]  # pointwise: inner loop sizes; reduction: the reduced sizes
    index: list[sympy.Expr]  # the buffer's index in the kernel's outer (x) and inner (r) variables
    local: bool = False
    reads: list[Any] | None = None  # what its loader reads (computed once: sympy is slow)
    # a pointwise stage that only later stages of its own kernel read (not an output, no
    # other step's read, not an input's update): a code generator may keep it in registers
    private: bool = False


@dataclass(slots=True)
class Kernel:
    name: str
    outer: tuple[sympy.Expr, ...]
    stages: list[Stage] = field(default_factory=list)
    device: str = "cpu"  # its buffers' device (a kernel never mixes two)

    def buffers(self) -> list[str]:
        return [s.buffer.name for s in self.stages]

    @property
    def template(self) -> bool:
        """Whether it is a matrix product's template kernel (its first stage an ``_ir.Matmul``)."""
        return bool(self.stages) and isinstance(self.stages[0].buffer.body, Matmul)


def _non_one(sizes: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    return [s for s in sizes if s != 1]


def _spread(sizes: Sequence[sympy.Expr], variables: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    """The full index of a buffer of ``sizes`` from one variable per non-1 dimension."""
    it = iter(variables)
    return [sympy.S.Zero if s == 1 else next(it) for s in sizes]


def reads_of(stage: Stage, outer_vars: Sequence[sympy.Symbol]) -> list[Any]:
    """What ``stage``'s loader reads (``_ops.Read``s), computed once."""
    if stage.reads is not None:
        return stage.reads
    ops = ReadsOps()
    inner_vars = loop_vars("r", len(stage.inner))
    body = stage.buffer.body
    if isinstance(body, Reduction):
        body.loader(stage.index, list(inner_vars), ops)
    elif isinstance(body, Scatter):
        body.target(stage.index, ops)
        body.loader(stage.index, ops)
    elif isinstance(body, Matmul):
        body.reads(stage.index, ops)
    else:
        body.loader(stage.index, ops)
    stage.reads = ops.reads
    return ops.reads


def _place(buffer: ComputedBuffer, outer: tuple[sympy.Expr, ...]) -> Stage | None:
    """``buffer`` as a stage of a kernel over ``outer``, or None where its sizes do not fit."""
    sizes = _non_one(buffer.sizes)
    k = len(outer)
    outer_vars = loop_vars("x", k)
    if isinstance(buffer.body, Reduction):
        if tuple(sizes) != outer:
            return None
        reduced = tuple(buffer.body.reduced)
        return Stage(buffer, reduced, _spread(buffer.sizes, outer_vars))
    if tuple(sizes[:k]) != outer:
        return None
    inner = tuple(sizes[k:])
    return Stage(buffer, inner, _spread(buffer.sizes, [*outer_vars, *loop_vars("r", len(inner))]))


def serial(buffer: ComputedBuffer) -> bool:
    """Whether ``buffer`` is computed in an order (a scatter, a scan): a kernel of its own."""
    return isinstance(buffer.body, (Scatter, Scan))


def _serial_kernel(buffer: ComputedBuffer, name: str) -> Kernel:
    """A scatter's kernel: no outer loop, its range as inner loops; a scan's: the other
    dimensions as outer loops, the scanned one as its inner loop."""
    sizes = buffer.sizes
    if isinstance(buffer.body, Scatter):
        inner = tuple(_non_one(sizes))
        return Kernel(name, (), [Stage(buffer, inner, _spread(sizes, loop_vars("r", len(inner))))])
    dim = buffer.body.dim
    others = [s for d, s in enumerate(sizes) if d != dim]
    outer_vars = iter(loop_vars("x", len(_non_one(others))))
    index = [loop_vars("r", 1)[0] if d == dim else
             sympy.S.Zero if s == 1 else next(outer_vars) for d, s in enumerate(sizes)]
    return Kernel(name, tuple(_non_one(others)), [Stage(buffer, (sizes[dim],), index)])


def new_kernel(buffer: ComputedBuffer, n: int) -> Kernel:
    """``kernel<n>``, starting with ``buffer`` alone (``_template_choice`` measures a product so)."""
    if serial(buffer):
        kernel = _serial_kernel(buffer, f"kernel{n}")
        kernel.device = buffer.device
        return kernel
    sizes = _non_one(buffer.sizes)
    outer = tuple(sizes) if isinstance(buffer.body, Reduction) else tuple(sizes[:-1])
    kernel = Kernel(f"kernel{n}", outer, device=buffer.device)
    stage = _place(buffer, outer)
    kernel.stages.append(stage)
    return kernel


def _fits(kernel: Kernel, stage: Stage, written: dict[str, Stage]) -> bool:
    outer_vars = loop_vars("x", len(kernel.outer))
    for read in reads_of(stage, outer_vars):
        writer = written.get(read.name)
        if writer is None:
            continue
        if not isinstance(writer.buffer.body, Reduction) and writer.inner != stage.inner:
            return False
        if sympy.expand(read.index - _store(writer)) != 0:
            return False
    target = stage.buffer.into
    if target is not None and any(has_indirect(read.index) for other in kernel.stages
                                  for read in reads_of(other, outer_vars)):
        return False  # an index the kernel checks may be out of range: eager raises before the write
    if target is not None:
        # it writes an input: the kernel's stages may read the input only where this stage
        # writes it in the same outer iteration (other iterations may run on other threads)
        store = _store(stage)
        for other in kernel.stages:
            if any(read.name == target and (other.inner != stage.inner or sympy.expand(read.index - store) != 0)
                   for read in reads_of(other, outer_vars)):
                return False
    return True


def _store(stage: Stage) -> sympy.Expr:
    return flat_index(stage.index, stage.buffer.strides())


def _written(stage: Stage) -> dict[str, Stage]:
    """The names a stage writes: its buffer's, and the input it writes (``into``)."""
    names = {stage.buffer.name: stage}
    if stage.buffer.into is not None:
        names[stage.buffer.into] = stage
    return names


def schedule(graph: LoweredGraph, policy: FusionPolicy | None = None) -> list[Kernel | ExternBuffer]:
    """The steps that compute ``graph``'s buffers: kernels and ATen calls, in order."""
    policy = policy or FusionPolicy()
    steps: list[Kernel | ExternBuffer] = []
    written: dict[str, Stage] = {}  # buffers of the last kernel
    for buffer in graph.buffers:
        if isinstance(buffer, ExternBuffer):
            steps.append(buffer)
            written = {}
            continue
        if not isinstance(buffer, ComputedBuffer):
            continue
        last = steps[-1] if steps else None
        if policy.fuse and _joinable(last, buffer):
            stage = _place(buffer, last.outer)
            if stage is None and last.template:
                stage = _reshape_template(last, buffer, written)
            if stage is not None and _fits(last, stage, written):
                last.stages.append(stage)
                written.update(_written(stage))
                continue
            if _join_before(steps, buffer):
                continue
        kernel = new_kernel(buffer, sum(isinstance(s, Kernel) for s in steps))
        steps.append(kernel)
        written = _written(kernel.stages[0])
    _mark_locals(steps, graph)
    return steps


def _joinable(kernel: Kernel | ExternBuffer | None, buffer: ComputedBuffer) -> bool:
    if not isinstance(kernel, Kernel) or kernel.device != buffer.device or serial(buffer) \
            or serial(kernel.stages[0].buffer) or isinstance(buffer.body, Matmul):
        return False
    # a template's tiles hold part of each row: only elementwise stages over its columns
    return not kernel.template or (isinstance(buffer.body, Pointwise) and buffer.into is None
                                   and _non_one(buffer.sizes)[-1:] == list(kernel.stages[0].inner))


def _reshape_template(kernel: Kernel, buffer: ComputedBuffer, written: dict[str, Stage]) -> Stage | None:
    """``buffer`` as the first epilogue stage of the template ``kernel`` (only its product
    so far, not batched) when its sizes split the product's rows into several dimensions
    (``(B, T, N)`` for rows ``B * T``): the kernel's outer range becomes ``(B, T)`` and the
    product's row the flat index over them; None (the kernel unchanged) otherwise."""
    first = kernel.stages[0]
    sizes = _non_one(buffer.sizes)
    if len(kernel.stages) != 1 or len(kernel.outer) != 1 or len(_non_one(first.buffer.sizes)) != 2 \
            or len(sizes) < 3 or sympy.expand(sympy.Mul(*sizes[:-1]) - kernel.outer[0]) != 0:
        return None
    outer = tuple(sizes[:-1])
    row = flat_index(loop_vars("x", len(outer)), contiguous_strides(outer))
    index = [sympy.S.Zero if s == 1 else row for s in first.buffer.sizes[:-1]] + [first.index[-1]]
    product = Stage(first.buffer, first.inner, index)
    reshaped = Kernel(kernel.name, outer, [product], kernel.device)
    stage = _place(buffer, outer)
    if stage is None or not _fits(reshaped, stage, {first.buffer.name: product}):
        return None
    kernel.outer, kernel.stages[0] = outer, product
    written[first.buffer.name] = product
    return stage


def _join_before(steps: list[Kernel | ExternBuffer], buffer: ComputedBuffer) -> bool:
    """Whether ``buffer`` joined the kernel before the last step (both kernels), as its last
    stage: where it reads nothing the last kernel writes and writes no graph input (so the
    last kernel reads nothing it writes). A split reduction's partials and results alternate
    ([partials 1, results 1, partials 2, results 2]); this puts the partials of sums over the
    same rows (a norm's weight and bias gradients) in one kernel, and so their results."""
    if len(steps) < 2 or buffer.into is not None or not isinstance(steps[-1], Kernel) \
            or not _joinable(steps[-2], buffer) or steps[-2].template:
        return False
    kernel = steps[-2]
    stage = _place(buffer, kernel.outer)
    if stage is None:
        return False
    later = {name for s in steps[-1].stages for name in _written(s)}
    if any(read.name in later for read in reads_of(stage, loop_vars("x", len(kernel.outer)))):
        return False
    written = {name: s for other in kernel.stages for name, s in _written(other).items()}
    if not _fits(kernel, stage, written):
        return False
    kernel.stages.append(stage)
    return True


def _mark_locals(steps: list[Kernel | ExternBuffer], graph: LoweredGraph) -> None:
    """Reduction results (and a template's product) read only by later stages of their own
    kernel stay in registers; pointwise stages read so are marked ``private``."""
    readers = step_readers(steps)
    outputs = output_buffers(graph)
    for k, step in enumerate(steps):
        if not isinstance(step, Kernel):
            continue
        for stage in step.stages:
            name = stage.buffer.name
            if name in outputs or not readers.get(name, set()) <= {k}:
                continue
            if isinstance(stage.buffer.body, (Reduction, Matmul)):
                stage.local = True
            elif isinstance(stage.buffer.body, Pointwise) and stage.buffer.into is None:
                stage.private = True


def step_readers(steps: Sequence[Kernel | ExternBuffer]) -> dict[str, set[int]]:
    """For each buffer, the steps that read it or write it as an input mutation (the last
    one ends its life)."""
    readers: dict[str, set[int]] = {}
    for k, step in enumerate(steps):
        if isinstance(step, Kernel):
            names = [read.name for stage in step.stages for read in reads_of(stage, loop_vars("x", len(step.outer)))]
            names += [stage.buffer.into for stage in step.stages if stage.buffer.into is not None]
        else:
            names = extern_reads(step)
        for name in names:
            readers.setdefault(name, set()).add(k)
    return readers


def output_buffers(graph: LoweredGraph) -> set[str]:
    names: set[str] = set()
    stack = list(graph.outputs)
    while stack:
        out = stack.pop()
        if out.items is not None:
            stack.extend(out.items)
        elif out.buffer is not None:
            names.add(out.buffer)
    return names


def extern_reads(buffer: ExternBuffer) -> list[str]:
    names: list[str] = []

    def visit(value: Any) -> None:
        view = getattr(value, "view", None)
        if view is not None:
            names.append(view[0])
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)

    visit(buffer.node.meta["inductor_args"])
    return names
