"""One scheduled ``Kernel`` as a ``@triton.jit`` function, with how to launch it.

Two shapes of kernel:

- **flat**: every stage pointwise over the same inner sizes (a chain of elementwise ops, an
  in-place update): one 1-D block of ``XBLOCK`` elements per program over all of them
  (outer and inner sizes together), each loop variable recovered from the flat index.
- **rows**: a program owns ``XBLOCK`` outer iterations (the rows of a softmax, a norm); each
  stage computes its inner range for them, as ``[XBLOCK, RBLOCK]`` blocks. When every
  stage's inner range is a known size of at most ``FusionPolicy.triton_persistent_max``
  elements the kernel is **persistent**: one block holds a whole row (``RBLOCK`` its next
  power of two), so what stages share of a row is loaded once and kept in registers, and a
  reduction is one ``tl.sum``/``tl.reduce``. Otherwise each stage **loops** over its range
  in blocks of ``RBLOCK``, a reduction folding into a block-wide accumulator reduced at the
  end. A reduction's result read only by later stages stays in registers (``Stage.local``).
  So does a pointwise value only this kernel reads (``Stage.private``) where every read of it
  took the value just computed, as a persistent softmax's exponentials: the kernel is
  rendered again without its store (``render_kernel``), and the wrapper allocates nothing
  for it (``TritonKernel.registers``).
- **rows read across**: a row kernel whose loads step by one element from row to row and by
  more along a row (a sum over a tensor's leading dimensions: each row a column, ``_columns``)
  takes many rows per program (``COLUMN_XBLOCK``), so that neighbouring lanes read
  neighbouring elements, persistent only for short rows (``COLUMN_PERSISTENT_MAX``),
  otherwise looping in short steps (``_columns_launch``); ``_lower_split`` splits such sums
  by rows so that there are enough programs.

Reductions: NaN-propagating ``max``/``min`` (``kiln_maximum`` in the module's header),
``argmax``/``argmin`` as (value, index) pairs keeping the first index of the extreme (NaN
counting as the extreme), ``any``/``all`` over int8. Sums accumulate in the buffer's
compute type (float32 for half types), as eager's CUDA kernels do.

The function is ``<name>(<buffers>, <size symbols>, XBLOCK, [RBLOCK])``; ``TritonKernel``
carries the launch: how many programs (an expression over the size symbols), and the
block sizes and warps chosen from the sizes (``_flat_launch``, ``_rows_launch``), or with
``max_autotune`` measured among candidates (``_autotune``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from kiln.symshapes import FloorDiv

from .._ir import (
    SEED,
    SEED_PTR,
    ComputedBuffer,
    Pointwise,
    Reduction,
    Scan,
    Scatter,
    flat_index,
    loop_vars,
)
from .._ops import HALF_DTYPES, compute_type
from .._policy import FusionPolicy
from .._scheduler import Kernel, Stage, reads_of
from ._online import online_softmax, welford
from ._ops import COMPILE_OPTIONS, TL_TYPES, TRITON, TritonOps, TritonVar, tstore
from ._scan import scan_lines
from ._scatter import scatter_lines

__all__ = ["TritonKernel", "render_kernel"]


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    kind: str  # "in", "out" (a tensor), "size" (an integer)
    dtype: torch.dtype | None = None


@dataclass(slots=True)
class TritonKernel:
    """A rendered kernel and its launch: ``shape`` ``"flat"``, ``"persistent"`` or
    ``"looped"`` (the module docstring); ``xnumel``: what its programs share (the elements
    of a flat kernel, the rows of a row kernel: an expression over the size symbols);
    ``width``: a persistent kernel's widest row (its ``RBLOCK`` is at least that);
    ``meta``: the launch configuration (``XBLOCK``, ``RBLOCK``, ``num_warps``, maybe
    ``num_stages``): the sizes' heuristic (``_flat_launch``, ``_rows_launch``), or what
    ``max_autotune`` measured fastest (``_autotune``)."""

    name: str
    code: str
    params: list[Param] = field(default_factory=list)
    meta: dict[str, int] = field(default_factory=dict)
    shape: str = "flat"
    xnumel: sympy.Expr = sympy.S.One
    width: int | None = None
    checks: bool = False  # it checks loaded indices (a device-side assert)
    columns: bool = False  # a row kernel whose loads are contiguous across rows, strided along one (``_columns``)
    # a template's or a tiled kernel's (batches, rows, columns): one program per tile
    tiles: tuple[sympy.Expr, sympy.Expr, sympy.Expr] | None = None
    dot_dtype: torch.dtype | None = None  # a template's operands' dtype
    registers: frozenset[str] = frozenset()  # private stages it never stores (their values stay in registers)

    def launch_meta(self, meta: dict[str, int] | None = None) -> dict[str, Any]:
        """What a launch with ``meta`` (default: its own) passes triton: the launch
        configuration and the compile options (``_ops.COMPILE_OPTIONS``)."""
        return {**(self.meta if meta is None else meta), **COMPILE_OPTIONS}

    @property
    def programs(self) -> sympy.Expr:
        """How many programs to launch (over the size symbols), for ``meta``."""
        return self.programs_for(self.meta)

    def programs_for(self, meta: dict[str, int]) -> sympy.Expr:
        """How many programs a launch with ``meta`` takes: one per ``XBLOCK`` rows or
        elements; a template's, one per tile of ``XBLOCK`` rows and ``RBLOCK`` columns."""
        if self.tiles is not None:
            batch, m, n = self.tiles
            return batch * FloorDiv(m + meta["XBLOCK"] - 1, meta["XBLOCK"]) \
                * FloorDiv(n + meta["RBLOCK"] - 1, meta["RBLOCK"])
        block = meta["XBLOCK"]
        return FloorDiv(self.xnumel + block - 1, block)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _static(expr: sympy.Expr) -> int | None:
    expr = sympy.sympify(expr)
    return int(expr) if expr.is_Integer else None


