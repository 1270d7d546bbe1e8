"""The loop-level IR: buffers defined by index functions over sympy loop variables.

A value in a lowered graph is a ``TensorValue``: its sizes (sympy expressions over the
graph's size symbols), its dtype, and a ``loader``: ``loader(index, ops) -> handle`` computes
the element at ``index`` (one sympy expression per dimension) through an ops handler
(``_ops.py``: one that writes C++, one that records what is read). A loader never touches
memory itself; it asks ``ops.load(buffer_name, flat_index)``. So pointwise ops compose
loaders, views remap the index, and nothing is computed until a buffer is realized.

Buffers (what exists in memory at run time):
- ``InputBuffer``: a graph input, with the sizes and strides it was traced with.
- ``ComputedBuffer``: written by a kernel; its ``body`` is a ``Pointwise`` (one element per
  index) or a ``Reduction`` (one element per index, folding ``reduction_type`` over a
  reduced range). Stored contiguously, unless it is a graph output (eager's layout) or an
  input mutation (``into``: the kernel writes the input's memory, with its strides).
  A ``Scatter`` body writes another buffer (``into``) at computed places instead of its own
  elements, and a ``Scan`` body folds along one dimension, storing every partial result. A
  ``Matmul`` body is a matrix product of two buffers in memory (a Triton template kernel).
- ``ExternBuffer``: the result of an ATen call in the wrapper (matrix products,
  convolutions, and every op without a lowering); its layout is the traced one (the wrapper
  copies into it when the call returns another).

Invariants: sizes are sympy expressions; a loader reads only through ``ops.load`` of a
buffer's name with a flat element offset; a ``ComputedBuffer`` is contiguous.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

__all__ = ["SCALAR_OPS", "SEED", "SEED_PTR", "Buffer", "ComputedBuffer", "ExternBuffer", "InputBuffer", "Loader",
           "Matmul", "Pointwise", "Reduction", "RuntimeScalar", "Scan", "Scatter", "SizeScalar", "TensorValue",
           "contiguous_strides", "flat_index", "loop_vars", "sym"]

Loader = Callable[[Sequence[sympy.Expr], Any], Any]

# The graph call's random seed (``ops.random``, ``_lower_random``): an int64 argument of the
# kernels computing random ops, drawn by the wrapper from torch's default generator per call.
SEED = sympy.Symbol("kiln_seed", integer=True)
# Under CUDA graphs the Triton kernels read the seed from device memory instead (a recorded
# launch keeps its arguments: ``_lower_random.SeedCell``): this pointer parameter, loaded
# into ``kiln_seed`` at the kernel's start.
SEED_PTR = "kiln_seed_ptr"


def sym(value: Any) -> sympy.Expr:
    """An int, a torch SymInt (kiln's) or a sympy expression, as sympy (a SymInt simplified
    by its ShapeEnv)."""
    if isinstance(value, sympy.Basic):
        return value
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, torch.SymInt):
        node = value.node
        expr = getattr(node, "expr", None)
        if expr is not None:
            # with every fact the guards established: a size guarded equal to 1 (or to
            # another size) is that, which decides broadcasting and views
            env = getattr(node, "env", None)
            return env.simplify(expr) if env is not None else expr
    raise TypeError(f"not a size: {value!r} ({type(value).__name__})")


def loop_vars(prefix: str, n: int) -> tuple[sympy.Symbol, ...]:
    """``n`` loop variables (``x0, x1, ...``): nonnegative integers."""
    return tuple(sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True) for i in range(n))


def contiguous_strides(sizes: Sequence[sympy.Expr]) -> tuple[sympy.Expr, ...]:
    strides, step = [], sympy.Integer(1)
    for size in reversed(sizes):
        strides.append(step)
        step = step * size
    return tuple(reversed(strides))


def flat_index(index: Sequence[sympy.Expr], strides: Sequence[sympy.Expr], offset: sympy.Expr = sympy.S.Zero) -> sympy.Expr:
    """The memory offset ``offset + sum(index * strides)``, expanded."""
    return _flat_index(tuple(index), tuple(strides), offset)


@functools.lru_cache(maxsize=8192)
def _flat_index(index: tuple[sympy.Expr, ...], strides: tuple[sympy.Expr, ...], offset: sympy.Expr) -> sympy.Expr:
    # cached: each load of a kernel is built again by every pass that runs its loader (the
    # scheduler's reads, each code generator), and a model's repeated layers load alike (a
    # 12-layer GPT-2's training step: 4814 calls, 51 distinct)
    terms = [i * s for i, s in zip(index, strides, strict=True)]
    if all(_monomial(e) for e in (offset, *index, *strides)):
        # a sum of products of symbols and numbers is its own expansion: sympy's expand walks
        # it again (about 1 ms each, most of this function's time in a block's compile)
        return sympy.Add(offset, *terms)
    return sympy.expand(offset + sum(terms, sympy.Integer(0)))


def _monomial(e: sympy.Expr) -> bool:
    """Whether ``e`` is a symbol, a number, or a product of those."""
    return e.is_Atom or (e.is_Mul and all(a.is_Atom for a in e.args))


@dataclass(slots=True, eq=False)
class Buffer:
    name: str
    sizes: tuple[sympy.Expr, ...]
    dtype: torch.dtype
    device: str = field(default="cpu", kw_only=True)  # where its memory is (``str(torch.device)``): which code generator computes it

    def strides(self) -> tuple[sympy.Expr, ...]:
        return contiguous_strides(self.sizes)

    def offset(self) -> sympy.Expr:
        return sympy.S.Zero

    def value(self) -> TensorValue:
        """The buffer's elements as a value: a strided read of its memory."""
        return TensorValue.strided(self.name, self.sizes, self.strides(), self.offset(), self.dtype)


