"""Lowering rules: an ATen op to ``TensorValue``s (``lowering_rules``), and the helpers they
share (broadcasting, type conversion, scalar operands).

A rule is ``rule(ctx, node, *args, **kwargs)`` where tensor arguments arrive as
``TensorValue``s and everything else as traced (numbers, lists, dtypes); ``node`` is the ATen
node (``node.meta["val"]`` holds the traced result: its dtype and sizes are authoritative).
It returns a ``TensorValue`` or a tuple of them. A rule that cannot take its arguments
raises ``Fallback``: the node then runs as an ATen call (never an error).

Type conversions are explicit: a pointwise rule computes in one dtype (``compute_dtype``:
the traced result's for arithmetic, the promoted operand type for comparisons) and the
loaders convert each operand to it. Broadcasting follows torch (sizes aligned from the
right, a size 1 repeats).

Half types (bfloat16, float16) compute in float32 (``_ops.compute_type``): a value of a half
type has float32 handles, rounded to its type only where it is stored, converted
(``to_dtype``) or compared; so fused chains of half ops round once, as torch's Inductor
does (eager rounds after each op). Scalars of half arithmetic stay float32, as eager's
``opmath``; a comparison rounds its operands to the half type first, as eager compares.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import sympy
import torch

from ._ir import TensorValue, sym
from ._ops import HALF_DTYPES, compute_type
from ._policy import FusionPolicy

__all__ = ["Fallback", "LoweringContext", "broadcast", "converted", "lowering_rules", "nonzero", "pointwise", "register",
           "retype"]

aten = torch.ops.aten
lowering_rules: dict[Any, Callable[..., Any]] = {}

# dtypes the C++ kernels compute in (others fall back to ATen)
KERNEL_DTYPES = frozenset({torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32,
                           torch.int16, torch.int8, torch.uint8, torch.bool})
_FLOAT = frozenset({torch.float32, torch.float64, torch.bfloat16, torch.float16})


class Fallback(Exception):
    """This op (with these arguments) has no lowering: call ATen for it."""


class LoweringContext(Protocol):
    """What rules may ask of the graph being lowered (``_graph._Lowering`` answers): its
    ``policy`` (``FusionPolicy``), ``realize(value)`` (a value in memory, as a strided read of
    a buffer), ``reduction(...)`` (a new reduction buffer), ``storage_base(value)`` (the buffer
    a window reads and that buffer's offset in its storage, or None), ``fresh(value)`` (a new
    buffer of its own), ``scatter(...)`` (a step writing such a buffer at loaded places) and
    ``scan(...)`` (a new scan buffer), ``matmul(...)`` (a new matrix product buffer) and
    ``matmul_choice(...)`` (whether a product becomes one: ``_lower_matmul``), ``aten_call(...)``
    (an ATen call in the node's place, of another op: ``_lower_matmul``), ``hint(size)`` (a size's value on the example inputs,
    None where none decides it); ``language``: the code generator of the node being lowered
    (``"cpp"`` or ``"triton"``), for the rules whose kernels only C++ has."""

    policy: FusionPolicy
    language: str

    def realize(self, value: TensorValue) -> TensorValue: ...

    def hint(self, expr: sympy.Expr) -> int | None: ...

    def reduction(self, sizes: Sequence[sympy.Expr], dtype: torch.dtype, reduction_type: str,
                  reduced: Sequence[sympy.Expr], loader: Callable[..., Any], src_dtype: torch.dtype,
                  online: tuple[str, str] | None = None) -> TensorValue: ...

    def storage_base(self, value: TensorValue) -> tuple[str, sympy.Expr] | None: ...

    def fresh(self, value: TensorValue) -> TensorValue: ...

    def scatter(self, dest: TensorValue, sizes: Sequence[sympy.Expr], loader: Callable[..., Any],
                target: Callable[..., Any], mode: str | None) -> None: ...

    def scan(self, sizes: Sequence[sympy.Expr], dtype: torch.dtype, scan_type: str, dim: int,
             loader: Callable[..., Any], acc_dtype: torch.dtype) -> TensorValue: ...

    def matmul(self, sizes: Sequence[sympy.Expr], dtype: torch.dtype, body: Any) -> TensorValue: ...

    def matmul_choice(self, body: Any, sizes: tuple[sympy.Expr, ...], dtype: torch.dtype, epilogue: bool) -> bool: ...

    def aten_call(self, target: Any, node: Any, args: tuple, reason: str) -> Any: ...


def register(*ops: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def add(rule: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            lowering_rules[op] = rule
        return rule

    return add


def out_dtype(node: Any, item: int | None = None) -> torch.dtype:
    val = node.meta["val"]
    return (val[item] if item is not None else val).dtype


# ---------------------------------------------------------------- operands
def broadcast_sizes(*shapes: Sequence[sympy.Expr]) -> tuple[sympy.Expr, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    out: list[sympy.Expr] = []
    for d in range(ndim):
        size = sympy.Integer(1)
        for s in shapes:
            k = d - (ndim - len(s))
            if k < 0 or s[k] == 1:
                continue
            if size != 1 and size != s[k]:
                raise Fallback(f"sizes {size} and {s[k]} do not broadcast provably")
            size = s[k]
        out.append(size)
    return tuple(out)


def broadcast(value: TensorValue, sizes: Sequence[sympy.Expr]) -> TensorValue:
    """``value`` read as if expanded to ``sizes``."""
    sizes = tuple(sizes)
    if value.sizes == sizes:
        return value
    lead = len(sizes) - value.ndim
    keep = tuple(value.sizes[k] != 1 or sizes[lead + k] == 1 for k in range(value.ndim))
    load = value.loader

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        own = [index[lead + k] if keep[k] else sympy.Integer(0) for k in range(len(keep))]
        return load(own, ops)

    return TensorValue(sizes, value.dtype, loader, None, value.ops_count)


def scalar(value: Any, dtype: torch.dtype) -> TensorValue:
    """A number (or a SymInt, or a size expression) as a 0-dim value of ``dtype``."""
    if isinstance(value, (torch.SymInt, sympy.Basic)) and not (isinstance(value, sympy.Basic) and value.is_Float):
        expr = sym(value)

        def load_sym(index: Sequence[sympy.Expr], ops: Any) -> Any:
            return ops.to_dtype(ops.index_expr(expr, torch.int64), dtype)

        return TensorValue((), dtype, load_sym)
    if isinstance(value, sympy.Basic):
        value = float(value)
    if not isinstance(value, (bool, int, float)):
        raise Fallback(f"operand {value!r} is not a number")

    def load(index: Sequence[sympy.Expr], ops: Any) -> Any:
        return ops.constant(value, dtype)

    return TensorValue((), dtype, load)


def _operand(value: Any, dtype: torch.dtype) -> TensorValue:
    return value if isinstance(value, TensorValue) else scalar(value, dtype)


def compute_dtype(node: Any, args: Sequence[Any], comparison: bool) -> torch.dtype:
    """The dtype a pointwise op computes in: the traced result's, or for a comparison the
    operands' promoted type (torch's rules: a 0-dim tensor or a number does not raise a
    dimensioned tensor's category)."""
    if not comparison:
        return out_dtype(node)
    metas: list[Any] = []
    for a in args:
        if isinstance(a, TensorValue):
            metas.append(torch.empty((1,) * min(a.ndim, 1), dtype=a.dtype, device="meta"))
        elif isinstance(a, (torch.SymInt, torch.SymFloat)):
            metas.append(0 if isinstance(a, torch.SymInt) else 0.0)
        else:
            metas.append(a)
    if len(metas) == 1:
        return metas[0].dtype
    return torch.result_type(metas[0], metas[1])