def _describe(buffer: ComputedBuffer) -> str:
    body = buffer.body
    kind = body.reduction_type if isinstance(body, Reduction) else "pointwise"
    origins = ", ".join(buffer.origins)
    return f"{kind} of {origins}" if origins else kind


def _decompose(variables: tuple[sympy.Symbol, ...], sizes: tuple[sympy.Expr, ...], flat: str) -> list[str]:
    """Lines binding each of ``variables`` (row-major over ``sizes``) from the flat index ``flat``."""
    lines = []
    for k, v in enumerate(variables):
        stride = sympy.Mul(*sizes[k + 1:])
        part = flat if stride == 1 else f"({flat} // {TRITON(stride)})"
        lines.append(f"{v.name} = {part}" if k == 0 else f"{v.name} = {part} % {TRITON(sizes[k])}")
    return lines


TILE_MIN = 16  # the shortest dimension a tiled kernel's tile spans (``_tile_axis``)
TILE = 64  # a tiled kernel's tile: TILE x TILE elements, 4 warps (``_tiled_launch``)


def _tile_axis(variables: tuple[sympy.Symbol, ...], sizes: tuple[sympy.Expr, ...],
               indices: list[sympy.Expr]) -> int | None:
    """Where a flat kernel should be **tiled**: the position of the variable along which its
    strided accesses are contiguous. A flat block runs along its innermost variable (the last
    one not of size 1); an access stepping further than one element as that variable grows
    (a transpose's load or store) reads one element of each 32-byte sector. When such
    accesses step by one along another variable, a 2-D tile of both lets each access run
    along its own contiguous direction (triton exchanges the values through shared memory).
    The variable most such accesses are contiguous along, when it and the innermost variable
    are known sizes of at least ``TILE_MIN``; None: the flat kernel is coalesced as it is."""
    moving = [k for k, size in enumerate(sizes) if size != 1]
    if not moving or (_static(sizes[moving[-1]]) or 0) < TILE_MIN:
        return None
    inner = variables[moving[-1]]
    votes: dict[int, int] = {}
    for index in indices:
        step = _step(index, inner)
        if step is None or abs(step) <= 1:
            continue
        for k in moving[:-1]:
            if _step(index, variables[k]) == 1 and (_static(sizes[k]) or 0) >= TILE_MIN:
                votes[k] = votes.get(k, 0) + 1
                break
    return max(votes, key=lambda k: votes[k]) if votes else None


def _tiled_body(kernel: Kernel, policy: FusionPolicy, pid: str, variables: tuple[sympy.Symbol, ...],
                sizes: tuple[sympy.Expr, ...], axis: int, elide: frozenset[str]) -> tuple[_Writer, list[str]]:
    """A tiled kernel's writer and body: each program computes a tile of ``XBLOCK`` rows (the
    other variables, row-major) by ``RBLOCK`` columns (variable ``axis``), one program per
    tile, consecutive programs along the columns."""
    writer = _Writer(kernel, policy, elide)
    others = tuple(v for k, v in enumerate(variables) if k != axis)
    other_sizes = tuple(size for k, size in enumerate(sizes) if k != axis)
    writer.dims.update({v.name: frozenset({"x"}) for v in others})
    writer.dims[variables[axis].name] = frozenset({"r"})
    writer.extents.update({v.name: size for v, size in zip(variables, sizes, strict=True)})
    body = [f"xnumel = {TRITON(sympy.Mul(*other_sizes))}", f"rnumel = {TRITON(sizes[axis])}",
            f"pid = {pid}", "tiles_r = (rnumel + RBLOCK - 1) // RBLOCK",
            "xindex = (pid // tiles_r) * XBLOCK + tl.arange(0, XBLOCK)[:, None]",
            "rindex = (pid % tiles_r) * RBLOCK + tl.arange(0, RBLOCK)[None, :]",
            "xmask = xindex < xnumel", "rmask = rindex < rnumel",
            *_decompose(others, other_sizes, "xindex"), f"{variables[axis].name} = rindex"]
    for stage in kernel.stages:
        body += writer.pointwise(stage)
    return writer, body