@dataclass(slots=True, eq=False)
class InputBuffer(Buffer):
    """A graph input. Kernels get its ``data_ptr()``, which already points at element
    ``storage_offset`` of its storage: reads are relative to it (``offset()`` is 0), and
    ``storage_offset`` only serves ``as_strided``, whose offsets count from the storage."""

    stride: tuple[sympy.Expr, ...] = ()
    storage_offset: sympy.Expr = sympy.S.Zero
    storage_size: sympy.Expr | None = None  # elements of its storage (None: unknown)

    def strides(self) -> tuple[sympy.Expr, ...]:
        return self.stride


@dataclass(slots=True)
class Pointwise:
    loader: Loader


@dataclass(slots=True)
class Reduction:
    """``reduction_type`` folded over ``reduced`` (sizes); ``loader(index, rindex, ops)``
    gives the element for an output index and a reduced index. Types: ``sum``, ``prod``,
    ``max``, ``min`` (NaN-propagating), ``argmax``, ``argmin`` (first index of the extreme,
    NaN counts as the extreme), ``any``, ``all``.

    ``online``: for a ``sum`` only, ``(kind, name)`` saying that this sum and the reduction
    buffer ``name`` over the same range may be computed in one pass over it (a code generator
    looping over the range may; computing them one after the other is as right):
    ``("softmax", M)``: every element summed is ``exp(v - M)``, ``M`` a ``max`` (read nowhere
    else in it): a softmax's denominator, folded with the max (online softmax: partial sums
    rescaled by ``exp(old max - new max)`` as the max grows). ``("welford", S)``: every element
    summed is ``(v - S / n)**2``, ``S`` the ``sum`` of the same ``v`` and ``n`` the range's
    element count (a variance's squared deviations, with Welford's algorithm)."""

    reduction_type: str
    reduced: tuple[sympy.Expr, ...]
    loader: Callable[[Sequence[sympy.Expr], Sequence[sympy.Expr], Any], Any]
    src_dtype: torch.dtype
    online: tuple[str, str] | None = None


@dataclass(slots=True)
class Scatter:
    """For every index of the buffer's sizes (the iteration range), in order: the element of
    ``into`` (the buffer written, with ``strides``) at ``target(index, ops)`` (one coordinate
    per dimension of it, loaded indices among them) becomes ``loader(index, ops)``
    (``mode`` None), or that combined with what is there (``mode``: ``sum``, ``prod``, ``max``,
    ``min``; NaN-propagating). Later elements win where two indices meet, as in eager's
    serial loops. The buffer itself holds nothing: it names the step."""

    loader: Loader
    target: Callable[[Sequence[sympy.Expr], Any], Sequence[sympy.Expr]]
    strides: tuple[sympy.Expr, ...]
    mode: str | None = None


@dataclass(slots=True)
class Scan:
    """An inclusive scan along ``dim``: element ``i`` is ``loader`` at ``i`` folded
    (``scan_type``: ``sum``, ``prod``) with every element before it along ``dim``, in order,
    accumulated in ``acc_dtype`` and stored at each step."""

    scan_type: str
    dim: int
    loader: Loader
    acc_dtype: torch.dtype


# the reduced index of a matrix product's operands (``Matmul.reads``)
MATMUL_K = sympy.Symbol("kk", integer=True, nonnegative=True)