def pointwise(node: Any, fn: Callable[..., Any], *args: Any, dtype: torch.dtype | None = None,
              comparison: bool = False, cost: int = 1) -> TensorValue:
    """The elementwise ``fn(ops, *handles)`` of ``args`` (values and numbers), broadcast,
    each operand converted to the compute dtype (``dtype``, else ``compute_dtype``; float32
    for a half type, some operands rounded to it first: ``_rounding``); a half result is
    rounded to its type in the register, as eager rounds each op."""
    traced = dtype or compute_dtype(node, args, comparison)
    result = torch.bool if comparison else (dtype if dtype is not None else out_dtype(node))
    for d in (result, traced):
        if d not in KERNEL_DTYPES:
            raise Fallback(f"dtype {d}")
    compute = compute_type(traced)
    operands = [_operand(a, traced if comparison else compute) for a in args]
    sizes = broadcast_sizes(*(o.sizes for o in operands))
    loaders = [broadcast(o, sizes).loader for o in operands]
    conversions = [(_rounding(o, traced, comparison), o.dtype) for o in operands]

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        handles = []
        for load, (rounding, d) in zip(loaders, conversions, strict=True):
            h = load(index, ops)
            if rounding is not None:
                h = ops.to_dtype(h, rounding)
            handles.append(h if d == compute else ops.to_dtype(h, compute))
        value = fn(ops, *handles)
        # a half result rounded as eager stores it: the same bits whether a reader computes it
        # inline or loads it from a buffer (an amin's gradient compares the recomputed value
        # with the saved minimum: a sigmoid inline in the forward and stored in the backward
        # made them differ, no element was the minimum, and the gradient was 0 / 0)
        return ops.to_dtype(value, result) if result in HALF_DTYPES else value

    return TensorValue(sizes, result, loader, None, cost + sum(o.ops_count for o in operands))