def _tiled_launch(rows: sympy.Expr, columns: sympy.Expr) -> dict[str, int]:
    """A tiled kernel's launch: ``TILE`` x ``TILE`` tiles, narrower where a side is shorter."""
    def side(n: sympy.Expr) -> int:
        size = _static(n)
        return TILE if size is None else max(TILE_MIN, min(TILE, _next_pow2(size)))

    return {"XBLOCK": side(rows), "RBLOCK": side(columns), "num_warps": 4}


# identity of each reduction (masked lanes), by kind
def _identity(kind: str, dtype: torch.dtype) -> str:
    if kind in ("sum", "any"):
        return "0"
    if kind in ("prod", "all"):
        return "1"
    low = kind in ("max", "argmax")
    if dtype.is_floating_point:
        return "float('-inf')" if low else "float('inf')"
    if dtype == torch.bool:
        return "0" if low else "1"
    info = torch.iinfo(dtype)
    return str(info.min if low else info.max)


class _Writer:
    def __init__(self, kernel: Kernel, policy: FusionPolicy, elide: frozenset[str] = frozenset()) -> None:
        self.kernel = kernel
        self.policy = policy
        self.lines: list[str] = []
        self.reads: set[str] = set()
        self.writes: dict[str, torch.dtype] = {}
        self.symbols: set[sympy.Symbol] = set()
        self.locals: dict[str, TritonVar] = {}
        self.counter = [0]
        self.cse: dict[str, TritonVar] = {}
        self.dims: dict[str, frozenset[str]] = {}
        self.extents: dict[str, sympy.Expr] = {}  # each loop variable's extent (``TritonOps.extents``)
        self.ones = "[1, 1]"
        self.stored: set[str] = set()  # buffers stored so far
        self.loaded: set[str] = set()  # buffers loaded by the stages so far
        self.reloaded: set[str] = set()  # buffers loaded from memory after a stage stored them
        self.elide = elide  # private stages whose store is left out (``render_kernel``)
        self.indices: list[sympy.Expr] = []  # the element index of every load
        self.stores: list[sympy.Expr] = []  # the element index of every store
        self.evict: dict[str, str] | None = None  # the cache hints of the loop being rendered (``_evictions``)

    def ops(self) -> TritonOps:
        return TritonOps(self.dims, self.ones, locals=self.locals, stored=self.stored, evict=self.evict,
                         extents=self.extents, _cse=self.cse, _counter=self.counter)

    def absorb(self, ops: TritonOps) -> list[str]:
        self.reads |= ops.reads
        self.reloaded |= ops.hazards
        self.symbols |= ops.symbols
        self.indices += ops.indices
        return ops.lines

    def barrier(self, ops: TritonOps, target: str | None) -> list[str]:
        """A barrier for a stage that reads from memory what an earlier stage stored (the
        element may be another thread's), or stores over what an earlier stage loaded; the
        stage's loads are then recorded."""
        needed = bool(ops.hazards) or (target is not None and target in self.loaded)
        self.loaded |= ops.loaded
        return ["tl.debug_barrier()"] if needed else []

    def store(self, ops: TritonOps, buffer: ComputedBuffer, index: list[sympy.Expr], value: TritonVar) -> str:
        target = buffer.into or buffer.storage or buffer.name
        self.writes[target] = buffer.dtype
        store = flat_index(index, buffer.strides())
        self.stores.append(store)
        self.symbols |= {s for s in store.free_symbols if s.name not in self.dims}
        dims = ops.index_dims(store)
        mask = ops.mask(dims | {"x"})
        # a block of pointers (one element: every lane of the row block stores the same value)
        at = TRITON(store) if dims else f"{TRITON(store)} + 0 * xindex"
        line = f"tl.store({target} + ({at}), {tstore(value.name, buffer.dtype)}, {mask})"
        if buffer.dtype not in HALF_DTYPES or value.half == buffer.dtype:  # (a half value: rounded already)
            ops.forward(target, store, buffer.dtype, value)
        ops.stored.add(target)
        return line

    def pointwise(self, stage: Stage) -> list[str]:
        ops = self.ops()
        buffer = stage.buffer
        # a half value rounded in its register (what a load of its store gives, bit for bit):
        # later reads in the block take it, so that it too may stay in registers
        value = ops.to_dtype(buffer.body.loader(stage.index, ops), buffer.dtype)
        target = buffer.into or buffer.storage or buffer.name
        if buffer.name in self.elide:
            # every later read of it is this value (``render_kernel`` checked): no store
            barrier = self.barrier(ops, None)
            ops.forward(target, flat_index(stage.index, buffer.strides()), buffer.dtype, value)
            return [f"# {buffer.name}: {_describe(buffer)}, kept in registers", *barrier, *self.absorb(ops)]
        barrier = self.barrier(ops, target)
        line = self.store(ops, buffer, stage.index, value)
        return [f"# {buffer.name}: {_describe(buffer)}", *barrier, *self.absorb(ops), line]

    def reduction(self, stage: Stage, rindex: str, looped: bool) -> tuple[list[str], list[str], list[str]]:
        """A reduction stage: (lines before its loop, lines of the loop body or block, lines
        after); its result stored or kept (``local``)."""
        buffer, body = stage.buffer, stage.buffer.body
        kind = body.reduction_type
        arg = kind in ("argmax", "argmin")
        ops = self.ops()
        value = body.loader(stage.index, list(loop_vars("r", len(stage.inner))), ops)
        if arg:
            vtype = compute_type(body.src_dtype)
        else:
            vtype = compute_type(buffer.dtype)
        small = vtype == torch.bool
        acc_type = "tl.int8" if small else TL_TYPES[vtype]
        value = ops.to_dtype(value, vtype)
        ident = _identity(kind, vtype)
        name = buffer.name
        masked = f"tl.where(xmask & rmask, {value.name}, {ident})"
        if small:
            masked = f"{masked}.to(tl.int8)"
        before: list[str] = []
        barrier = self.barrier(ops, None if stage.local else buffer.into or buffer.storage or name)
        body_lines = [f"# {name}: {_describe(buffer)}", *barrier, *self.absorb(ops)]
        after: list[str] = []
        block = "[XBLOCK, RBLOCK]"
        if arg:
            combine = f"kiln_{kind}"
            index = f"tl.broadcast_to({rindex}, {block})"
            if looped:
                before += [f"acc_{name} = tl.full({block}, {ident}, {acc_type})",
                           f"acc_{name}_index = tl.zeros({block}, tl.int64)"]
                body_lines += [f"acc_{name}, acc_{name}_index = {combine}(acc_{name}, acc_{name}_index, {masked}, "
                               f"{index}.to(tl.int64))"]
                after += [f"_, val_{name} = kiln_reduce((acc_{name}, acc_{name}_index), 1, {combine})"]
            else:
                body_lines += [f"_, val_{name} = kiln_reduce(({masked}, {index}.to(tl.int64)), 1, {combine})"]
            result = f"val_{name}[:, None]"
            result_type = torch.int64
        else:
            reduce, step = _REDUCE[(kind, "float" if vtype.is_floating_point else "bool" if small else "int")]
            if looped:
                before += [f"acc_{name} = tl.full({block}, {ident}, {acc_type})"]
                body_lines += [f"acc_{name} = {step.format(a=f'acc_{name}', b=masked)}"]
                source = f"acc_{name}"
            else:
                source = masked
            after += [f"val_{name} = {reduce.format(a=source)}"]
            result = f"(val_{name} != 0)[:, None]" if small else f"val_{name}[:, None]"
            result_type = vtype
        after += [f"val_{name} = {result}"]
        if not looped:
            body_lines, after = body_lines + after, []
        out = TritonVar(f"val_{name}", result_type, frozenset({"x"}))
        if stage.local:
            self.locals[name] = out
            return before, body_lines, after
        store = self.store(ops, buffer, stage.index, out)
        if looped:
            after.append(store)
        else:
            body_lines.append(store)
        return before, body_lines, after


