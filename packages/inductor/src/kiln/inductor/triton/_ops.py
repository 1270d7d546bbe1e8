"""Triton for the element operations: the ops handler that writes one temporary per operation
(common subexpressions written once per block), and the printer of sympy index expressions.

A kernel computes blocks of elements: a temporary is a Triton tensor whose shape is set by
the loop variables it depends on (``dims``: ``x``, the rows or elements a program owns, and
``r``, the reduced or inner range of a stage). A load or store is masked by the masks of the
dimensions its index depends on (``xmask``, ``rmask``): lanes past the end of a range
compute nothing they store and read nothing out of bounds.

Types follow ``.._ops``: every conversion is explicit (``to_dtype``); half values are
float32 temporaries (``.._ops.compute_type``) widened when loaded and rounded when stored.
Math beyond Triton's core functions is CUDA's libdevice (``libdevice``, which
``_runtime`` resolves: triton's own module on a GPU, numpy stand-ins under
``TRITON_INTERPRET=1``, where triton cannot call libdevice).

Random numbers (``random``): Philox4x32-10 through ``tl.philox``, keyed and counted as the C++
kernels' generator is (``_runtime.HEADER``), so a Triton kernel draws the C++ kernel's numbers.

An index loaded from memory (gather, embedding) is checked (``kiln_index_check``: a device-side
assert, as eager's CUDA kernels make) and read as element 0 when out of range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from kiln.symshapes import FloorDiv, Mod

from .._ir import SEED
from .._ops import (
    COMPARISONS,
    HALF_DTYPES,
    OP_ARITY,
    IndexCheck,
    IndirectIndex,
    compute_type,
    random_helper,
)
from .._printer import SizePrinter

__all__ = ["COMPILE_OPTIONS", "TL_TYPES", "TRITON", "TritonOps", "TritonVar", "index_bounds", "tconst", "tstore"]

TL_TYPES: dict[torch.dtype, str] = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.int64: "tl.int64", torch.int32: "tl.int32",
    torch.int16: "tl.int16", torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
    torch.bfloat16: "tl.bfloat16", torch.float16: "tl.float16",
}

# Python's floor division and remainder (the index expressions' meaning) for values that may
# be negative; for those sympy proves nonnegative over a positive divisor (loop variables,
# sizes) Triton's own operators, which agree there: fewer instructions (a bf16 layer norm's
# weight-gradient kernel for an H100: 1849 lines of PTX with the helpers, 1588 without, with
# triton 3.6, in as long a compile; with triton 3.9, 2943 and 1661 lines, 0.72 and 0.38 s)
TRITON = SizePrinter("Triton", "kiln_floordiv_int({a}, {b})", "kiln_mod_int({a}, {b})", "{}", "tl.maximum",
                     "tl.minimum", variadic=False, nonnegative_floordiv="({a} // {b})",
                     nonnegative_mod="({a} % {b})")

# ``exp`` is libdevice's, as eager's CUDA kernels compute it (the same bits): ``tl.exp`` is an
# approximate ``ex2`` of the rounded ``x * log2(e)``, up to 63 ulps from float64 over [-87, 88]
# on an H100 where libdevice's is within 1.9 (benchmarks/exp_precision.py); in a chain such as
# ``sin(exp(v))`` the difference was 2.6 times eager's error. (The online softmax's rescaling
# of its running sum keeps ``tl.exp``: ``_online._rescale``.)
_UNARY = {
    "neg": "-{a}", "abs": "tl.abs({a})", "exp": "libdevice.exp({a})", "exp2": "tl.exp2({a})",
    "expm1": "libdevice.expm1({a})", "log": "tl.log({a})", "log1p": "libdevice.log1p({a})",
    "log2": "tl.log2({a})", "log10": "libdevice.log10({a})", "sqrt": "kiln_sqrt({a})",
    "rsqrt": "kiln_rsqrt({a})", "sin": "tl.sin({a})", "cos": "tl.cos({a})", "tan": "libdevice.tan({a})",
    "asin": "libdevice.asin({a})", "acos": "libdevice.acos({a})", "atan": "libdevice.atan({a})",
    "sinh": "libdevice.sinh({a})", "cosh": "libdevice.cosh({a})", "tanh": "libdevice.tanh({a})",
    "asinh": "libdevice.asinh({a})", "acosh": "libdevice.acosh({a})", "atanh": "libdevice.atanh({a})",
    "erf": "tl.erf({a})", "erfc": "libdevice.erfc({a})", "floor": "tl.floor({a})", "ceil": "tl.ceil({a})",
    "trunc": "libdevice.trunc({a})", "round": "libdevice.nearbyint({a})",
    "sigmoid": "(1 / (1 + libdevice.exp(-{a})))", "reciprocal": "(1 / {a})",
    "sign": "((0 < {a}).to({T}) - ({a} < 0).to({T}))", "logical_not": "({a} == 0)", "bitwise_not": "(~{a})",
    "isnan": "({a} != {a})", "isinf": "(tl.abs({a}) == float('inf'))", "signbit": "(libdevice.signbit({a}) != 0)",
    "lgamma": "libdevice.lgamma({a})", "square": "({a} * {a})",
}
_BINARY = {
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "truediv": "({a} / {b})",
    "pow": "libdevice.pow({a}, {b})", "maximum": "kiln_maximum({a}, {b})", "minimum": "kiln_minimum({a}, {b})",
    "atan2": "libdevice.atan2({a}, {b})", "fmod_float": "libdevice.fmod({a}, {b})",
    "remainder_float": "kiln_remainder({a}, {b})", "fmod_int": "kiln_fmod_int({a}, {b})",
    "remainder_int": "kiln_mod_int({a}, {b})", "floordiv_float": "kiln_floordiv({a}, {b})",
    "eq": "({a} == {b})", "ne": "({a} != {b})", "lt": "({a} < {b})", "le": "({a} <= {b})", "gt": "({a} > {b})",
    "ge": "({a} >= {b})", "logical_and": "(({a} != 0) & ({b} != 0))", "logical_or": "(({a} != 0) | ({b} != 0))",
    "logical_xor": "(({a} != 0) ^ ({b} != 0))", "bitwise_and": "({a} & {b})", "bitwise_or": "({a} | {b})",
    "bitwise_xor": "({a} ^ {b})", "copysign": "libdevice.copysign({a}, {b})", "hypot": "libdevice.hypot({a}, {b})",
}
_BOOL_RESULT = COMPARISONS | {"logical_not", "isnan", "isinf", "signbit", "logical_and", "logical_or",
                              "logical_xor"}
# integer maximum/minimum (no NaN to propagate) and float ones of a float64 (libdevice's fmax
# drops NaN; the helpers keep it)
_INT_BINARY = {"maximum": "tl.maximum({a}, {b})", "minimum": "tl.minimum({a}, {b})"}


def tconst(value: Any, dtype: torch.dtype) -> str:
    """A Python literal of ``value`` as an element of ``dtype`` (its kind: the caller gives it
    its type with ``tl.full``)."""
    if dtype == torch.bool:
        return "1" if value else "0"
    if dtype.is_floating_point:
        value = float(value)
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return f"float('{'-' if value < 0 else ''}inf')"
        return repr(value)
    return str(int(value))


def tstore(value: str, dtype: torch.dtype) -> str:
    """The Triton expression storing ``value`` (a temporary of ``compute_type(dtype)``) as an
    element of ``dtype``."""
    return f"{value}.to({TL_TYPES[dtype]})" if dtype in HALF_DTYPES else value



# Triton's compile options for every kernel: no floating-point contraction (triton's default
# on a GPU fuses a product and the sum reading it into one fma, the product unrounded), so a
# value has the same bits used inline as stored and loaded by another kernel (as the C++
# kernels: ``cpp._build``), and each half op is rounded as eager rounds it. With contraction,
# LLVM narrowed the float32 ops between a bfloat16 chain's roundings to bfloat16 ones and
# fused them: on an H100 (triton 3.6) ``a*b + c*d + a*d + b*c`` became ``mul.bf16x2`` and
# three ``fma.rn.bf16x2``, 44% of its elements an ulp from eager's
# (benchmarks/half_rounding.py). Under the interpreter, options are ignored.
COMPILE_OPTIONS: dict[str, Any] = {"enable_fp_fusion": False}

@dataclass(frozen=True, slots=True)
class TritonVar:
    """A temporary: its name, dtype, the block dimensions it depends on, (for a float32
    temporary holding a half value exactly) that half type, and (for an int64 temporary whose
    value is an index expression: a loop variable's, an integer constant, their int64 sums,
    differences and products) that expression, from which ``indirect`` bounds it."""

    name: str
    dtype: torch.dtype
    dims: frozenset[str] = frozenset()
    half: torch.dtype | None = None
    value: sympy.Expr | None = None


@dataclass(slots=True)
class TritonOps:
    """Writes ``lines`` of one block's computation. ``dims``: the block dimensions of each loop
    variable, by name; ``ones``: the shape literal of a one-element block of the kernel's rank
    (constants); ``locals``: buffers held in registers (a reduction's result in its kernel)."""

    dims: dict[str, frozenset[str]]
    ones: str
    lines: list[str] = field(default_factory=list)
    locals: dict[str, TritonVar] = field(default_factory=dict)
    reads: set[str] = field(default_factory=set)
    # buffers stored by earlier stages of the kernel (shared), and those this block loads from
    # memory anyway (a barrier must come first: ``_kernel``)
    stored: set[str] = field(default_factory=set)
    hazards: set[str] = field(default_factory=set)
    loaded: set[str] = field(default_factory=set)  # buffers this block loads from memory
    indices: list[sympy.Expr] = field(default_factory=list)  # the element index of each load (``_kernel._columns``)
    symbols: set[sympy.Symbol] = field(default_factory=set)
    checks: list[IndexCheck] = field(default_factory=list)
    # in a looped row kernel's loop, the cache hints by buffer: "evict_last" for what a later
    # loop of the kernel reads again, "evict_first" for a last read after such a loop
    # (``_kernel._evictions``); None elsewhere
    evict: dict[str, str] | None = None
    # each loop variable's extent where the kernel knows it (its values in the block's
    # unmasked lanes: 0 to extent - 1), which bounds the index expressions ``indirect`` takes
    extents: dict[str, sympy.Expr] = field(default_factory=dict)
    _cse: dict[str, TritonVar] = field(default_factory=dict)
    _counter: list[int] = field(default_factory=lambda: [0])

    # ------------------------------------------------------------------ helpers
    def index_dims(self, expr: Any) -> frozenset[str]:
        found: set[str] = set()
        for s in sympy.sympify(expr).free_symbols:
            found |= self.dims.get(s.name, frozenset())
        return frozenset(found)

    def mask(self, dims: frozenset[str]) -> str | None:
        """The mask of a block depending on ``dims`` (None: a scalar, always in range)."""
        names = [f"{d}mask" for d in ("x", "r") if d in dims]
        return " & ".join(names) if names else None

    def _sizes(self, expr: Any) -> None:
        self.symbols.update(s for s in sympy.sympify(expr).free_symbols
                            if not isinstance(s, IndirectIndex) and s.name not in self.dims)

    def _emit(self, code: str, dtype: torch.dtype, dims: frozenset[str], half: torch.dtype | None = None,
              value: sympy.Expr | None = None) -> TritonVar:
        found = self._cse.get(code)
        if found is not None and found.dtype == dtype:
            return found
        var = TritonVar(f"tmp{self._counter[0]}", dtype, dims, half, value if dtype == torch.int64 else None)
        self._counter[0] += 1
        self.lines.append(f"{var.name} = {code}")
        self._cse[code] = var
        return var

    # ------------------------------------------------------------------ the handler
    def indirect(self, x: TritonVar, size: sympy.Expr, check: IndexCheck) -> sympy.Expr:
        bound = TRITON(size)
        self._sizes(size)
        value = x if x.dtype == torch.int64 else self._emit(f"{x.name}.to(tl.int64)", torch.int64, x.dims)
        if self._in_range(value.value, size):  # (an index the kernel computes from its loop variables)
            name = IndirectIndex(value.name, integer=True)
            self.dims[value.name] = x.dims
            return name
        if check.negative:
            value = self._emit(f"tl.where({value.name} < 0, {value.name} + {bound}, {value.name})", torch.int64, x.dims)
        self.checks.append(check)
        inside = f"(0 <= {value.name}) & ({value.name} < {bound})"
        mask = self.mask(x.dims)
        ok = f"({inside}) | ~({mask})" if mask else inside
        line = f'kiln_index_check({ok}, "{_message(check)}")'
        if line not in self._cse:  # checked once where the same index is read again (CSE's scope)
            self.lines.append(line)
            self._cse[line] = value
        safe = self._emit(f"tl.where({inside}, {value.name}, 0)", torch.int64, x.dims)
        name = IndirectIndex(safe.name, integer=True)
        self.dims[safe.name] = x.dims
        return name

    def _in_range(self, value: sympy.Expr | None, size: sympy.Expr) -> bool:
        """Whether ``value`` (an index expression; None: unknown) is provably in ``[0, size)``
        in every unmasked lane: then neither checked nor clamped (a masked lane's index, out
        of range or not, is only used by masked loads and stores)."""
        if value is None:
            return False
        bounds = index_bounds(value, self.extents)
        if bounds is None:
            return False
        low, high = bounds
        return sympy.sympify(low).is_nonnegative is True and sympy.sympify(size - 1 - high).is_nonnegative is True

    def _load_code(self, name: str, index: sympy.Expr, dtype: torch.dtype) -> tuple[str, torch.dtype, frozenset[str]]:
        """The expression loading element ``index`` of ``name`` (its CSE key), its temporary's
        dtype, and its block dimensions."""
        dims = self.index_dims(index)
        mask = self.mask(dims)
        masked = f", {mask}, other=0" if mask else ""
        hint = None if self.evict is None else self.evict.get(name)
        if hint is None and self.evict is not None and "r" in dims and "x" not in dims:
            hint = "evict_last"  # the same elements for every row (a norm's weight): kept in L2
        if hint is not None:
            masked += f", eviction_policy='{hint}'"
        code = f"tl.load({name} + ({TRITON(index)}){masked})"
        if dtype in HALF_DTYPES:
            return f"{code}.to(tl.float32)", torch.float32, dims
        if dtype == torch.bool:
            return f"({code} != 0)", dtype, dims  # a bool tensor's elements load as int8 on some versions
        return code, dtype, dims

    def load(self, name: str, index: sympy.Expr, dtype: torch.dtype) -> TritonVar:
        local = self.locals.get(name)
        if local is not None:
            return local
        self._sizes(index)
        code, kind, dims = self._load_code(name, index, dtype)
        if code not in self._cse:  # (a value forwarded from a store is no read of memory)
            self.reads.add(name)
            self.loaded.add(name)
            self.indices.append(index)
            if name in self.stored:
                self.hazards.add(name)  # written earlier in the kernel, maybe by another thread
        return self._emit(code, kind, dims, dtype if dtype in HALF_DTYPES else None)

    def forward(self, name: str, index: sympy.Expr, dtype: torch.dtype, value: TritonVar) -> None:
        """``value`` was just stored at ``index`` of ``name`` (of ``dtype``, exactly: a half
        type's rounded value): a later load of that element in this block is ``value``
        (a thread may not see another's store without a barrier)."""
        code, kind, _ = self._load_code(name, index, dtype)
        if kind == value.dtype:
            self._cse[code] = value
        self.stored.add(name)

    def constant(self, value: Any, dtype: torch.dtype) -> TritonVar:
        if dtype in HALF_DTYPES:
            rounded = torch.tensor(float(value), dtype=torch.float32).to(dtype).item()
            return self._emit(f"tl.full({self.ones}, {tconst(rounded, torch.float32)}, tl.float32)", torch.float32,
                              frozenset(), dtype)
        exact = sympy.Integer(int(value)) if dtype == torch.int64 and isinstance(value, (int, sympy.Integer)) \
            and not isinstance(value, bool) else None
        return self._emit(f"tl.full({self.ones}, {tconst(value, dtype)}, {TL_TYPES[dtype]})", dtype, frozenset(),
                          value=exact)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> TritonVar:
        if dtype in HALF_DTYPES:
            return self.to_dtype(self.index_expr(expr, torch.int64), dtype)
        self._sizes(expr)
        dims = self.index_dims(expr)
        if not dims:  # sizes only: a scalar, widened to a block of the kernel's rank
            return self._emit(f"tl.full({self.ones}, {TRITON(expr)}, {TL_TYPES[dtype]})", dtype, dims, value=expr)
        return self._emit(f"({TRITON(expr)}).to({TL_TYPES[dtype]})", dtype, dims, value=expr)

    def to_dtype(self, x: TritonVar, dtype: torch.dtype) -> TritonVar:
        if dtype in HALF_DTYPES:
            if x.half == dtype:
                return x
            f = self.to_dtype(x, torch.float32)  # through float, as torch converts
            # (kernels are compiled without contraction, which would skip it: ``COMPILE_OPTIONS``)
            return self._emit(f"{f.name}.to({TL_TYPES[dtype]}).to(tl.float32)", torch.float32, x.dims, dtype)
        if x.dtype == dtype:
            return x
        if dtype == torch.bool:
            return self._emit(f"({x.name} != 0)", dtype, x.dims)
        return self._emit(f"{x.name}.to({TL_TYPES[dtype]})", dtype, x.dims)

    def random(self, distribution: str, offset: int, index: sympy.Expr, dtype: torch.dtype) -> TritonVar:
        """Element ``index`` of the graph's random op number ``offset`` (``"uniform"`` or
        ``"normal"``), from the kernel's seed argument (``SEED``): the header's function of
        the C++ kernels' name (``random_helper``), over ``tl.philox`` with the same key and
        counter, so the same numbers; a value of ``dtype`` (a half type's: its float, rounded
        to it)."""
        self.symbols.add(SEED)
        position = self.index_expr(index, torch.int64)
        helper, drawn = random_helper(distribution, dtype)  # a half normal is drawn as float, then rounded
        value = self._emit(f"{helper}({SEED.name}, {offset}, {position.name})", compute_type(drawn), position.dims,
                           drawn if drawn in HALF_DTYPES else None)
        return self.to_dtype(value, dtype)

    def where(self, c: TritonVar, a: TritonVar, b: TritonVar) -> TritonVar:
        half = a.half if a.half == b.half else None
        return self._emit(f"tl.where({c.name}, {a.name}, {b.name})", a.dtype, c.dims | a.dims | b.dims, half)

    def __getattr__(self, name: str) -> Any:
        arity = OP_ARITY.get(name)
        if arity is None:
            raise AttributeError(name)
        template = _UNARY.get(name) if arity == 1 else _BINARY.get(name)
        if template is None:
            raise AttributeError(name)

        def op(*args: TritonVar) -> TritonVar:
            dtype = torch.bool if name in _BOOL_RESULT else args[0].dtype
            dims = frozenset().union(*(a.dims for a in args))
            code = template
            if name in _INT_BINARY and not args[0].dtype.is_floating_point:
                code = _INT_BINARY[name]
            elif name == "bitwise_not" and args[0].dtype == torch.bool:
                code = "({a} == 0)"
            elif name in ("abs", "neg") and args[0].dtype == torch.bool:
                code = "{a}"
            fields = {"a": args[0].name, "T": TL_TYPES[args[0].dtype]}
            if arity == 2:
                fields["b"] = args[1].name
            value = None
            if name in _EXACT and all(a.value is not None and a.dtype == torch.int64 for a in args):
                value = _EXACT[name](*(a.value for a in args))
            return self._emit(code.format(**fields), dtype, dims, value=value)

        return op


# the int64 ops whose result's value ``TritonVar.value`` follows (index sizes: no overflow)
_EXACT = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "neg": lambda a: -a}


