"""C++ for the element operations: the ops handler that writes one typed temporary per
operation (common subexpressions written once per loop body), the printer of sympy index
expressions, and the small header every kernel file starts with.

Temporaries are declared with their dtype's C++ type, never ``auto``: C++ would promote a
``bool * bool`` to ``int`` where torch keeps ``bool``. Half values are float temporaries
(``.._ops.compute_type``); the header converts them to and from their 16-bit storage.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

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
from .._printer import CPP

__all__ = ["CTYPES", "HEADER", "CppOps", "CppVar", "cconst", "cexpr", "cstore"]

# element types in memory (the half types' arithmetic is in float)
CTYPES: dict[torch.dtype, str] = {
    torch.float32: "float", torch.float64: "double", torch.int64: "int64_t", torch.int32: "int32_t",
    torch.int16: "int16_t", torch.int8: "int8_t", torch.uint8: "uint8_t", torch.bool: "bool",
    torch.bfloat16: "kiln_bf16", torch.float16: "kiln_fp16",
}
_HALF_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16"}

# No heavy headers: a kernel file compiles in a fraction of a second.
HEADER = r"""#include <cmath>
#include <cstdint>
#include <limits>
#include <algorithm>

// glibc's vector math (libmvec, linked where present): declaring the vector variants lets
// the compiler vectorize loops that call these functions (as glibc's own headers do under
// -ffast-math); each is within a few ulp, like the scalar ones.
#if defined(__GLIBC__) && defined(__x86_64__) && defined(KILN_LIBMVEC)
#define KILN_SIMD _Pragma("omp declare simd notinbranch")
extern "C" {
KILN_SIMD float expf(float);
KILN_SIMD double exp(double);
KILN_SIMD float logf(float);
KILN_SIMD double log(double);
KILN_SIMD float sinf(float);
KILN_SIMD double sin(double);
KILN_SIMD float cosf(float);
KILN_SIMD double cos(double);
KILN_SIMD float powf(float, float);
KILN_SIMD double pow(double, double);
#if __GLIBC_PREREQ(2, 35)
KILN_SIMD float acosf(float);
KILN_SIMD double acos(double);
KILN_SIMD float asinf(float);
KILN_SIMD double asin(double);
KILN_SIMD float atanf(float);
KILN_SIMD double atan(double);
KILN_SIMD float acoshf(float);
KILN_SIMD double acosh(double);
KILN_SIMD float asinhf(float);
KILN_SIMD double asinh(double);
KILN_SIMD float atanhf(float);
KILN_SIMD double atanh(double);
KILN_SIMD float coshf(float);
KILN_SIMD double cosh(double);
KILN_SIMD float sinhf(float);
KILN_SIMD double sinh(double);
KILN_SIMD float tanf(float);
KILN_SIMD double tan(double);
KILN_SIMD float tanhf(float);
KILN_SIMD double tanh(double);
KILN_SIMD float erff(float);
KILN_SIMD double erf(double);
KILN_SIMD float erfcf(float);
KILN_SIMD double erfc(double);
KILN_SIMD float exp2f(float);
KILN_SIMD double exp2(double);
KILN_SIMD float expm1f(float);
KILN_SIMD double expm1(double);
KILN_SIMD float log10f(float);
KILN_SIMD double log10(double);
KILN_SIMD float log1pf(float);
KILN_SIMD double log1p(double);
KILN_SIMD float log2f(float);
KILN_SIMD double log2(double);
KILN_SIMD float atan2f(float, float);
KILN_SIMD double atan2(double, double);
KILN_SIMD float hypotf(float, float);
KILN_SIMD double hypot(double, double);
#endif
}
#endif