# (kind, value kind) -> (reduce over axis 1 of {a}, fold {b} into the accumulator {a})
_REDUCE: dict[tuple[str, str], tuple[str, str]] = {
    ("sum", "float"): ("tl.sum({a}, 1)", "{a} + {b}"),
    ("sum", "int"): ("tl.sum({a}, 1)", "{a} + {b}"),
    ("prod", "float"): ("kiln_reduce({a}, 1, kiln_mul)", "{a} * {b}"),
    ("prod", "int"): ("kiln_reduce({a}, 1, kiln_mul)", "{a} * {b}"),
    ("max", "float"): ("kiln_reduce({a}, 1, kiln_maximum)", "kiln_maximum({a}, {b})"),
    ("min", "float"): ("kiln_reduce({a}, 1, kiln_minimum)", "kiln_minimum({a}, {b})"),
    ("max", "int"): ("tl.max({a}, 1)", "tl.maximum({a}, {b})"),
    ("min", "int"): ("tl.min({a}, 1)", "tl.minimum({a}, {b})"),
    ("max", "bool"): ("tl.max({a}, 1)", "tl.maximum({a}, {b})"),
    ("min", "bool"): ("tl.min({a}, 1)", "tl.minimum({a}, {b})"),
    ("any", "bool"): ("tl.max({a}, 1)", "tl.maximum({a}, {b})"),
    ("all", "bool"): ("tl.min({a}, 1)", "tl.minimum({a}, {b})"),
}


def _indent(lines: list[str], depth: int = 1) -> list[str]:
    pad = "    " * depth
    return [pad + line for line in lines]


def _groups(stages: list[Stage]) -> list[list[Stage]]:
    """Consecutive pointwise stages over the same inner sizes together; reductions alone."""
    groups: list[list[Stage]] = []
    for stage in stages:
        last = groups[-1][-1] if groups else None
        if isinstance(stage.buffer.body, Pointwise) and last is not None \
                and isinstance(last.buffer.body, Pointwise) and last.inner == stage.inner:
            groups[-1].append(stage)
        else:
            groups.append([stage])
    return groups