def _rounding(operand: TensorValue, traced: torch.dtype, comparison: bool) -> torch.dtype | None:
    """The half type ``operand`` is rounded to before an op computing in ``traced`` uses it,
    as eager holds it (None: none): a comparison's operands (a fused chain's value is not
    rounded yet), and a dimensioned operand of another type where ``traced`` is a half type
    (eager casts it to the common dtype; a 0-dim one of arithmetic it uses in float32, its
    ``opmath`` scalar)."""
    if traced in HALF_DTYPES and (comparison or (operand.ndim > 0 and operand.dtype != traced)):
        return traced
    if comparison and operand.dtype in HALF_DTYPES:
        return operand.dtype
    return None


def retype(value: TensorValue, dtype: torch.dtype) -> TensorValue:
    """``value``, computed in ``compute_type(dtype)``, as a value of ``dtype`` (a half type:
    rounded where stored or converted; each pointwise op rounds its own half result)."""
    if compute_type(dtype) != value.dtype:
        raise ValueError(f"a {value.dtype} value is not computed as {dtype} is")
    if dtype == value.dtype:
        return value
    return TensorValue(value.sizes, dtype, value.loader, None, value.ops_count)


# ---------------------------------------------------------------- pointwise rules
# the cost (``TensorValue.ops_count``) of a transcendental function, against 1 for an add: a
# value that calls one and has several readers is computed once into a buffer, not in each
# reader (rotary embeddings' cos and sin, read by the query's and the key's rotation)
EXPENSIVE = 8
_TRANSCENDENTAL = frozenset({"exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin",
                             "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
                             "sigmoid", "lgamma"})


def _unary(op: Any, name: str, floats_only: bool = True) -> None:
    cost = EXPENSIVE if name in _TRANSCENDENTAL else 1

    def rule(ctx: LoweringContext, node: Any, x: TensorValue) -> TensorValue:
        if floats_only and out_dtype(node) not in _FLOAT:
            raise Fallback(f"{name} of {out_dtype(node)}")
        return pointwise(node, lambda ops, a: getattr(ops, name)(a), x, cost=cost)

    lowering_rules[op] = rule


for _name in ("exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan",
              "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
              "sigmoid", "reciprocal", "lgamma", "round"):
    _unary(getattr(aten, _name).default, _name)
for _name in ("floor", "ceil", "trunc"):
    _unary(getattr(aten, _name).default, _name)  # integer inputs: ATen returns them unchanged
_unary(aten.neg.default, "neg", floats_only=False)
_unary(aten.abs.default, "abs", floats_only=False)
_unary(aten.sign.default, "sign", floats_only=False)
_unary(aten.bitwise_not.default, "bitwise_not", floats_only=False)


