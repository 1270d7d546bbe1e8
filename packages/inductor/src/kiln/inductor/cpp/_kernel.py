"""One scheduled ``Kernel`` as a C++ function: the outer loops (OpenMP-parallel when the
kernel touches enough elements), then each stage in order in the outer loop's body.

A pointwise stage is a ``#pragma omp simd`` loop over its inner sizes storing one element
per iteration (consecutive pointwise stages over the same inner sizes share one loop, whose
body computes and stores each in turn: an in-place optimizer update is one loop that reads
and writes each element once; without outer loops that loop is the parallel one); a reduction stage folds its reduced range into an accumulator (``omp simd``
reductions for sums, products and boolean folds; the NaN-propagating max/min and the
arg-reductions step element by element) and stores it, or keeps it in a local variable
when only later stages of the kernel read it. A buffer of a half type is computed and folded
in float (``compute_type``) and rounded to its type as it is stored (``cstore``).

The function is ``extern "C" void <name>(<pointers>, <sizes>, int64_t kiln_threads)``;
``KernelSource.params`` lists the parameters for the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
import torch

from .._ir import (
    ComputedBuffer,
    Pointwise,
    Reduction,
    Scan,
    Scatter,
    contiguous_strides,
    flat_index,
    loop_vars,
)
from .._ops import IndexCheck, ReadsOps, compute_type
from .._policy import FusionPolicy
from .._scheduler import Kernel, Stage
from ._loops import block as _block
from ._loops import loops as _loops
from ._loops import runs as _runs
from ._loops import split_invariant as _split_invariant
from ._ops import CTYPES, CppOps, CppVar, cconst, cexpr, cstore
from ._serial import scan_lines, scatter_lines

__all__ = ["ERROR_PARAM", "KernelSource", "Param", "render_kernel"]

ERROR_PARAM = "kiln_error"


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    kind: str  # "in" (read-only pointer), "out" (written pointer), "size" (int64: a size, or _ir.SEED)
    dtype: torch.dtype | None = None
    checks: tuple[IndexCheck, ...] = ()  # ERROR_PARAM's: the checks it reports, in order


@dataclass(slots=True)
class KernelSource:
    name: str
    code: str
    params: list[Param] = field(default_factory=list)
    checks: list[IndexCheck] = field(default_factory=list)  # check k + 1 is reported as k + 1 in kiln_error


_SIMD_REDUCTION = {"sum": "+", "prod": "*", "any": "||", "all": "&&"}


def _init(kind: str, dtype: torch.dtype) -> str:
    ctype = CTYPES[dtype]
    if kind in ("sum", "any"):
        return cconst(0, dtype)
    if kind in ("prod", "all"):
        return cconst(1, dtype)
    if kind in ("max", "argmax"):
        if dtype.is_floating_point:
            return f"-std::numeric_limits<{ctype}>::infinity()"
        return "false" if dtype == torch.bool else f"std::numeric_limits<{ctype}>::lowest()"
    if dtype.is_floating_point:
        return f"std::numeric_limits<{ctype}>::infinity()"
    return "true" if dtype == torch.bool else f"std::numeric_limits<{ctype}>::max()"


class _Writer:
    def __init__(self, kernel: Kernel, policy: FusionPolicy) -> None:
        self.kernel = kernel
        self.policy = policy
        self.locals: dict[str, CppVar] = {}
        self.counter = [0]
        self.reads: set[str] = set()
        self.writes: dict[str, torch.dtype] = {}
        self.symbols: set[sympy.Symbol] = set()
        self.checks: list[IndexCheck] = []
        self.parallel = ""  # the OpenMP clauses of a lone pointwise loop with no outer loop

    def ops(self) -> CppOps:
        return CppOps(locals=self.locals, checks=self.checks, _counter=self.counter)

    def absorb(self, ops: CppOps) -> None:
        self.reads |= ops.reads
        self.symbols |= ops.symbols

    def stages(self, group: list[Stage]) -> list[str]:
        """A reduction stage, or consecutive pointwise stages over the same inner sizes as one
        loop whose body computes and stores each in turn (each element a stage reads of an
        earlier one was stored in the same iteration: ``_scheduler._fits``)."""
        first = group[0]
        inner_vars = loop_vars("r", len(first.inner))
        if isinstance(first.buffer.body, (Scatter, Scan)):
            write = scatter_lines if isinstance(first.buffer.body, Scatter) else scan_lines
            return [f"// {first.buffer.name}: {_describe(first.buffer)}", *write(self, first)]
        if isinstance(first.buffer.body, Reduction):
            comment = f"// {first.buffer.name}: {_describe(first.buffer)}"
            return [comment, *self.reduction(first, first.buffer, first.buffer.body, inner_vars)]
        body: list[str] = []
        for stage in group:
            body += [f"// {stage.buffer.name}: {_describe(stage.buffer)}", *self.pointwise(stage)]
        if not first.inner:
            return _block(body, "")
        hoisted, body = _hoist(body, inner_vars, first.inner)
        simd = f"omp parallel for simd {self.parallel}" if self.parallel else "omp simd"
        pragma = f"#pragma {simd}" + (f" collapse({len(inner_vars)})" if len(inner_vars) > 1 else "")
        return [*hoisted, pragma, *_loops(inner_vars, first.inner, ""), *_block(body, "")]

    def pointwise(self, stage: Stage) -> list[str]:
        buffer = stage.buffer
        ops = self.ops()
        value = ops.to_dtype(buffer.body.loader(stage.index, ops), compute_type(buffer.dtype))
        self.absorb(ops)
        store = flat_index(stage.index, buffer.strides())
        self.symbols |= store.free_symbols
        # an input mutation stores into the input's pointer, an in-place write into the dead buffer's
        target = buffer.into or buffer.storage or buffer.name
        self.writes[target] = buffer.dtype
        return [*ops.lines, f"{target}[{cexpr(store)}] = {cstore(value.name, buffer.dtype)};"]

    def reduction(self, stage: Stage, buffer: ComputedBuffer, body: Reduction,
                  inner_vars: tuple[sympy.Symbol, ...]) -> list[str]:
        kind = body.reduction_type
        arg = kind in ("argmax", "argmin")
        src = compute_type(body.src_dtype)
        dtype = compute_type(buffer.dtype)  # what the fold computes in (the buffer may be a half type)
        acc, best = f"acc_{buffer.name}", f"best_{buffer.name}"
        ops = self.ops()
        value = body.loader(stage.index, list(inner_vars), ops)
        self.absorb(ops)
        lines: list[str]
        if arg:
            flat = flat_index(list(inner_vars), contiguous_strides(stage.inner))
            better = ">" if kind == "argmax" else "<"
            update = (f"if ({value.name} {better} {best} || ({value.name} != {value.name} && {best} == {best})) "
                      f"{{ {best} = {value.name}; {acc} = {cexpr(flat)}; }}")
            lines = [f"{CTYPES[src]} {best} = {_init(kind, src)};", f"int64_t {acc} = 0;"]
            pragma = []
        else:
            acc_type = _accumulator(kind, dtype)
            op = _SIMD_REDUCTION.get(kind)
            if kind in ("max", "min") and dtype == torch.bool:
                op = "||" if kind == "max" else "&&"
            lines = [f"{acc_type} {acc} = {_init(kind, dtype)};"]
            if op is not None:
                update = f"{acc} = {acc} {op} {value.name};"
                clauses = f"reduction({op}:{acc})"
            else:
                # max/min: the vectorizable reduction, and whether any element was NaN (then NaN)
                pick = ">" if kind == "max" else "<"
                update = f"{acc} = {value.name} {pick} {acc} ? {value.name} : {acc};"
                clauses = f"reduction({kind}:{acc})"
                if dtype.is_floating_point:  # an int flag: a bool one keeps the loop scalar
                    lines.append(f"int32_t nan_{buffer.name} = 0;")
                    update += f" nan_{buffer.name} |= ({value.name} != {value.name});"
                    clauses += f" reduction(|:nan_{buffer.name})"
            pragma = [f"#pragma omp simd {clauses}" + (f" collapse({len(inner_vars)})" if len(inner_vars) > 1 else "")]
        if not inner_vars:  # a reduction over no dimension (of a 0-d tensor): one element
            pragma = []
        hoisted, element = _hoist(ops.lines, inner_vars, stage.inner)
        lines += [*hoisted, *pragma, *_loops(inner_vars, stage.inner, ""), *_block([*element, update], "")]
        result = f"val_{buffer.name}"
        final = f"static_cast<{CTYPES[dtype]}>({acc})"
        if kind in ("max", "min") and dtype.is_floating_point:
            final = f"nan_{buffer.name} ? std::numeric_limits<{CTYPES[dtype]}>::quiet_NaN() : {final}"
        lines.append(f"{CTYPES[dtype]} {result} = {final};")
        if stage.local:
            self.locals[buffer.name] = CppVar(result, dtype)
            return lines
        store = flat_index(stage.index, buffer.strides())
        self.symbols |= store.free_symbols
        self.writes[buffer.name] = buffer.dtype
        return [*lines, f"{buffer.name}[{cexpr(store)}] = {cstore(result, buffer.dtype)};"]


def _hoist(lines: list[str], variables: tuple[sympy.Symbol, ...],
           sizes: tuple[sympy.Expr, ...]) -> tuple[list[str], list[str]]:
    """The lines of a loop body over ``variables`` that do not depend on them (a gathered
    row's index, loaded and checked), to run once before the loop, and the rest: so the
    loop vectorizes. Nothing moves where the loop may run no iteration."""
    if not variables or not _runs(sizes):
        return [], lines
    return _split_invariant(lines, [v.name for v in variables])


def _loop_groups(stages: list[Stage]) -> list[list[Stage]]:
    """``stages`` in order, consecutive pointwise stages over the same inner sizes together."""
    groups: list[list[Stage]] = []
    for stage in stages:
        pointwise = isinstance(stage.buffer.body, Pointwise)
        last = groups[-1][-1] if groups else None
        if pointwise and last is not None and isinstance(last.buffer.body, Pointwise) and last.inner == stage.inner:
            groups[-1].append(stage)
        else:
            groups.append([stage])
    return groups


def _accumulator(kind: str, dtype: torch.dtype) -> str:
    """The C++ type a ``kind`` reduction computing in ``dtype`` accumulates in: float sums and
    products in double (as exact as torch's cascaded sums), others in ``dtype``."""
    return "double" if kind in ("sum", "prod") and dtype == torch.float32 else CTYPES[dtype]


def _describe(buffer: ComputedBuffer) -> str:
    body = buffer.body
    kind = body.reduction_type if isinstance(body, Reduction) else f"scan ({body.scan_type})" \
        if isinstance(body, Scan) else f"scatter ({body.mode or 'store'}) into {buffer.into}" \
        if isinstance(body, Scatter) else "pointwise"
    origins = ", ".join(buffer.origins)
    return f"{kind} of {origins}" if origins else kind


def render_kernel(kernel: Kernel, policy: FusionPolicy, dtypes: dict[str, torch.dtype]) -> KernelSource:
    """The C++ function computing ``kernel`` (see the module docstring); ``dtypes``: every
    buffer's dtype, by name."""
    writer = _Writer(kernel, policy)
    outer_vars = loop_vars("x", len(kernel.outer))
    inner = [sympy.Mul(*s.inner) for s in kernel.stages]
    work = sympy.Mul(*kernel.outer) * max(inner, key=lambda e: e.subs({v: 1024 for v in e.free_symbols}))
    parallel = f"num_threads(kiln_threads) if({cexpr(work)} >= {policy.parallel_min_elements})"
    groups = _loop_groups(kernel.stages)
    if not kernel.outer and len(groups) == 1 and isinstance(groups[0][0].buffer.body, Pointwise):
        writer.parallel = parallel  # one pointwise loop and no outer one: that loop is the parallel one
    body: list[str] = []
    blocked = _outer_reduction(kernel, writer, parallel)
    if blocked is None:
        for group in groups:
            body += writer.stages(group)
    loop_names = set(outer_vars) | {v for s in kernel.stages for v in loop_vars("r", len(s.inner))}
    symbols = set(writer.symbols) | work.free_symbols
    for size in (*kernel.outer, *(size for s in kernel.stages for size in s.inner)):  # every loop bound
        symbols |= sympy.sympify(size).free_symbols  # one by one: a product with a size 0 has no symbols
    symbols = sorted(symbols - loop_names, key=lambda v: v.name)
    params = [Param(n, "out", d) for n, d in sorted(writer.writes.items())]
    params += [Param(n, "in", dtypes[n]) for n in sorted(writer.reads - set(writer.writes))]
    if writer.checks:  # where an index out of range is reported: two int64 (which check, its value)
        params.append(Param(ERROR_PARAM, "out", torch.int64, tuple(writer.checks)))
    params += [Param(v.name, "size") for v in symbols]
    if blocked is not None:
        lines = blocked
    elif kernel.outer:
        collapse = f" collapse({len(outer_vars)})" if len(outer_vars) > 1 else ""
        lines = [f"#pragma omp parallel for {parallel}{collapse}", *_loops(outer_vars, kernel.outer, ""),
                 *_block(body, "")]
    else:
        lines = body
    signature = ", ".join([*(_param_decl(p) for p in params), "int64_t kiln_threads"])
    code = "\n".join([f'extern "C" void {kernel.name}({signature})', *_block(lines, "")])
    return KernelSource(kernel.name, code, params, writer.checks)


# outputs reduced side by side in an outer reduction: two AVX-512 vectors of floats, 1.3-1.5x
# faster than one on channels-last batch-norm statistics (1 thread: whole 128-byte line pairs)
_BLOCK = 32


def _outer_reduction(kernel: Kernel, writer: _Writer, parallel: str) -> list[str] | None:
    """Sum/prod/max/min reductions whose reduced dimensions are not the innermost in memory (a
    bias gradient: the sum over the batch; BatchNorm's statistics of a channels-last value:
    the sums over N, H, W of each channel), with the kernel's pointwise stages of one element
    per output, as loops over blocks of ``_BLOCK`` neighbouring outputs: in each block every
    stage runs in turn for the whole block, a reduction with its reduced loops outside and the
    block inside (unit stride, vectorized), its results kept per block where only later stages
    read them. None where the kernel is not one."""
    if not kernel.outer:
        return None
    outer_vars = loop_vars("x", len(kernel.outer))
    last = outer_vars[-1]
    reductions = [s for s in kernel.stages if isinstance(s.buffer.body, Reduction)]
    if not reductions or any(
            (s.buffer.body.reduction_type not in ("sum", "prod", "max", "min")) if isinstance(s.buffer.body, Reduction)
            else (not isinstance(s.buffer.body, Pointwise) or s.inner) for s in kernel.stages):
        return None
    for stage in reductions:
        inner_vars = loop_vars("r", len(stage.inner))
        reads = ReadsOps()
        stage.buffer.body.loader(stage.index, list(inner_vars), reads)
        steps = [sympy.expand(r.index).coeff(last) for r in reads.reads]
        if not steps or any(c not in (0, 1) for c in steps) or 1 not in steps:
            return None  # the block would not read consecutive elements (or the same one)
        if all(all(sympy.expand(r.index).coeff(v) == 0 for v in inner_vars) for r in reads.reads):
            return None
    define = f"const int64_t {last} = xb + j;"
    size = kernel.outer[-1]
    # whole blocks (a known multiple of the block): loops of a constant count, which compile faster
    whole = isinstance(size, sympy.Integer) and int(size) % _BLOCK == 0
    block = [f"const int64_t width = {_BLOCK};" if whole else
             f"const int64_t width = std::min<int64_t>({_BLOCK}, {cexpr(size)} - xb);"]
    for group in _reduction_groups(kernel.stages):
        stage = group[0]
        if isinstance(stage.buffer.body, Pointwise):
            block += [f"// {stage.buffer.name}: {_describe(stage.buffer)}", "for (int64_t j = 0; j < width; ++j)",
                      *_block([define, *writer.pointwise(stage)], "")]
        else:
            block += _blocked_reductions(group, writer, last, define)
    others = outer_vars[:-1]
    collapse = f" collapse({len(others) + 1})" if others else ""
    names = ", ".join(s.buffer.name for s in reductions)
    return [f"// {names}: {_BLOCK} outputs at a time (reduced dims outermost in memory)",
            f"#pragma omp parallel for {parallel}{collapse}",
            *_loops(others, kernel.outer[:-1], ""),
            f"for (int64_t xb = 0; xb < {cexpr(kernel.outer[-1])}; xb += {_BLOCK})", *_block(block, "")]


def _reduction_groups(stages: list[Stage]) -> list[list[Stage]]:
    """``stages`` in order, consecutive reductions over the same reduced sizes that read none of
    each other's results together (one pass over what they read: a batch norm's gradient
    sums)."""
    groups: list[list[Stage]] = []
    for stage in stages:
        last = groups[-1] if groups else None
        if isinstance(stage.buffer.body, Reduction) and last is not None \
                and isinstance(last[0].buffer.body, Reduction) and last[0].inner == stage.inner:
            reads = ReadsOps()
            stage.buffer.body.loader(stage.index, list(loop_vars("r", len(stage.inner))), reads)
            if not {r.name for r in reads.reads} & {s.buffer.name for s in last}:
                last.append(stage)
                continue
        groups.append([stage])
    return groups


def _blocked_reductions(group: list[Stage], writer: _Writer, last: sympy.Symbol, define: str) -> list[str]:
    """Reduction stages of ``_outer_reduction`` (``_reduction_groups``) for the block of outputs
    ``xb + j``, in one loop nest: each result stored, or kept in ``val_<name>[j]`` for later
    stages (``local``)."""
    inner = group[0].inner
    inner_vars = loop_vars("r", len(inner))
    heads: list[str] = []
    hoisted: list[str] = []
    varying: list[str] = []
    tails: list[str] = []
    for stage in group:
        buffer, body = stage.buffer, stage.buffer.body
        kind, dtype = body.reduction_type, compute_type(buffer.dtype)
        ctype, acc_type = CTYPES[dtype], _accumulator(kind, dtype)
        acc, nan_flags = f"acc_{buffer.name}", f"nan_{buffer.name}"
        ops = writer.ops()
        value = body.loader(stage.index, list(inner_vars), ops)
        writer.absorb(ops)
        nan = kind in ("max", "min") and dtype.is_floating_point
        if kind in ("sum", "prod"):
            update = f"{acc}[j] = {acc}[j] {'+' if kind == 'sum' else '*'} {value.name};"
        else:
            pick = ">" if kind == "max" else "<"
            update = f"{acc}[j] = {value.name} {pick} {acc}[j] ? {value.name} : {acc}[j];"
            if nan:
                update += f" {nan_flags}[j] |= ({value.name} != {value.name});"
        invariant, lines = _split_invariant(ops.lines, last.name)
        hoisted += invariant
        varying += [*lines, update]
        final = f"static_cast<{ctype}>({acc}[j])"
        if nan:
            final = f"{nan_flags}[j] ? std::numeric_limits<{ctype}>::quiet_NaN() : {final}"
        heads += [f"// {buffer.name}: {_describe(buffer)}", f"{acc_type} {acc}[{_BLOCK}];",
                  *([f"int32_t {nan_flags}[{_BLOCK}] = {{0}};"] if nan else []),
                  f"for (int64_t j = 0; j < {_BLOCK}; ++j) {acc}[j] = {_init(kind, dtype)};"]
        if stage.local:  # read by later stages only, at their own output: one value per output of the block
            writer.locals[buffer.name] = CppVar(f"val_{buffer.name}[{last} - xb]", dtype)
            tails += [f"{ctype} val_{buffer.name}[{_BLOCK}];",
                      f"for (int64_t j = 0; j < width; ++j) val_{buffer.name}[j] = {final};"]
            continue
        store = flat_index(stage.index, buffer.strides())
        writer.symbols |= store.free_symbols
        writer.writes[buffer.name] = buffer.dtype
        tails += ["for (int64_t j = 0; j < width; ++j)",
                  *_block([define, f"{buffer.name}[{cexpr(store)}] = {cstore(final, buffer.dtype)};"], "")]
    return [*heads, *_loops(inner_vars, inner, ""),
            *_block([*hoisted, "#pragma omp simd", "for (int64_t j = 0; j < width; ++j)",
                     *_block([define, *varying], "")], ""), *tails]


def _param_decl(p: Param) -> str:
    if p.kind == "size":
        return f"int64_t {p.name}"
    const = "const " if p.kind == "in" else ""
    return f"{const}{CTYPES[p.dtype]}* __restrict__ {p.name}"