def render_kernel(kernel: Kernel, policy: FusionPolicy, dtypes: dict[str, torch.dtype]) -> TritonKernel:
    """The Triton function computing ``kernel`` (see the module docstring); ``dtypes``: every
    buffer's dtype, by name. A private stage (``Stage.private``: no other step and no output
    reads it) whose every read in the kernel took the value it just computed (a load of the
    element it stored, in the same block: none was loaded from memory after its store) is
    rendered again without its store."""
    if kernel.template:
        from ._template import render_template  # (it builds on this module)

        return render_template(kernel, policy, dtypes)
    launch, writer, axis = _render(kernel, policy, dtypes, frozenset(), _UNDECIDED)
    elide = frozenset(s.buffer.name for s in kernel.stages
                      if s.private and (s.buffer.storage or s.buffer.name) not in writer.reloaded)
    if not elide:
        return launch
    launch, writer, _ = _render(kernel, policy, dtypes, elide, axis)  # the same shape, fewer stores
    launch.registers = elide
    return launch


_UNDECIDED = -1  # ``_render``'s ``axis`` when a flat kernel's tiling is still to be decided


def _render(kernel: Kernel, policy: FusionPolicy, dtypes: dict[str, torch.dtype],
            elide: frozenset[str], axis: int | None) -> tuple[TritonKernel, _Writer, int | None]:
    """The kernel, its writer and the variable a flat kernel is tiled along (None: not
    tiled); ``axis``: that variable, or ``_UNDECIDED`` to decide it from the flat kernel's
    accesses (``_tile_axis``)."""
    outer_vars = loop_vars("x", len(kernel.outer))
    inner_sets = {s.inner for s in kernel.stages}
    scatter = any(isinstance(s.buffer.body, Scatter) for s in kernel.stages)  # alone in its kernel
    flat = scatter or (all(isinstance(s.buffer.body, Pointwise) for s in kernel.stages) and len(inner_sets) == 1)
    sizes_all = [*kernel.outer, *(size for s in kernel.stages for size in s.inner)]
    big = any(_static(s) is None for s in sizes_all) or _static(sympy.Mul(*kernel.outer) * max(
        (sympy.Mul(*s.inner) for s in kernel.stages), key=lambda e: _static(e) or 0)) >= 2**31
    pid = "tl.program_id(0).to(tl.int64)" if big else "tl.program_id(0)"
    body: list[str] = []
    tiles = None
    if flat:
        inner = kernel.stages[0].inner
        variables = (*outer_vars, *loop_vars("r", len(inner)))
        sizes = (*kernel.outer, *inner)
        total = sympy.Mul(*sizes)
        width, columns = None, False
        if axis == _UNDECIDED or axis is None:
            writer = _Writer(kernel, policy, elide)
            writer.ones = "[1]"
            writer.dims.update({v.name: frozenset({"x"}) for v in variables})
            writer.extents.update({v.name: size for v, size in zip(variables, sizes, strict=True)})
            body += [f"xnumel = {TRITON(total)}", f"xindex = {pid} * XBLOCK + tl.arange(0, XBLOCK)",
                     "xmask = xindex < xnumel", *_decompose(variables, sizes, "xindex")]
            for stage in kernel.stages:
                body += scatter_lines(writer, stage) if scatter else writer.pointwise(stage)
            meta, shape, xnumel = _flat_launch(total), "flat", total
            if axis == _UNDECIDED:
                axis = None if scatter else _tile_axis(variables, sizes, writer.indices + writer.stores)
        if axis is not None:
            writer, body = _tiled_body(kernel, policy, pid, variables, sizes, axis, elide)
            rows = total / sizes[axis]
            tiles = (sympy.S.One, rows, sizes[axis])
            meta, shape, xnumel = _tiled_launch(rows, sizes[axis]), "tiled", rows
        writer.symbols |= total.free_symbols
    else:
        axis = None
        xnumel = sympy.Mul(*kernel.outer)
        widest = [_static(sympy.Mul(*s.inner)) for s in kernel.stages]
        scans = any(isinstance(s.buffer.body, Scan) for s in kernel.stages)
        limit = policy.triton_scan_persistent_max if scans else policy.triton_persistent_max
        persistent = all(w is not None for w in widest) and max(widest) <= limit
        writer, body = _rows_body(kernel, policy, pid, persistent, elide)
        columns = not scans and _columns(writer.indices, outer_vars, kernel.outer)
        if columns and persistent and max(widest) > COLUMN_PERSISTENT_MAX:
            # a block of COLUMN_XBLOCK rows' lanes by a whole row would not fit: loop over it
            persistent = False
            writer, body = _rows_body(kernel, policy, pid, persistent, elide)
        width = max(w or 0 for w in widest) if persistent else None
        itemsize = max((dtypes[n].itemsize for n in writer.reads | set(writer.writes) if n in dtypes), default=4)
        meta = _columns_launch(xnumel, width) if columns else _rows_launch(xnumel, width, persistent, itemsize)
        shape = "persistent" if persistent else "looped"
        writer.symbols |= xnumel.free_symbols
        for s in kernel.stages:
            for size in s.inner:
                writer.symbols |= sympy.sympify(size).free_symbols
    constexprs = ["XBLOCK"] + ([] if shape == "flat" else ["RBLOCK"])
    code, params, checks = _function(kernel, writer, body, constexprs, dtypes, policy)
    return TritonKernel(kernel.name, code, params, meta, shape, xnumel, width, checks, columns, tiles), writer, axis