// NaN-propagating, as torch.maximum and torch.minimum; selects, no branches, so loops calling
// them vectorize (relu is kiln_max(x, 0))
template <typename T> static inline T kiln_max(T a, T b) {
  T m = a < b ? b : a;
  m = b != b ? b : m;
  return a != a ? a : m;
}
template <typename T> static inline T kiln_min(T a, T b) {
  T m = b < a ? b : a;
  m = b != b ? b : m;
  return a != a ? a : m;
}
// an index out of range (gather, embedding, advanced indexing): the first one found is kept
// (which check, its value) for the wrapper to raise eager's error after the kernel
static inline void kiln_index_error(int64_t* err, int64_t check, int64_t value) {
  int64_t none = 0;
  if (__atomic_compare_exchange_n(&err[0], &none, check, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    __atomic_store_n(&err[1], value, __ATOMIC_RELAXED);
}
template <typename T> static inline T kiln_remainder(T a, T b) {  // Python's %, for floats
  T r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <typename T> static inline T kiln_iremainder(T a, T b) {  // Python's %, for integers (b != 0)
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
}
template <typename T> static inline T kiln_floordiv(T a, T b) {  // Python's //, for floats
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return std::copysign(T(0), a / b);
  T floored = std::floor(div);
  if (div - floored > T(0.5)) floored += 1;
  return floored;
}
static inline int64_t kiln_fdiv(int64_t a, int64_t b) {  // floor division of sizes; never traps
  if (b == 0) return 0;
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t kiln_pmod(int64_t a, int64_t b) {  // Python's %, of sizes; never traps
  if (b == 0) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
// exp for float, in a form the compiler vectorizes (no library call, no branch): exp(x) =
// 2^n * exp(r), n = round(x / ln 2) (by adding and subtracting 1.5 * 2^23), r = x - n ln 2
// (ln 2 in two parts, exact products), exp(r) by its Taylor polynomial to r^7 (|r| <= ln 2 / 2:
// truncation below 2e-8, relative), 2^n applied in two halves so results down to the
// subnormals stay exact; inf, -inf and NaN as std::exp. The polynomial's steps are fused
// multiply-adds where the ISA has them (kernels are built without contraction: -ffp-contract=off).
#ifdef __FMA__
#define KILN_FMAF(a, b, c) __builtin_fmaf(a, b, c)
#else
#define KILN_FMAF(a, b, c) ((a) * (b) + (c))
#endif
static inline float kiln_expf(float x) {
  float xc = x != x ? 0.0f : (x > 88.8f ? 88.8f : (x < -104.0f ? -104.0f : x));
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693145751953125f;
  r = r - n * 1.42860682030941723212e-6f;
  float p = 1.0f / 5040.0f;
  p = KILN_FMAF(p, r, 1.0f / 720.0f);
  p = KILN_FMAF(p, r, 1.0f / 120.0f);
  p = KILN_FMAF(p, r, 1.0f / 24.0f);
  p = KILN_FMAF(p, r, 1.0f / 6.0f);
  p = KILN_FMAF(p, r, 0.5f);
  p = KILN_FMAF(p, r, 1.0f);
  p = KILN_FMAF(p, r, 1.0f);
  int32_t k = static_cast<int32_t>(n);  // in [-150, 129]
  int32_t k1 = k >> 1;
  int32_t k2 = k - k1;
  float result = p * __builtin_bit_cast(float, (k1 + 127) << 23) * __builtin_bit_cast(float, (k2 + 127) << 23);
  result = x > 88.72283935546875f ? std::numeric_limits<float>::infinity() : result;
  result = x < -103.972076416015625f ? 0.0f : result;
  return x != x ? x : result;
}
template <typename T> static inline T kiln_sign(T a) {  // torch.sign: 0 for NaN and both zeros
  return T((T(0) < a) - (a < T(0)));
}
// Half-precision storage: kernels compute in float; an element is widened when loaded and
// rounded to nearest (ties to even) when stored. Integer bit arithmetic and one select per
// case, no branch and no intrinsic, so loops over them vectorize; nothing here meets a
// subnormal float operand except where flushing it would give the same result.
typedef uint16_t kiln_bf16;  // bfloat16: the high 16 bits of a float
typedef uint16_t kiln_fp16;  // IEEE binary16
static inline float kiln_bf16_to_float(kiln_bf16 h) {
  return __builtin_bit_cast(float, static_cast<uint32_t>(h) << 16);
}
static inline kiln_bf16 kiln_float_to_bf16(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // a carry may reach inf: right
  uint32_t nan = (u >> 16) | 0x40u;  // quiet, sign kept (a payload only in the low bits is lost)
  return static_cast<kiln_bf16>(f != f ? nan : rounded);
}
static inline float kiln_fp16_to_float(kiln_fp16 h) {
  uint32_t bits = static_cast<uint32_t>(h & 0x7fffu) << 13;  // exponent and mantissa in float's place
  uint32_t exponent = bits & 0x0f800000u;
  uint32_t normal = bits + (112u << 23);  // exponent bias 15 -> 127
  normal = exponent == 0x0f800000u ? normal + (112u << 23) : normal;  // inf, NaN: exponent 255
  // subnormal: (1 + m / 1024) * 2^-14 - 2^-14 = m * 2^-24, exact and a normal float
  float tiny = __builtin_bit_cast(float, bits + (113u << 23)) - __builtin_bit_cast(float, 113u << 23);
  uint32_t magnitude = exponent == 0 ? __builtin_bit_cast(uint32_t, tiny) : normal;
  return __builtin_bit_cast(float, magnitude | (static_cast<uint32_t>(h & 0x8000u) << 16));
}
static inline kiln_fp16 kiln_float_to_fp16(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  uint32_t a = u & 0x7fffffffu;
  uint32_t normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;  // rebias, round the 13 bits dropped
  // below 2^-14 the result is subnormal: adding 0.5 rounds |f| to a multiple of 2^-24 (float's
  // unit there), and the bits above 0.5's count those units
  uint32_t tiny = __builtin_bit_cast(uint32_t, __builtin_bit_cast(float, a) + 0.5f) - 0x3f000000u;
  uint32_t big = 0x7c00u | (static_cast<uint32_t>(a > 0x7f800000u) << 9);  // 2^16 and up: inf; NaN: quiet NaN
  uint32_t h = a < 0x38800000u ? tiny : normal;
  h = a >= 0x47800000u ? big : h;
  return static_cast<kiln_fp16>(h | ((u >> 16) & 0x8000u));
}
static inline float kiln_round_bf16(float f) { return kiln_bf16_to_float(kiln_float_to_bf16(f)); }
static inline float kiln_round_fp16(float f) { return kiln_fp16_to_float(kiln_float_to_fp16(f)); }
// Random numbers (inductor.random_in_kernels): Philox4x32-10 (Salmon, Moraes, Dror, Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11), a counter-based generator: the key
// is the call's seed, the counter an element's flat index and its op's number in the graph,
// so an element's numbers depend on nothing else (not on threads, loop order or fusion).
struct kiln_philox_block { uint32_t x0, x1, x2, x3; };
static inline kiln_philox_block kiln_philox(int64_t seed, int64_t offset, int64_t index) {
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(static_cast<uint64_t>(index) >> 32);
  uint32_t c2 = static_cast<uint32_t>(offset), c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(static_cast<uint64_t>(seed) >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;  // the key schedule: Weyl sequences (golden ratio, sqrt(3) - 1)
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}
// uniform in [0, 1) on the grid of the type's precision: every value exact in the type, none
// rounds up to 1 (24 bits for float, 53 for double, 8 for bfloat16, 11 for float16)
static inline float kiln_rand_f32(int64_t seed, int64_t offset, int64_t index) {
  return static_cast<float>(kiln_philox(seed, offset, index).x0 >> 8) * 0x1p-24f;
}
static inline double kiln_rand_f64(int64_t seed, int64_t offset, int64_t index) {
  kiln_philox_block r = kiln_philox(seed, offset, index);
  return static_cast<double>(((static_cast<uint64_t>(r.x0) << 32) | r.x1) >> 11) * 0x1p-53;
}
static inline float kiln_rand_bf16(int64_t seed, int64_t offset, int64_t index) {
  return static_cast<float>(kiln_philox(seed, offset, index).x0 >> 24) * 0x1p-8f;
}
static inline float kiln_rand_fp16(int64_t seed, int64_t offset, int64_t index) {
  return static_cast<float>(kiln_philox(seed, offset, index).x0 >> 21) * 0x1p-11f;
}
// standard normal by Box-Muller: sqrt(-2 log u1) cos(2 pi u2), u1 in (0, 1], u2 in [0, 1) (the C
// functions: libmvec's vector variants are declared for them, and kernels' std:: calls stay theirs)
static inline float kiln_randn_f32(int64_t seed, int64_t offset, int64_t index) {
  kiln_philox_block r = kiln_philox(seed, offset, index);
  float u1 = static_cast<float>((r.x0 >> 8) + 1) * 0x1p-24f;
  float u2 = static_cast<float>(r.x1 >> 8) * 0x1p-24f;
  return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}
static inline double kiln_randn_f64(int64_t seed, int64_t offset, int64_t index) {
  kiln_philox_block r = kiln_philox(seed, offset, index);
  double u1 = static_cast<double>((((static_cast<uint64_t>(r.x0) << 32) | r.x1) >> 11) + 1) * 0x1p-53;
  double u2 = static_cast<double>(((static_cast<uint64_t>(r.x2) << 32) | r.x3) >> 11) * 0x1p-53;
  return sqrt(-2.0 * log(u1)) * cos(6.28318530717958647692 * u2);
}
"""

_UNARY = {
    "neg": "-({a})", "abs": "std::abs({a})", "exp": "std::exp({a})", "exp2": "std::exp2({a})",
    "expm1": "std::expm1({a})", "log": "std::log({a})", "log1p": "std::log1p({a})", "log2": "std::log2({a})",
    "log10": "std::log10({a})", "sqrt": "std::sqrt({a})", "rsqrt": "({T}(1) / std::sqrt({a}))",
    "sin": "std::sin({a})", "cos": "std::cos({a})", "tan": "std::tan({a})", "asin": "std::asin({a})",
    "acos": "std::acos({a})", "atan": "std::atan({a})", "sinh": "std::sinh({a})", "cosh": "std::cosh({a})",
    "tanh": "std::tanh({a})", "asinh": "std::asinh({a})", "acosh": "std::acosh({a})", "atanh": "std::atanh({a})",
    "erf": "std::erf({a})", "erfc": "std::erfc({a})", "floor": "std::floor({a})", "ceil": "std::ceil({a})",
    "trunc": "std::trunc({a})", "round": "std::nearbyint({a})",
    "sigmoid": "({T}(1) / ({T}(1) + std::exp(-({a}))))", "reciprocal": "({T}(1) / {a})",
    "sign": "kiln_sign<{T}>({a})", "logical_not": "(!{a})", "bitwise_not": "(~{a})", "isnan": "std::isnan({a})",
    "isinf": "std::isinf({a})", "signbit": "std::signbit({a})", "lgamma": "std::lgamma({a})",
    "square": "({a} * {a})",
}
_BINARY = {
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "truediv": "({a} / {b})",
    "pow": "std::pow({a}, {b})", "maximum": "kiln_max<{T}>({a}, {b})", "minimum": "kiln_min<{T}>({a}, {b})",
    "atan2": "std::atan2({a}, {b})", "fmod_float": "std::fmod({a}, {b})",
    "remainder_float": "kiln_remainder<{T}>({a}, {b})", "fmod_int": "({a} % {b})",
    "remainder_int": "kiln_iremainder<{T}>({a}, {b})", "floordiv_float": "kiln_floordiv<{T}>({a}, {b})",
    "eq": "({a} == {b})", "ne": "({a} != {b})", "lt": "({a} < {b})", "le": "({a} <= {b})", "gt": "({a} > {b})",
    "ge": "({a} >= {b})", "logical_and": "({a} && {b})", "logical_or": "({a} || {b})",
    "logical_xor": "({a} != {b})", "bitwise_and": "({a} & {b})", "bitwise_or": "({a} | {b})",
    "bitwise_xor": "({a} ^ {b})", "copysign": "std::copysign({a}, {b})", "hypot": "std::hypot({a}, {b})",
}
_BOOL_RESULT = COMPARISONS | {"logical_not", "isnan", "isinf", "signbit", "logical_and", "logical_or",
                              "logical_xor"}


def cconst(value: Any, dtype: torch.dtype) -> str:
    ctype = CTYPES[dtype]
    if dtype == torch.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        value = float(value)
        if math.isnan(value):
            return f"std::numeric_limits<{ctype}>::quiet_NaN()"
        if math.isinf(value):
            return f"{'-' if value < 0 else ''}std::numeric_limits<{ctype}>::infinity()"
        return f"{ctype}({value!r})"
    return f"{ctype}({int(value)}LL)" if abs(int(value)) >= 2**31 else f"{ctype}({int(value)})"


def cstore(value: str, dtype: torch.dtype) -> str:
    """The C++ expression storing ``value`` (a temporary of ``compute_type(dtype)``) as an
    element of ``dtype``: a half type is rounded to its 16 bits, others are stored as they are."""
    return f"kiln_float_to_{_HALF_NAMES[dtype]}({value})" if dtype in HALF_DTYPES else value


def _half_value(value: Any, dtype: torch.dtype) -> float:
    """A number rounded to ``dtype`` (through float32, as torch converts a scalar)."""
    return torch.tensor(float(value), dtype=torch.float32).to(dtype).item()


def cexpr(expr: sympy.Expr) -> str:
    """An integer index expression as C++ (``_printer.CPP``)."""
    return CPP(expr)


@dataclass(frozen=True, slots=True)
class CppVar:
    """A temporary; ``half``: the half type whose value this float temporary holds exactly
    (a load or a rounding), so converting it to that type again is no operation."""

    name: str
    dtype: torch.dtype
    half: torch.dtype | None = None


@dataclass(slots=True)
class CppOps:
    """Writes ``lines`` of one loop body; ``locals`` maps buffers held in registers (a
    reduction's result inside its kernel) to their variable."""

    lines: list[str] = field(default_factory=list)
    locals: dict[str, CppVar] = field(default_factory=dict)
    reads: set[str] = field(default_factory=set)  # buffers loaded from memory
    symbols: set[sympy.Symbol] = field(default_factory=set)  # every symbol of an index
    checks: list[IndexCheck] = field(default_factory=list)  # the kernel's index checks (shared list)
    _cse: dict[str, CppVar] = field(default_factory=dict)
    _counter: list[int] = field(default_factory=lambda: [0])

    def indirect(self, x: CppVar, size: sympy.Expr, check: IndexCheck) -> sympy.Expr:
        """``x`` as an index below ``size`` (negative ones wrapped when the check says so); one
        out of range is reported through ``kiln_error`` (check number ``len(checks)``, its
        value) and read as 0."""
        bound = cexpr(size)
        self.symbols.update(sympy.sympify(size).free_symbols)
        value = self._emit(f"static_cast<int64_t>({x.name})", torch.int64)
        if check.negative:
            value = self._emit(f"({value.name} < 0 ? {value.name} + {bound} : {value.name})", torch.int64)
        self.checks.append(dataclasses.replace(check, size=size))
        inside = f"static_cast<uint64_t>({value.name}) < static_cast<uint64_t>({bound})"
        self.lines.append(f"if (!({inside})) kiln_index_error(kiln_error, {len(self.checks)}, {x.name});")
        safe = self._emit(f"({inside} ? {value.name} : int64_t(0))", torch.int64)
        return IndirectIndex(safe.name, integer=True)

    def _emit(self, code: str, dtype: torch.dtype, half: torch.dtype | None = None) -> CppVar:
        found = self._cse.get(code)
        if found is not None and found.dtype == dtype:
            return found
        var = CppVar(f"tmp{self._counter[0]}", dtype, half)
        self._counter[0] += 1
        self.lines.append(f"{CTYPES[dtype]} {var.name} = {code};")
        self._cse[code] = var
        return var

    def load(self, name: str, index: sympy.Expr, dtype: torch.dtype) -> CppVar:
        local = self.locals.get(name)
        if local is not None:
            return local
        self.reads.add(name)
        self.symbols.update(v for v in sympy.sympify(index).free_symbols if not isinstance(v, IndirectIndex))
        element = f"{name}[{cexpr(index)}]"
        if dtype in HALF_DTYPES:
            return self._emit(f"kiln_{_HALF_NAMES[dtype]}_to_float({element})", torch.float32, dtype)
        return self._emit(element, dtype)

    def constant(self, value: Any, dtype: torch.dtype) -> CppVar:
        if dtype in HALF_DTYPES:
            return self._emit(cconst(_half_value(value, dtype), torch.float32), torch.float32, dtype)
        return self._emit(cconst(value, dtype), dtype)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> CppVar:
        if dtype in HALF_DTYPES:
            return self.to_dtype(self.index_expr(expr, torch.int64), dtype)
        self.symbols.update(v for v in sympy.sympify(expr).free_symbols if not isinstance(v, IndirectIndex))
        return self._emit(f"static_cast<{CTYPES[dtype]}>({cexpr(expr)})", dtype)

    def to_dtype(self, x: CppVar, dtype: torch.dtype) -> CppVar:
        if dtype in HALF_DTYPES:
            if x.half == dtype:
                return x
            # from any type through float, as torch converts (a double is rounded twice)
            f = self.to_dtype(x, torch.float32)
            return self._emit(f"kiln_round_{_HALF_NAMES[dtype]}({f.name})", torch.float32, dtype)
        if x.dtype == dtype:
            return x
        return self._emit(f"static_cast<{CTYPES[dtype]}>({x.name})", dtype)

    def random(self, distribution: str, offset: int, index: sympy.Expr, dtype: torch.dtype) -> CppVar:
        """Element ``index`` of the graph's random op number ``offset`` (``"uniform"`` or
        ``"normal"``), from the kernel's seed argument (``SEED``): a value of ``dtype`` (a half
        type's: its float, rounded to it)."""
        self.symbols.add(SEED)
        self.symbols.update(v for v in sympy.sympify(index).free_symbols if not isinstance(v, IndirectIndex))
        helper, drawn = random_helper(distribution, dtype)  # a half normal is drawn as float, then rounded
        value = self._emit(f"{helper}({SEED.name}, {offset}, {cexpr(index)})", compute_type(drawn),
                           drawn if drawn in HALF_DTYPES else None)
        return self.to_dtype(value, dtype)

    def where(self, c: CppVar, a: CppVar, b: CppVar) -> CppVar:
        half = a.half if a.half == b.half else None
        return self._emit(f"({c.name} ? {a.name} : {b.name})", a.dtype, half)

    def __getattr__(self, name: str) -> Any:
        arity = OP_ARITY.get(name)
        if arity is None:
            raise AttributeError(name)
        template = _UNARY.get(name) if arity == 1 else _BINARY.get(name)
        if template is None:
            raise AttributeError(name)

        def op(*args: CppVar) -> CppVar:
            dtype = torch.bool if name in _BOOL_RESULT else args[0].dtype
            if name == "exp" and dtype == torch.float32:
                return self._emit(f"kiln_expf({args[0].name})", dtype)
            if name == "bitwise_not" and dtype == torch.bool:
                return self._emit(f"(!{args[0].name})", dtype)
            fields = {"a": args[0].name, "T": CTYPES[args[0].dtype]}
            if arity == 2:
                fields["b"] = args[1].name
            return self._emit(template.format(**fields), dtype)

        return op