@register(aten.logical_not.default)
def _logical_not(ctx: LoweringContext, node: Any, x: TensorValue) -> TensorValue:
    return pointwise(node, lambda ops, a: ops.logical_not(a), x, dtype=torch.bool)


@register(aten.isnan.default, aten.isinf.default)
def _isnan(ctx: LoweringContext, node: Any, x: TensorValue) -> TensorValue:
    name = node.target.overloadpacket.__name__
    if x.dtype not in _FLOAT:
        raise Fallback(f"{name} of {x.dtype}")
    return pointwise(node, lambda ops, a: getattr(ops, name)(a), x, dtype=x.dtype, comparison=True)


def _binary(op: Any, name: str, comparison: bool = False, floats_only: bool = False) -> None:
    def rule(ctx: LoweringContext, node: Any, a: Any, b: Any) -> TensorValue:
        dtype = compute_dtype(node, (a, b), comparison)
        if floats_only and dtype not in _FLOAT:
            raise Fallback(f"{name} of {dtype}")
        return pointwise(node, lambda ops, x, y: getattr(ops, name)(x, y), a, b, dtype=dtype, comparison=comparison)

    lowering_rules[op] = rule


for _packet, _name in ((aten.mul, "mul"), (aten.maximum, "maximum"), (aten.minimum, "minimum")):
    for _overload in ("Tensor", "Scalar", "default"):
        if hasattr(_packet, _overload):
            _binary(getattr(_packet, _overload), _name)
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    for _overload in ("Tensor", "Scalar"):
        _binary(getattr(getattr(aten, _name), _overload), _name, comparison=True)
_binary(aten.atan2.default, "atan2", floats_only=True)
_binary(aten.hypot.default, "hypot", floats_only=True)
_binary(aten.copysign.Tensor, "copysign", floats_only=True)
_binary(aten.copysign.Scalar, "copysign", floats_only=True)
_binary(aten.fmod.Tensor, "fmod_float", floats_only=True)
_binary(aten.remainder.Tensor, "remainder_float", floats_only=True)


@register(aten.fmod.Scalar, aten.remainder.Scalar)
def _remainder_scalar(ctx: LoweringContext, node: Any, a: Any, b: Any) -> TensorValue:
    """``a % b`` (remainder: the divisor's sign, as Python's; fmod: the dividend's, as C's) by a
    number; for integers only by an integer other than 0 (eager raises) and -1 (the smallest
    integer's remainder would trap in C++)."""
    dtype = compute_dtype(node, (a, b), False)
    python = node.target is aten.remainder.Scalar
    if dtype in _FLOAT:
        name = "remainder_float" if python else "fmod_float"
    elif dtype != torch.bool and type(b) is int and b not in (0, -1):
        name = "remainder_int" if python else "fmod_int"
    else:
        raise Fallback(f"{node.target} of {dtype} by {b!r}")
    return pointwise(node, lambda ops, x, y: getattr(ops, name)(x, y), a, b, dtype=dtype)
for _packet, _name in ((aten.bitwise_and, "bitwise_and"), (aten.bitwise_or, "bitwise_or"),
                       (aten.bitwise_xor, "bitwise_xor")):
    _binary(_packet.Tensor, _name)
    _binary(_packet.Scalar, _name)


@register(aten.logical_and.default, aten.logical_or.default, aten.logical_xor.default)
def _logical(ctx: LoweringContext, node: Any, a: Any, b: Any) -> TensorValue:
    name = node.target.overloadpacket.__name__

    def fn(ops: Any, x: Any, y: Any) -> Any:
        return getattr(ops, name)(x, y)

    return pointwise(node, fn, _as_bool(a), _as_bool(b), dtype=torch.bool)


def _as_bool(x: Any) -> Any:
    if not isinstance(x, TensorValue) or x.dtype == torch.bool:
        return bool(x) if not isinstance(x, TensorValue) else x
    load = x.loader

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        return nonzero(ops, load(index, ops), x.dtype)

    return TensorValue(x.sizes, torch.bool, loader, None, x.ops_count + 1)