def _function(kernel: Kernel, writer: _Writer, body: list[str], constexprs: list[str],
              dtypes: dict[str, torch.dtype], policy: FusionPolicy) -> tuple[str, list[Param], bool]:
    """The ``@triton.jit`` function of ``body``: its source, its parameters (the buffers it
    writes, then those it reads, then its size symbols; under ``policy.seeds_in_memory`` the
    seed's pointer in the seed's place), and whether it checks indices."""
    for size in kernel.outer:
        writer.symbols |= sympy.sympify(size).free_symbols
    loop_names = {v for v in writer.symbols if v.name in writer.dims}
    symbols = sorted(writer.symbols - loop_names, key=lambda v: v.name)
    params = [Param(n, "out", d) for n, d in sorted(writer.writes.items())]
    params += [Param(n, "in", dtypes[n]) for n in sorted(writer.reads - set(writer.writes))]
    params += [Param(v.name, "size") for v in symbols]
    if policy.seeds_in_memory and SEED in symbols:  # the seed read from memory (``_lower_random.SeedCell``)
        params = [Param(SEED_PTR, "in", torch.int64) if p.name == SEED.name else p for p in params]
        body = [f"{SEED.name} = tl.load({SEED_PTR})", *body]
    signature = ", ".join([*(p.name for p in params), *(f"{c}: tl.constexpr" for c in constexprs)])
    options = []
    checks = any("kiln_index_check" in line for line in body)
    if checks:
        options.append("debug=True")
    if any(p.name == SEED.name for p in params):  # a new seed per call: not a specialization per value
        options.append(f"do_not_specialize=[{SEED.name!r}]")
    decorator = f"@triton.jit({', '.join(options)})" if options else "@triton.jit"
    code = "\n".join([decorator, f"def {kernel.name}({signature}):", *_indent(body)])
    return code, params, checks


def _rows_body(kernel: Kernel, policy: FusionPolicy, pid: str, persistent: bool,
               elide: frozenset[str] = frozenset()) -> tuple[_Writer, list[str]]:
    """A row kernel's writer and the lines of its body, ``persistent`` or looped."""
    writer = _Writer(kernel, policy, elide)
    outer_vars = loop_vars("x", len(kernel.outer))
    xnumel = sympy.Mul(*kernel.outer)
    writer.dims.update({v.name: frozenset({"x"}) for v in outer_vars})
    writer.extents.update({v.name: size for v, size in zip(outer_vars, kernel.outer, strict=True)})
    body = [f"xnumel = {TRITON(xnumel)}", f"xindex = {pid} * XBLOCK + tl.arange(0, XBLOCK)[:, None]",
            "xmask = xindex < xnumel", *_decompose(outer_vars, kernel.outer, "xindex")]
    return writer, body + _rows(writer, kernel, persistent)


def _step(index: sympy.Expr, var: sympy.Symbol) -> int | None:
    """How far element ``index`` moves when ``var`` grows by one: a number, or None (it
    depends on where, as through a division)."""
    moved = sympy.expand(index.subs(var, var + 1) - index)
    return int(moved) if moved.is_Integer else None


def _columns(indices: list[sympy.Expr], outer_vars: tuple[sympy.Symbol, ...], outer: tuple[sympy.Expr, ...]) -> bool:
    """Whether a row kernel's loads are contiguous across its rows rather than along them:
    of the loads that move with both the row (the innermost outer variable) and the reduced
    range, at least as many step by one element from row to row (and otherwise along the
    range) as step by one along it, as in a sum over the leading dimensions of a contiguous
    tensor (a bias's gradient: each row a column of the input). Such loads are coalesced
    only with many rows per program (``_columns_launch``); with one row per program each
    lane reads one element of a different 32-byte sector."""
    moving = [v for v, size in zip(outer_vars, outer, strict=True) if size != 1]
    if not moving:
        return False
    x = moving[-1]
    along = across = 0
    for index in indices:
        rs = sorted((v for v in index.free_symbols if v.name[:1] == "r" and v.name[1:].isdigit()),
                    key=lambda v: int(v.name[1:]))
        if not rs or x not in index.free_symbols:
            continue
        dx, dr = _step(index, x), _step(index, rs[-1])
        if dx == 1 and dr not in (0, 1):
            along += 1
        elif dr == 1:
            across += 1
    return along > 0 and along >= across


