"""The element operations a loader may ask of an ops handler, and the handler that only
records what a loader reads.

Every handler answers the same calls (``ops.<name>(*handles)`` for the names in
``OP_ARITY``, plus ``load``, ``constant``, ``index_expr``, ``to_dtype``, ``indirect``,
``random``); what a handle is belongs to the handler: ``ReadsOps`` returns ``None`` for
everything and records the loads and the number of operations; the C++ handler returns
named temporaries. Lowerings insert every type conversion themselves (``to_dtype``), so a
handler never promotes.

The half types (``HALF_DTYPES``: bfloat16, float16) are storage types only: a handle of a
half value is a float32 one (``compute_type``). ``load`` of a half buffer gives the element
as float32, ``constant`` and ``to_dtype`` to a half type give float32 holding the value
rounded to that type (to nearest, ties to even), and a kernel rounds on store. So a chain of
inlined operations on half values runs in float32 with no rounding between them.

Indirect indexing (gather, embedding, advanced indexing): ``ops.indirect(handle, size,
check)`` turns a loaded integer into an ``IndirectIndex``, a symbol that index expressions may
use like a loop variable. The handler checks it against ``size`` (wrapping negative values
first when ``check.negative``); an element out of range is reported (``IndexCheck``: the
exception eager raises) and read as element 0, never out of bounds.

Random numbers (``_lower_random``): ``ops.random(distribution, offset, index, dtype)`` is
element ``index`` (a flat index) of the graph's random op number ``offset``, ``"uniform"`` in
[0, 1) or ``"normal"``, a function of the call's seed (``_ir.SEED``), ``offset`` and ``index``
only: the same wherever and however often it is computed. Both kernel headers (C++ and
Triton) define the same functions of Philox4x32-10 under the same names, so a kernel of
either language draws the same numbers; ``random_helper`` picks the function.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

__all__ = ["COMPARISONS", "HALF_DTYPES", "OP_ARITY", "IndexCheck", "IndirectIndex", "Read", "ReadsOps",
           "compute_type", "has_indirect", "random_helper"]

# name -> number of operands
OP_ARITY: dict[str, int] = {
    **dict.fromkeys((
        "neg", "abs", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos",
        "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "floor",
        "ceil", "trunc", "round", "sigmoid", "reciprocal", "sign", "logical_not", "bitwise_not", "isnan", "isinf",
        "signbit", "lgamma", "square"), 1),
    **dict.fromkeys((
        "add", "sub", "mul", "truediv", "pow", "maximum", "minimum", "atan2", "fmod_float", "remainder_float",
        "fmod_int", "remainder_int",
        "floordiv_float", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
        "bitwise_and", "bitwise_or", "bitwise_xor", "copysign", "hypot"), 2),
    "where": 3,
}
COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
HALF_DTYPES = frozenset({torch.bfloat16, torch.float16})


def compute_type(dtype: torch.dtype) -> torch.dtype:
    """The dtype of a handle of a ``dtype`` value: float32 for the half types, else ``dtype``."""
    return torch.float32 if dtype in HALF_DTYPES else dtype


_RANDOM_SUFFIX = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16", torch.float16: "fp16"}


def random_helper(distribution: str, dtype: torch.dtype) -> tuple[str, torch.dtype]:
    """The header function computing one ``distribution`` number (``"uniform"``, ``"normal"``)
    for a ``dtype`` value, called ``name(seed, offset, index)`` in both kernel languages (the
    C++ and Triton headers define the same names, with the same numbers), and the dtype it
    draws: ``dtype`` itself (a half type's value as its float, exact in the type), or float32
    for a half type's normal numbers, which the handler then rounds to ``dtype``."""
    drawn = dtype if distribution == "uniform" or dtype not in HALF_DTYPES else torch.float32
    name = "rand" if distribution == "uniform" else "randn"
    return f"kiln_{name}_{_RANDOM_SUFFIX[drawn]}", drawn


class IndirectIndex(sympy.Symbol):
    """An index loaded from a tensor (``ops.indirect``): a variable of the loop body, never a
    size; no two are assumed equal, and no read through one equals a store's index."""


@dataclass(frozen=True, slots=True)
class IndexCheck:
    """What eager raises for an index out of range: ``error`` (``IndexError`` or
    ``RuntimeError``) with ``message``, where ``{index}``, ``{dim}`` and ``{size}`` are
    filled in; ``negative``: a negative index counts from the end (advanced indexing)."""

    error: str
    message: str
    dim: int
    negative: bool = False
    size: Any = None  # the size checked against (set by the handler that checks)


def has_indirect(index: sympy.Expr) -> bool:
    return any(isinstance(s, IndirectIndex) for s in sympy.sympify(index).free_symbols)


@dataclass(frozen=True, slots=True)
class Read:
    name: str
    index: sympy.Expr


@dataclass(slots=True)
class ReadsOps:
    """Records the loads (buffer name and flat index) of the loaders it is given, and counts
    their operations."""

    reads: list[Read] = field(default_factory=list)
    count: int = 0
    _indirect: int = 0

    def indirect(self, x: Any, size: sympy.Expr, check: IndexCheck) -> sympy.Expr:
        self.count += 2
        self._indirect += 1
        return IndirectIndex(f"ind{self._indirect}", integer=True)

    def load(self, name: str, index: sympy.Expr, dtype: torch.dtype) -> None:
        self.reads.append(Read(name, index))

    def constant(self, value: Any, dtype: torch.dtype) -> None:
        return None

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> None:
        self.count += 1

    def to_dtype(self, x: Any, dtype: torch.dtype) -> None:
        return None

    def random(self, distribution: str, offset: int, index: sympy.Expr, dtype: torch.dtype) -> None:
        self.count += 1

    def __getattr__(self, name: str) -> Any:
        if name not in OP_ARITY:
            raise AttributeError(name)

        def op(*args: Any) -> None:
            self.count += 1

        return op