def nonzero(ops: Any, handle: Any, dtype: torch.dtype) -> Any:
    """Whether an element of ``dtype`` is not 0 (a half one as eager holds it: rounded)."""
    if dtype in HALF_DTYPES:
        handle = ops.to_dtype(handle, dtype)
    return ops.ne(handle, ops.constant(0, dtype))


@register(aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar)
def _add(ctx: LoweringContext, node: Any, a: Any, b: Any, alpha: Any = 1) -> TensorValue:
    name = node.target.overloadpacket.__name__
    if out_dtype(node) == torch.bool:
        raise Fallback("add of bools")
    if alpha != 1:
        b = _scaled(node, b, alpha)

    def fn(ops: Any, x: Any, y: Any) -> Any:
        return getattr(ops, name)(x, y)

    return pointwise(node, fn, a, b)


def _scaled(node: Any, b: Any, alpha: Any) -> Any:
    if not isinstance(b, TensorValue):
        return b * alpha
    dtype = out_dtype(node)
    return pointwise(node, lambda ops, x, y: ops.mul(x, y), b, alpha, dtype=dtype)


@register(aten.div.Tensor, aten.div.Scalar)
def _div(ctx: LoweringContext, node: Any, a: Any, b: Any) -> TensorValue:
    if out_dtype(node) not in _FLOAT:
        raise Fallback("integer division")
    return pointwise(node, lambda ops, x, y: ops.truediv(x, y), a, b)


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(ctx: LoweringContext, node: Any, a: Any, b: Any, *, rounding_mode: str | None = None) -> TensorValue:
    if out_dtype(node) not in _FLOAT:
        raise Fallback("integer division")
    if rounding_mode is None:
        return pointwise(node, lambda ops, x, y: ops.truediv(x, y), a, b)
    if rounding_mode == "trunc":
        return pointwise(node, lambda ops, x, y: ops.trunc(ops.truediv(x, y)), a, b, cost=2)
    return pointwise(node, lambda ops, x, y: ops.floordiv_float(x, y), a, b)