def _rows(writer: _Writer, kernel: Kernel, persistent: bool) -> list[str]:
    lines: list[str] = []
    current: tuple[sympy.Expr, ...] | None = None
    groups = _groups(kernel.stages)
    merged: set[int] = set()  # groups folded into an earlier group's loop (``_online``)
    for at, group in enumerate(groups):
        if at in merged:
            continue
        inner = group[0].inner
        r_vars = loop_vars("r", len(inner))
        rnumel = sympy.Mul(*inner)
        if not inner:
            # one element per row: [XBLOCK, 1] blocks
            for stage in group:
                if isinstance(stage.buffer.body, Reduction):  # a reduction over nothing: the element itself
                    lines += _reduce_nothing(writer, stage)
                else:
                    lines += writer.pointwise(stage)
            continue
        for v, size in zip(r_vars, inner, strict=True):
            writer.dims[v.name] = frozenset({"r"})
            writer.extents[v.name] = size
        rindex_lines = [f"rnumel = {TRITON(rnumel)}"]
        if persistent:
            if inner != current:
                # new r variables: what depended on the old ones is stale
                for key in [k for k, v in writer.cse.items() if "r" in v.dims]:
                    del writer.cse[key]
                rindex_lines += ["rindex = tl.arange(0, RBLOCK)[None, :]", "rmask = rindex < rnumel",
                                 *_decompose(r_vars, inner, "rindex")]
                lines += rindex_lines
                current = inner
            for stage in group:
                if isinstance(stage.buffer.body, Reduction):
                    before, block, after = writer.reduction(stage, "rindex", looped=False)
                    lines += before + block + after
                elif isinstance(stage.buffer.body, Scan):
                    lines += scan_lines(writer, stage, persistent=True)[1]
                else:
                    lines += writer.pointwise(stage)
            continue
        saved = dict(writer.cse)
        head = ["rindex = roffset + tl.arange(0, RBLOCK)[None, :]", "rmask = rindex < rnumel",
                *_decompose(r_vars, inner, "rindex")]
        before: list[str] = []
        after: list[str] = []
        inside: list[str] = []
        partner = _online_partner(groups, at)
        mates = [partner[1]] if partner is not None else _loop_mates(groups, at, merged)
        merged.update(mates)
        writer.evict = _evictions(groups, [at, *mates])
        if partner is not None:
            kind, j = partner
            fold = online_softmax if kind == "softmax" else welford
            before, inside, after = fold(writer, group[0], groups[j][0])
            group = []
        else:
            for j in mates:
                group = group + groups[j]
        for stage in group:
            if isinstance(stage.buffer.body, Reduction):
                b, block, a = writer.reduction(stage, "rindex", looped=True)
                before, inside, after = before + b, inside + block, after + a
            elif isinstance(stage.buffer.body, Scan):
                b, block = scan_lines(writer, stage, persistent=False)
                before, inside = before + b, inside + block
            else:
                inside += writer.pointwise(stage)
        writer.cse.clear()
        writer.cse.update(saved)
        writer.evict = None
        lines += [f"rnumel = {TRITON(rnumel)}", *before, "for roffset in range(0, rnumel, RBLOCK):",
                  *_indent(head + inside), *after]
        current = None
    return lines


def _evictions(groups: list[list[Stage]], loop: list[int]) -> dict[str, str]:
    """The cache hints of the loads of a looped row kernel's loop over ``groups[i]`` for ``i``
    in ``loop``: a buffer that a later group outside the loop reads again is loaded
    ``evict_last`` (a LayerNorm's input, read by the statistics' loop and again by the
    normalizing one: the second read finds the row in L2), and a buffer an earlier group read
    ``evict_first`` where this is its last read; a buffer read once has no hint (``TritonOps``
    adds ``evict_last`` for loads the same for every row, as a norm's weight)."""
    def names(i: int) -> set[str]:
        return {r.name for stage in groups[i] for r in reads_of(stage, ())}

    here = set().union(*(names(i) for i in loop))
    later = set().union(set(), *(names(i) for i in range(loop[0] + 1, len(groups)) if i not in loop))
    earlier = set().union(set(), *(names(i) for i in range(loop[0])))
    return {n: "evict_last" if n in later else "evict_first" for n in sorted(here) if n in later or n in earlier}


def _loop_mates(groups: list[list[Stage]], at: int, merged: set[int]) -> list[int]:
    """The groups right after reduction group ``at`` whose reductions share its loop: each a
    reduction over the same range that reads no result of the loop (a reduction's value and
    stores exist only after it) and stores nowhere the loop reads, and none the first of an
    online pair (``_online_partner``). Two sums of one tensor (a norm's weight and bias
    gradients) then read it once."""
    first = groups[at]
    if len(first) != 1 or not isinstance(first[0].buffer.body, Reduction):
        return []
    inner = first[0].inner
    made = _targets(first[0])
    read = {r.name for r in reads_of(first[0], ())}
    mates: list[int] = []
    for j in range(at + 1, len(groups)):
        if j in merged or len(groups[j]) != 1:
            break
        stage = groups[j][0]
        if not isinstance(stage.buffer.body, Reduction) or stage.inner != inner \
                or _online_partner(groups, j) is not None:
            break
        reads = {r.name for r in reads_of(stage, ())}
        if reads & made or _targets(stage) & read:
            break
        mates.append(j)
        made |= _targets(stage)
        read |= reads
    return mates


def _targets(stage: Stage) -> set[str]:
    """The names ``stage``'s result is known by: its buffer's, and the storage it is written into."""
    buffer = stage.buffer
    return {buffer.name} | {n for n in (buffer.into, buffer.storage) if n}