@dataclass(slots=True)
class Matmul:
    """A matrix product: element ``[m, n]`` of a buffer of sizes ``(M, N)`` (``[b, m, n]`` of
    ``(B, M, N)``) is the sum over ``k < K`` of ``a[b, m, k] * b[b, k, n]``, accumulated in
    float32 and rounded once to the buffer's dtype. ``a`` and ``b`` are windows of buffers in
    memory, ``(name, strides, offset)``, their strides over (batch, rows, columns): a batch
    stride is 0 for an operand shared by every batch. ``precision``: ``tl.dot``'s
    ``input_precision`` for float32 operands (``"ieee"``: full float32 products, as torch's
    default; ``"tf32"`` where torch allows TF32). A Triton template's kernel (``triton._template``):
    tiles of the result, each a loop over ``K`` of ``tl.dot``; the pointwise stages that read
    the result only at their own ``[m, n]`` join it as its epilogue (``_scheduler``)."""

    a: tuple[str, tuple[sympy.Expr, ...], sympy.Expr]
    b: tuple[str, tuple[sympy.Expr, ...], sympy.Expr]
    k: sympy.Expr
    operand_dtype: torch.dtype
    precision: str = "ieee"

    def reads(self, index: Sequence[sympy.Expr], ops: Any) -> None:
        """Record the operands' loads for element ``index`` (of the buffer's sizes), over the
        reduced index ``MATMUL_K``."""
        *batch, m, n = index
        b = batch[0] if batch else sympy.S.Zero
        (a_name, sa, oa), (b_name, sb, ob) = self.a, self.b
        ops.load(a_name, flat_index((b, m, MATMUL_K), sa, oa), self.operand_dtype)
        ops.load(b_name, flat_index((b, MATMUL_K, n), sb, ob), self.operand_dtype)


@dataclass(slots=True, eq=False)
class ComputedBuffer(Buffer):
    body: Pointwise | Reduction | Scatter | Scan | Matmul | None = None
    origins: list[str] = field(default_factory=list)  # the ATen nodes it computes, for comments
    layout_strides: tuple[sympy.Expr, ...] | None = None  # a graph output's eager layout; else contiguous
    # the buffer whose memory it writes, laid out as it is: a graph input (an input mutation,
    # with a Pointwise body) or the buffer a Scatter body writes
    into: str | None = None
    # the buffer whose memory it takes, that buffer dying at its kernel (``_inplace``)
    storage: str | None = None

    def strides(self) -> tuple[sympy.Expr, ...]:
        return self.layout_strides if self.layout_strides is not None else contiguous_strides(self.sizes)


@dataclass(slots=True, eq=False)
class ExternBuffer(Buffer):
    """One output of an ATen call the wrapper makes (``call`` is the node; ``item`` which
    output of a tuple-returning op, or None)."""

    stride: tuple[sympy.Expr, ...] = ()
    storage_offset: sympy.Expr = sympy.S.Zero
    storage_size: sympy.Expr | None = None  # elements of its storage (None: unknown)
    node: Any = None
    item: int | None = None

    def strides(self) -> tuple[sympy.Expr, ...]:
        return self.stride


@dataclass(frozen=True, slots=True)
class RuntimeScalar:
    """A number known only when the graph runs: a float or bool graph input (a number kiln
    made dynamic), the wrapper's argument ``name``. ATen calls take it by that name; no
    lowering rule computes with it (the node is an ATen call)."""

    name: str


@dataclass(frozen=True, slots=True)
class SizeScalar:
    """A number Python computes from sizes and numbers when the graph runs: ``operator``'s
    ``op`` (one of ``SCALAR_OPS``) of ``args`` (ints, floats, size expressions, other such
    numbers), a float or bool the trace could not make a constant (``s1 / 3``; a variance's
    gradient, ``2.0 / (s0 - 1.0)``). The wrapper writes it where it is used; as for a
    ``RuntimeScalar``, no lowering rule computes with it."""

    op: str
    args: tuple[Any, ...]


# the Python operations a ``SizeScalar`` is made of, each as a format of its operands
SCALAR_OPS = {
    "add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "truediv": "({} / {})", "floordiv": "({} // {})",
    "mod": "({} % {})", "pow": "({} ** {})", "neg": "(-{})", "eq": "({} == {})", "ne": "({} != {})",
    "lt": "({} < {})", "le": "({} <= {})", "gt": "({} > {})", "ge": "({} >= {})", "sym_float": "float({})",
}


@dataclass(slots=True, eq=False)
class TensorValue:
    """A lazy tensor of the lowering: sizes, dtype, and how to compute an element. ``view``
    is ``(buffer name, strides, offset)`` when the value is exactly a strided window of a
    buffer's memory (then the wrapper can hand it out without copying); ``ops_count`` is
    about how much work one element costs (realization heuristics)."""

    sizes: tuple[sympy.Expr, ...]
    dtype: torch.dtype
    loader: Loader
    view: tuple[str, tuple[sympy.Expr, ...], sympy.Expr] | None = None
    ops_count: int = 0

    @staticmethod
    def strided(name: str, sizes: Sequence[sympy.Expr], strides: Sequence[sympy.Expr], offset: sympy.Expr,
                dtype: torch.dtype) -> TensorValue:
        strides, offset = tuple(strides), offset

        def load(index: Sequence[sympy.Expr], ops: Any) -> Any:
            return ops.load(name, flat_index(index, strides, offset), dtype)

        return TensorValue(tuple(sizes), dtype, load, (name, strides, offset), 0)

    @property
    def ndim(self) -> int:
        return len(self.sizes)