@register(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def _pow(ctx: LoweringContext, node: Any, a: Any, b: Any) -> TensorValue:
    if out_dtype(node) not in _FLOAT:
        raise Fallback("integer pow")
    if isinstance(a, TensorValue) and type(b) in (int, float) and b in _POW_SPECIAL:
        # the exponents ATen computes without pow (the same values; pow itself does not vectorize)
        return pointwise(node, _POW_SPECIAL[b], a, cost=2)
    return pointwise(node, lambda ops, x, y: ops.pow(x, y), a, b, cost=EXPENSIVE)


_POW_SPECIAL: dict[float, Callable[..., Any]] = {
    2: lambda ops, x: ops.mul(x, x),
    3: lambda ops, x: ops.mul(ops.mul(x, x), x),
    0.5: lambda ops, x: ops.sqrt(x),
    -0.5: lambda ops, x: ops.rsqrt(x),
    -1: lambda ops, x: ops.reciprocal(x),
    -2: lambda ops, x: ops.reciprocal(ops.mul(x, x)),
}


@register(aten.where.self)
def _where(ctx: LoweringContext, node: Any, cond: Any, a: Any, b: Any) -> TensorValue:
    dtype = out_dtype(node)
    cond = _as_bool(cond)
    operands = [_operand(cond, torch.bool), _operand(a, dtype), _operand(b, dtype)]
    sizes = broadcast_sizes(*(o.sizes for o in operands))
    c_load, a_load, b_load = (broadcast(o, sizes).loader for o in operands)
    a_dtype, b_dtype = operands[1].dtype, operands[2].dtype
    if dtype not in KERNEL_DTYPES:
        raise Fallback(f"dtype {dtype}")

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        x, y = a_load(index, ops), b_load(index, ops)
        x = x if a_dtype == dtype else ops.to_dtype(x, dtype)
        y = y if b_dtype == dtype else ops.to_dtype(y, dtype)
        return ops.where(c_load(index, ops), x, y)

    return TensorValue(sizes, dtype, loader, None, 1 + sum(o.ops_count for o in operands))


@register(aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default)
def _clamp(ctx: LoweringContext, node: Any, x: TensorValue, lo: Any = None, hi: Any = None) -> TensorValue:
    if node.target is aten.clamp_max.default:
        lo, hi = None, lo

    def fn(ops: Any, v: Any, *bounds: Any) -> Any:
        k = 0
        if lo is not None:
            v, k = ops.maximum(v, bounds[0]), 1
        if hi is not None:
            v = ops.minimum(v, bounds[k])
        return v

    return pointwise(node, fn, x, *(b for b in (lo, hi) if b is not None), cost=2)


@register(aten.relu.default)
def _relu(ctx: LoweringContext, node: Any, x: TensorValue) -> TensorValue:
    return pointwise(node, lambda ops, v, z: ops.maximum(v, z), x, 0)


@register(aten.leaky_relu.default)
def _leaky_relu(ctx: LoweringContext, node: Any, x: TensorValue, slope: float = 0.01) -> TensorValue:
    return pointwise(node, lambda ops, v, z, s: ops.where(ops.gt(v, z), v, ops.mul(v, s)), x, 0, slope, cost=3)


@register(aten.hardtanh.default)
def _hardtanh(ctx: LoweringContext, node: Any, x: TensorValue, lo: float = -1.0, hi: float = 1.0) -> TensorValue:
    return pointwise(node, lambda ops, v, a, b: ops.minimum(ops.maximum(v, a), b), x, lo, hi, cost=2)


@register(aten.silu.default)
def _silu(ctx: LoweringContext, node: Any, x: TensorValue) -> TensorValue:
    return pointwise(node, lambda ops, v: ops.mul(v, ops.sigmoid(v)), x, cost=3)


@register(aten.gelu.default)
def _gelu(ctx: LoweringContext, node: Any, x: TensorValue, *, approximate: str = "none") -> TensorValue:
    if out_dtype(node) not in _FLOAT:
        raise Fallback("gelu of integers")
    dtype = compute_type(out_dtype(node))

    def exact(ops: Any, v: Any) -> Any:
        c = ops.constant
        return ops.mul(ops.mul(v, c(0.5, dtype)), ops.add(c(1.0, dtype), ops.erf(ops.mul(v, c(math.sqrt(0.5), dtype)))))

    def tanh(ops: Any, v: Any) -> Any:
        c = ops.constant
        inner = ops.mul(c(math.sqrt(2 / math.pi), dtype), ops.add(v, ops.mul(c(0.044715, dtype), ops.mul(v, ops.mul(v, v)))))
        return ops.mul(ops.mul(v, c(0.5, dtype)), ops.add(c(1.0, dtype), ops.tanh(inner)))

    return pointwise(node, exact if approximate == "none" else tanh, x, cost=6)


@register(aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout, aten.to.device, aten.clone.default,
          aten.lift_fresh_copy.default, aten.alias.default, aten.detach.default, aten.lift_fresh.default)
def _copy(ctx: LoweringContext, node: Any, x: TensorValue, *args: Any, **kwargs: Any) -> TensorValue:
    dtype = out_dtype(node)
    val = node.meta["val"]
    if dtype not in KERNEL_DTYPES or x.dtype not in KERNEL_DTYPES:
        raise Fallback(f"copy to {val.device} {dtype}")
    if node.target in (aten.alias.default, aten.detach.default, aten.lift_fresh.default):
        return x  # the tensor itself
    copy = args[2] if len(args) > 2 else kwargs.get("copy", False)
    layout = args[3] if len(args) > 3 else kwargs.get("memory_format")
    if node.target is aten.to.dtype and dtype == x.dtype and not copy and layout is None:
        return x  # eager returns the tensor itself
    if dtype == x.dtype:
        return TensorValue(x.sizes, x.dtype, x.loader, None, x.ops_count)
    return converted(x, dtype)


def converted(x: TensorValue, dtype: torch.dtype) -> TensorValue:
    """``x``'s elements converted to ``dtype`` (as torch converts; ``x`` itself where it has it)."""
    if x.dtype == dtype:
        return x
    load = x.loader

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        return ops.to_dtype(load(index, ops), dtype)

    return TensorValue(x.sizes, dtype, loader, None, x.ops_count + 1)


@register(aten.conj_physical.default, aten.resolve_conj.default, aten.resolve_neg.default)
def _conj(ctx: LoweringContext, node: Any, x: TensorValue) -> TensorValue:
    """Of a real tensor: ``conj_physical`` a copy (eager returns the tensor itself, its schema
    a new one: either reads the same values), ``resolve_conj``/``resolve_neg`` the tensor."""
    if x.dtype.is_complex or x.dtype not in KERNEL_DTYPES:
        raise Fallback(f"{node.target} of {x.dtype}")
    if node.target is aten.conj_physical.default:
        return TensorValue(x.sizes, x.dtype, x.loader, None, x.ops_count)
    return x


@register(aten.full.default, aten.scalar_tensor.default)
def _full(ctx: LoweringContext, node: Any, size: Any, value: Any = None, **kwargs: Any) -> TensorValue:
    if node.target is aten.scalar_tensor.default:
        size, value = (), size
    val = node.meta["val"]
    if val.dtype not in KERNEL_DTYPES:
        raise Fallback(f"full of {val.dtype}")
    v = scalar(value, val.dtype)
    return TensorValue(tuple(sym(s) for s in size), val.dtype, lambda index, ops: v.loader((), ops))


@register(aten.full_like.default, aten.zeros_like.default, aten.ones_like.default)
def _full_like(ctx: LoweringContext, node: Any, x: TensorValue, value: Any = None, **kwargs: Any) -> TensorValue:
    if node.target is aten.zeros_like.default:
        value = 0
    elif node.target is aten.ones_like.default:
        value = 1
    val = node.meta["val"]
    if val.dtype not in KERNEL_DTYPES:
        raise Fallback(f"full_like of {val.dtype}")
    v = scalar(value, val.dtype)
    return TensorValue(x.sizes, val.dtype, lambda index, ops: v.loader((), ops))


@register(aten.contiguous.default)
def _contiguous(ctx: LoweringContext, node: Any, x: TensorValue, *, memory_format: Any = None) -> TensorValue:
    from ._ir import contiguous_strides

    if memory_format not in (None, torch.contiguous_format):
        raise Fallback(f"contiguous in {memory_format}")
    if x.view is not None and tuple(x.view[1]) == contiguous_strides(x.sizes):
        return x
    return ctx.realize(TensorValue(x.sizes, x.dtype, x.loader, None, x.ops_count))


@register(aten.copy.default)
def _copy_functional(ctx: LoweringContext, node: Any, dst: TensorValue, src: Any, non_blocking: bool = False) -> TensorValue:
    """``copy(dst, src)``: ``src`` broadcast to ``dst``'s sizes, in ``dst``'s dtype."""
    dtype = out_dtype(node)
    if dtype not in KERNEL_DTYPES or (isinstance(src, TensorValue) and src.dtype not in KERNEL_DTYPES):
        raise Fallback(f"copy to {dtype}")
    value = broadcast(src, dst.sizes) if isinstance(src, TensorValue) else scalar(src, dtype)
    load = value.loader

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        return ops.to_dtype(load(index, ops), dtype)

    return TensorValue(dst.sizes, dtype, loader, None, value.ops_count + 1)


@register(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(ctx: LoweringContext, node: Any, *args: Any, **kwargs: Any) -> TensorValue:
    """``start + step * i`` in the traced dtype (integer arguments only: a float step's
    rounding is ATen's to decide)."""
    numbers = [*args] + [1] * (3 - len(args)) if node.target is not aten.arange.default else [0, args[0], 1]
    start, _, step = numbers[:3]
    val = node.meta["val"]
    if val.dtype not in KERNEL_DTYPES:
        raise Fallback(f"arange of {val.dtype}")
    if not all(isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool) for v in (start, step)):
        raise Fallback("arange with float arguments")
    first, stride, dtype = sym(start), sym(step), val.dtype

    def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
        return ops.to_dtype(ops.index_expr(first + stride * index[0], torch.int64), dtype)

    return TensorValue((sym(val.shape[0]),), dtype, loader, None, 1)