def index_bounds(expr: Any, extents: dict[str, sympy.Expr]) -> tuple[sympy.Expr, sympy.Expr] | None:
    """The least and greatest value of the index expression ``expr`` over loop variables
    ranging over ``0 .. extent - 1`` (``extents``, by name); None where it cannot be bounded
    (a variable of no known extent, a size symbol, a division by a non-constant)."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return expr, expr
    if expr.is_Symbol:
        extent = extents.get(expr.name)
        return None if extent is None or isinstance(expr, IndirectIndex) else (sympy.Integer(0), extent - 1)
    if expr.is_Add:
        parts = [index_bounds(a, extents) for a in expr.args]
        if any(p is None for p in parts):
            return None
        return sympy.Add(*(p[0] for p in parts)), sympy.Add(*(p[1] for p in parts))
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        if not coeff.is_Integer or rest.is_Mul:
            return None
        inner = index_bounds(rest, extents)
        if inner is None:
            return None
        low, high = coeff * inner[0], coeff * inner[1]
        return (low, high) if coeff >= 0 else (high, low)
    if isinstance(expr, (FloorDiv, Mod, sympy.Mod)):
        a, b = expr.args
        inner = index_bounds(a, extents)
        if inner is None or not (b.is_Integer and b > 0) or sympy.sympify(inner[0]).is_nonnegative is not True:
            return None
        if isinstance(expr, FloorDiv):
            return FloorDiv(inner[0], b), FloorDiv(inner[1], b)
        return sympy.Integer(0), b - 1
    return None


def _message(check: IndexCheck) -> str:
    return check.message.replace("{index}", "?").replace("{size}", "?").replace("{dim}", str(check.dim)).replace(
        '"', "'")


def uses_floordiv(expr: Any) -> bool:
    """Whether printing ``expr`` calls the integer floor-division or remainder helpers."""
    return any(isinstance(e, (FloorDiv, Mod, sympy.Mod, sympy.floor)) for e in sympy.preorder_traversal(expr))