def _online_partner(groups: list[list[Stage]], at: int) -> tuple[str, int] | None:
    """``(kind, j)`` when the reduction of ``groups[at]`` and the sum of ``groups[j]`` fold in
    one loop (``_ir.Reduction.online``): a softmax's sum right after its max (its summand may
    read what the stages between computed otherwise), a variance's squares anywhere after its
    sum (computed from the sum's own elements)."""
    if len(groups[at]) != 1 or not isinstance(groups[at][0].buffer.body, Reduction):
        return None
    first = groups[at][0]
    for j in range(at + 1, len(groups)):
        if len(groups[j]) != 1:
            continue
        stage = groups[j][0]
        body = stage.buffer.body
        if not isinstance(body, Reduction) or body.online is None or body.online[1] != first.buffer.name \
                or body.reduction_type != "sum" or stage.inner != first.inner:
            continue
        kind = body.online[0]
        if kind == "softmax" and j == at + 1 and first.buffer.body.reduction_type == "max":
            return kind, j
        if kind == "welford" and first.buffer.body.reduction_type == "sum":
            return kind, j
    return None


def _reduce_nothing(writer: _Writer, stage: Stage) -> list[str]:
    """A reduction over an empty set of dimensions (of a 0-d tensor): the element, as the
    result's type (an arg-reduction's index: 0)."""
    buffer, body = stage.buffer, stage.buffer.body
    ops = writer.ops()
    value = body.loader(stage.index, [], ops)
    if body.reduction_type in ("argmax", "argmin"):
        value = ops.constant(0, torch.int64)
    value = ops.to_dtype(value, compute_type(buffer.dtype))
    if stage.local:
        writer.locals[buffer.name] = value
        return [f"# {buffer.name}: {_describe(buffer)}", *writer.barrier(ops, None), *writer.absorb(ops)]
    barrier = writer.barrier(ops, buffer.into or buffer.storage or buffer.name)
    line = writer.store(ops, buffer, stage.index, value)
    return [f"# {buffer.name}: {_describe(buffer)}", *barrier, *writer.absorb(ops), line]


def _flat_launch(total: sympy.Expr) -> dict[str, int]:
    n = _static(total)
    block = 1024 if n is None else min(1024, _next_pow2(max(n, 1)))
    return {"XBLOCK": block, "num_warps": max(1, min(4, block // 128))}


COLUMN_XBLOCK = 64  # rows per program of a kernel reading along its rows (``_columns``)
COLUMN_PERSISTENT_MAX = 128  # the widest range such a kernel holds whole (a block of 64 x 128)
COLUMN_ELEMENTS = 2048  # elements per loop step of such a kernel
COLUMN_PROGRAMS = 128  # programs such a kernel keeps where its rows allow (an H100 has 132 SMs)


def _columns_launch(xnumel: sympy.Expr, width: int | None) -> dict[str, int]:
    """The launch of a kernel reading along its rows: ``COLUMN_XBLOCK`` rows per program (64
    neighbouring elements: whole 128-byte lines of bfloat16), fewer where that leaves under
    ``COLUMN_PROGRAMS`` programs; a persistent kernel's block holds whole rows of its range
    (``width``), a looped one takes ``COLUMN_ELEMENTS`` per step."""
    rows = _static(xnumel)
    xblock = COLUMN_XBLOCK
    if rows is not None:
        while xblock > 1 and rows < xblock * COLUMN_PROGRAMS:
            xblock //= 2
    if width is not None:
        rblock = _next_pow2(max(width, 1))
        return {"XBLOCK": xblock, "RBLOCK": rblock, "num_warps": max(2, min(8, xblock * rblock // 1024))}
    rblock = max(8, COLUMN_ELEMENTS // xblock)
    return {"XBLOCK": xblock, "RBLOCK": rblock, "num_warps": 8}


def _rows_launch(xnumel: sympy.Expr, width: int | None, persistent: bool, itemsize: int = 4) -> dict[str, int]:
    """A row kernel's launch from its sizes; ``itemsize``: the widest element it loads or
    stores. A persistent program gets a warp per 1024 elements of its block, twice that for
    4-byte elements from 4096 on, at most 32: measured on an H100 (benchmarks/triton_sweep.py,
    rows of 4096 and 32768; results in benchmarks/results/), 32 warps beat 16 on every row of
    32768 (softmax bf16 74% of copy bandwidth against 64%), 8 beat 4 on float32 rows of 4096
    (add + LayerNorm + GELU 90% against 87%), and bfloat16 rows of 4096 kept 4."""
    rows = _static(xnumel)
    if persistent:
        rblock = _next_pow2(max(width or 1, 1))
        xblock = max(1, 4096 // rblock) if rblock < 4096 else 1
    else:
        rblock = 2048
        xblock = 1
    if rows is not None:
        xblock = min(xblock, _next_pow2(max(rows, 1)))
    if not persistent:
        return {"XBLOCK": xblock, "RBLOCK": rblock, "num_warps": 8}
    elements = xblock * rblock
    warps = max(2, elements // 1024) * (2 if itemsize >= 4 and elements >= 4096 else 1)
    return {"XBLOCK": xblock, "RBLOCK": rblock, "num_warps": min(32, warps)}
