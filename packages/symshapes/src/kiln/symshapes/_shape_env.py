"""ShapeEnv: the owner of every symbol, its example value, its range and its source.

A ShapeEnv creates symbols for sizes (``s0, s1, ...``), floats (``zf0``) and data-dependent
values (``u0``, ``zuf0``); it answers decisions on symbolic expressions, recording each
decision that the value ranges cannot settle as a guard; it learns from those guards
(replacements, tighter ranges, divisibility) and finally produces the simplified guard set
together with the binding of each symbol to its source.

Invariants:
- Every backed symbol has a hint (its example value) that satisfies every recorded guard;
  unbacked symbols have none and any decision that needs one raises
  ``GuardOnDataDependentError``.
- Knowledge only grows: replacements, ranges and divisibility never get weaker, so a decision
  made once stays valid and may be cached.
- ``replacements`` is kept fully resolved: no replacement's value mentions a replaced symbol.
- Every source given to ``create_symbol`` gets its own symbol; duck sizing and 0/1
  specialization are replacements of that symbol, so ``produce_guards`` turns them into
  plain equalities (``s1 == s0``, ``s2 == 1``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import sympy

from kiln.symshapes._config import ShapeEnvConfig
from kiln.symshapes._errors import GuardOnDataDependentError
from kiln.symshapes._functions import FloorDiv
from kiln.symshapes._guards import ProducedGuards, ShapeGuard, learn_facts
from kiln.symshapes._sym_ops import is_boolean_expr
from kiln.symshapes._value_ranges import (
    ValueRange,
    bound,
    decide,
    decide_by_shift,
    simplify_with_ranges,
)

if TYPE_CHECKING:
    from kiln.symshapes._symbolic import SymFloat, SymInt

__all__ = ["ShapeEnv"]

_MISSING = object()
_SIZE_RANGE = ValueRange(0, math.inf)
_DYNAMIC_SIZE_RANGE = ValueRange(2, math.inf)
_OBLIVIOUS_SIZE_RANGE = ValueRange(1, math.inf)  # config.oblivious_one: only 0 specialized


def _py_value(expr: sympy.Basic) -> int | float | bool:
    if expr is sympy.true:
        return True
    if expr is sympy.false:
        return False
    if expr.is_Integer:
        return int(expr)
    if expr.is_Number:
        return float(expr)
    raise TypeError(f"{expr} is not a constant")


def _is_constant(expr: sympy.Basic) -> bool:
    return expr.is_Number or expr is sympy.true or expr is sympy.false


class ShapeEnv:
    """Symbols, their example values and ranges, recorded guards and learned facts."""

    def __init__(self, config: ShapeEnvConfig | None = None) -> None:
        self.config = config or ShapeEnvConfig()
        self._counters = {"s": 0, "zf": 0, "u": 0, "zuf": 0}
        self._order: dict[sympy.Symbol, int] = {}
        self._hints: dict[sympy.Symbol, int | float] = {}
        self._hint_atoms: dict[sympy.Symbol, sympy.Basic] = {}
        self._ranges: dict[sympy.Symbol, ValueRange] = {}
        self._sources: dict[sympy.Symbol, object] = {}
        self._size_like: set[sympy.Symbol] = set()
        self._unbacked: set[sympy.Symbol] = set()
        self._replacements: dict[sympy.Symbol, sympy.Expr] = {}
        # symbol -> the replaced symbols whose value mentions it (to resolve them when it is
        # replaced in turn, without scanning every replacement)
        self._mentioned_by: dict[sympy.Symbol, set[sympy.Symbol]] = {}
        self._divisible: dict[sympy.Expr, sympy.Expr] = {}
        self._guards: list[ShapeGuard] = []
        self._runtime_asserts: list[ShapeGuard] = []
        self._duck: dict[int, sympy.Symbol] = {}
        self._simplified: dict[sympy.Basic, sympy.Basic] = {}
        self._decided: dict[tuple[sympy.Basic, bool], bool | None] = {}
        self._oblivious_ranges: dict[sympy.Symbol, ValueRange] | None = None
        self._undecided_at: dict[tuple[sympy.Basic, bool], int] = {}
        self._hint_cache: dict[sympy.Basic, int | float | bool] = {}
        self._facts: dict[sympy.Basic, bool] = {}
        self._dynamic: set[sympy.Symbol] = set()
        # backed dynamic sizes that may be 1 (config.oblivious_one): size-oblivious decisions
        # count them as >= 2, and guard_or answers its default on them without a guard
        self._oblivious: set[sympy.Symbol] = set()
        self._against_hint = 0  # guard_or answers that contradicted the example values
        self._hint_decisions = 0  # > 0: guard_or decides by the example values (a retry)
        self._version = 0

    # ----------------------------------------------------------------- symbols
    def _new_symbol(self, prefix: str, **assumptions: bool) -> sympy.Symbol:
        index = self._counters[prefix]
        self._counters[prefix] = index + 1
        sym = sympy.Symbol(f"{prefix}{index}", **assumptions)
        self._order[sym] = len(self._order)
        return sym

    def create_symbol(
        self,
        hint: int,
        source: object = None,
        *,
        dynamic: bool = True,
        size_like: bool = True,
        min: int | None = None,
        max: int | None = None,
    ) -> sympy.Expr:
        """Create the symbol for an integer whose example value is ``hint``.

        Takes the caller's ``source`` (any hashable object, returned by ``produce_guards``),
        whether the value may vary (``dynamic=False`` specializes it), whether it is a size
        (ranges over ``[0, inf)``, 0/1 specialized, duck-sized) and an optional range.
        Returns a sympy Symbol, or an Integer when the value was specialized; a duck-sized
        value returns the symbol it shares.
        """
        if isinstance(hint, bool) or not isinstance(hint, int):
            raise TypeError(f"hint must be an int, got {type(hint).__name__}")
        sym = self._new_symbol("s", integer=True, nonnegative=True) if size_like else self._new_symbol("s", integer=True)
        self._hints[sym] = hint
        self._hint_atoms[sym] = sympy.Integer(hint)
        if source is not None:
            self._sources[sym] = source
        value_range = _SIZE_RANGE if size_like else ValueRange.full()
        explicit = min is not None or max is not None
        if explicit:
            value_range = value_range.intersect(ValueRange(-math.inf if min is None else min, math.inf if max is None else max))
            if not value_range.contains(hint):
                raise ValueError(f"hint {hint} is outside the range {value_range}")
        small = (0,) if self.config.oblivious_one else (0, 1)
        specialize = not dynamic or (self.config.specialize_zero_one and hint in small and not explicit)
        if specialize:
            self._ranges[sym] = ValueRange.point(hint)
            self._add_replacement(sym, sympy.Integer(hint))
            return sympy.Integer(hint)
        self._dynamic.add(sym)
        if size_like:
            self._size_like.add(sym)
            if self.config.specialize_zero_one and not explicit:
                value_range = _OBLIVIOUS_SIZE_RANGE if self.config.oblivious_one else _DYNAMIC_SIZE_RANGE
            if self.config.oblivious_one and value_range.lower < 2 <= value_range.upper:
                self._oblivious.add(sym)
                self._oblivious_ranges = None
        self._ranges[sym] = value_range
        if size_like and self.config.duck_shape and not explicit:
            shared = self._duck.get(hint)
            if shared is not None:
                self._add_replacement(sym, shared)
                return self.simplify(shared)
            self._duck[hint] = sym
        return sym

    def create_symint(self, hint: int, source: object = None, **options: object) -> SymInt | int:
        """``create_symbol`` wrapped as a ``SymInt`` (an ``int`` when specialized)."""
        from kiln.symshapes._symbolic import wrap

        return wrap(self.create_symbol(hint, source, **options), hint, "int", self)

    def create_symfloat(self, hint: float, source: object = None) -> SymFloat:
        """A float symbol (``zf<n>``) with example value ``hint``; floats are never specialized."""
        from kiln.symshapes._symbolic import SymFloat

        sym = self._new_symbol("zf", real=True)
        self._hints[sym] = float(hint)
        self._hint_atoms[sym] = sympy.Float(float(hint))
        self._ranges[sym] = ValueRange.full()
        if source is not None:
            self._sources[sym] = source
        return SymFloat(sym, self, float(hint))

    def create_unbacked_symbol(
        self, kind: str = "int", *, size_like: bool = False, min: int | None = None, max: int | None = None
    ) -> sympy.Symbol:
        """A data-dependent symbol (``u<n>`` for ints, ``zuf<n>`` for floats) with no hint."""
        if kind == "float":
            sym = self._new_symbol("zuf", real=True)
            value_range = ValueRange.full()
        else:
            sym = self._new_symbol("u", integer=True)
            value_range = _SIZE_RANGE if size_like else ValueRange.full()
            if size_like:
                self._size_like.add(sym)
        if min is not None or max is not None:
            value_range = value_range.intersect(ValueRange(-math.inf if min is None else min, math.inf if max is None else max))
        self._ranges[sym] = value_range
        self._unbacked.add(sym)
        self._oblivious_ranges = None
        return sym

    def create_unbacked_symint(self, *, size_like: bool = False, min: int | None = None, max: int | None = None) -> SymInt:
        """``create_unbacked_symbol`` wrapped as a ``SymInt`` (its hint is None)."""
        from kiln.symshapes._symbolic import SymInt

        return SymInt(self.create_unbacked_symbol("int", size_like=size_like, min=min, max=max), self, None)

    def mark_size_like(self, sym: sympy.Symbol) -> None:
        """Declare an unbacked symbol a size: ``>= 0``, and ``>= 2`` for size-oblivious
        decisions (what ``torch._check_is_size`` asks for)."""
        if sym in self._unbacked and sym not in self._size_like:
            self._size_like.add(sym)
            r = self.range_of(sym)
            self._set_range(sym, ValueRange(max(r.lower, 0), r.upper))

    def constrain_range(self, sym: sympy.Symbol, min: int | None = None, max: int | None = None) -> None:
        """Narrow ``sym``'s range to ``[min, max]`` (a user assertion, not a guard)."""
        sym = self.simplify(sym)
        if not isinstance(sym, sympy.Symbol):
            return
        narrowed = ValueRange(-math.inf if min is None else min, math.inf if max is None else max)
        self._set_range(sym, self.range_of(sym).intersect(narrowed))

    # ----------------------------------------------------------------- queries
    @property
    def symbols(self) -> tuple[sympy.Symbol, ...]:
        """Every symbol created so far, in creation order."""
        return tuple(self._order)

    @property
    def replacements(self) -> dict[sympy.Symbol, sympy.Expr]:
        return dict(self._replacements)

    @property
    def guards(self) -> tuple[ShapeGuard, ...]:
        """The guards recorded so far, as recorded (not simplified)."""
        return tuple(self._guards)

    @property
    def runtime_asserts(self) -> tuple[ShapeGuard, ...]:
        """Assumptions made about unbacked symbols (``expect_true`` and similar)."""
        return tuple(self._runtime_asserts)

    def source_of(self, sym: sympy.Symbol) -> object:
        return self._sources.get(sym)

    def hint_of(self, sym: sympy.Symbol) -> int | float | None:
        return self._hints.get(sym)

    def is_unbacked(self, sym: sympy.Symbol) -> bool:
        return sym in self._unbacked

    def is_dynamic(self, sym: sympy.Symbol) -> bool:
        """Whether ``sym`` was created dynamic (a later specialization keeps it so)."""
        return sym in self._dynamic

    def is_size_like(self, sym: sympy.Symbol) -> bool:
        return sym in self._size_like

    def range_of(self, sym: sympy.Symbol) -> ValueRange:
        return self._ranges.get(sym, ValueRange.full())

    def simplify(self, expr: sympy.Basic) -> sympy.Basic:
        """Apply every replacement and divisibility fact learned so far, and drop the
        ``Min``/``Max``/``Mod``/``FloorDiv`` that the value ranges make trivial."""
        if not isinstance(expr, sympy.Basic) or expr.is_Number:
            return expr
        cached = self._simplified.get(expr)
        if cached is not None:
            return cached
        result = expr.xreplace(self._replacements) if self._replacements else expr
        if self._divisible:
            result = result.xreplace(self._divisible)
        result = simplify_with_ranges(result, self._ranges)
        self._simplified[expr] = result
        return result

    def bound(self, expr: sympy.Basic) -> ValueRange:
        """The value range of ``expr`` under the current knowledge."""
        return bound(self.simplify(expr), self._ranges)

    def _size_oblivious_ranges(self) -> dict[sympy.Symbol, ValueRange]:
        if self._oblivious_ranges is None:
            ranges = dict(self._ranges)
            for sym in (self._unbacked & self._size_like) | self._oblivious:
                r = ranges[sym]
                ranges[sym] = ValueRange(max(r.lower, 2), max(r.upper, 2))
            self._oblivious_ranges = ranges
        return self._oblivious_ranges

    def statically_known(self, expr: sympy.Basic, *, size_oblivious: bool = False) -> bool | None:
        """True/False when the current facts decide the boolean ``expr``, else None."""
        expr = self.simplify(expr)
        if expr is sympy.true or expr is sympy.false:
            return expr is sympy.true
        fact = self._facts.get(expr)
        if fact is not None:
            return fact
        key = (expr, size_oblivious)
        known = self._decided.get(key, _MISSING)
        if known is not _MISSING and (known is not None or self._undecided_at.get(key) == self._version):
            return known
        ranges = self._size_oblivious_ranges() if size_oblivious else self._ranges
        # simplify() already applied the ranges; the size-oblivious ones can drop more
        refined = simplify_with_ranges(expr, ranges) if size_oblivious else expr
        if refined is sympy.true or refined is sympy.false:
            result = refined is sympy.true
        else:
            result = decide(refined, ranges)
            if result is None:
                result = decide_by_shift(refined, ranges)
        self._decided[key] = result
        if result is None:
            # Undecided stays undecided until a fact is learned (the version moves on).
            self._undecided_at[key] = self._version
        return result

    def size_hint(self, expr: sympy.Basic | int, *, fallback: int | None = None) -> int | float | bool | None:
        """``expr`` evaluated on the example values; unbacked symbols use ``fallback``
        (None when no fallback is given and an unbacked symbol appears)."""
        if not isinstance(expr, sympy.Basic):
            return expr
        cached = self._hint_cache.get(expr)
        if cached is not None:
            return cached
        original = expr
        expr = self.simplify(expr)
        if _is_constant(expr):
            return _py_value(expr)
        binding = {}
        for sym in expr.free_symbols:
            atom = self._hint_atoms.get(sym)
            if atom is None:
                if fallback is None:
                    return None
                atom = sympy.Integer(fallback)
            binding[sym] = atom
        value = _py_value(expr.xreplace(binding))
        if all(s in self._hint_atoms for s in binding):
            self._hint_cache[original] = value  # backed hints never change
        return value

    # ----------------------------------------------------------------- decisions
    def evaluate(self, expr: sympy.Basic, hint: object = None, *, size_oblivious: bool = False, origin: str = "") -> int | float | bool:
        """Decide ``expr`` (a Boolean, or an int/float expression) and return its value.

        Booleans first try the value ranges (size-oblivious: unbacked sizes count as >= 2);
        when those do not settle it, the example value decides and the oriented relation is
        recorded as a guard. Numeric expressions are specialized to their example value with
        an equality guard. ``hint`` saves recomputing the example value. Raises
        ``GuardOnDataDependentError`` when only an unbacked symbol's value could decide.
        """
        simplified = self.simplify(expr)
        if _is_constant(simplified):
            return _py_value(simplified)
        is_boolean = is_boolean_expr(simplified)
        if is_boolean:
            static = self.statically_known(simplified, size_oblivious=size_oblivious)
            if static is not None:
                return static
        value = self.size_hint(simplified) if hint is None else hint
        if value is None:
            raise GuardOnDataDependentError(simplified, origin)
        if is_boolean:
            guard = simplified if value else sympy.Not(simplified)
        else:
            guard = sympy.Eq(simplified, value)
        self._record(guard, origin)
        return value

    def expect_true(self, expr: sympy.Basic, *, origin: str = "") -> bool:
        """Assume the boolean ``expr`` holds: a guard when the example values can check it
        (they must satisfy it), else a runtime assertion about unbacked symbols."""
        simplified = self.simplify(expr)
        static = self.statically_known(simplified)
        if static is not None:
            return static
        if self.size_hint(simplified) is None:
            self._runtime_asserts.append(ShapeGuard(simplified, origin))
            self._learn(simplified)
            self._remember(simplified)
            return True
        if not self.evaluate(simplified, origin=origin):
            raise ValueError(f"expect_true({simplified}) is false on the example values")
        return True

    def guard_or(self, expr: sympy.Basic, default: bool, *, origin: str = "", oblivious: bool = False) -> bool:
        """Like ``evaluate`` but returns ``default`` (no guard, no error) when only an
        unbacked value could decide, or, with ``oblivious``, when ``expr`` mentions a size
        that may be 1 (``config.oblivious_one``) and the ranges do not decide it.

        ``oblivious`` is the caller's promise that the default's path is valid for every
        value (checking with ``expect_true`` what that path relies on), as torch's kernels
        promise for data-dependent sizes at most of their ``guard_or_false`` calls. When the
        default contradicts the example values, ``contradicted`` moves on: if the op then
        fails (a check on the example values), ``by_hints`` lets it be run again deciding
        on them (see ``FakeTensorMode.run_meta``)."""
        static = self.statically_known(expr, size_oblivious=False)
        if static is not None:
            return static
        simplified = self.simplify(expr)
        hint = self.size_hint(simplified)
        if hint is None:
            return default
        if oblivious and not self._hint_decisions and self.may_be_one(simplified):
            if bool(hint) != default:
                self._against_hint += 1
            return default
        return bool(self.evaluate(simplified, hint, origin=origin))

    def may_be_one(self, expr: sympy.Basic) -> bool:
        """Whether ``expr`` mentions a dynamic size that may be 1 (``config.oblivious_one``)."""
        return bool(self._oblivious) and not expr.free_symbols.isdisjoint(self._oblivious)

    @property
    def contradicted(self) -> int:
        """How many ``guard_or`` answers so far contradicted the example values."""
        return self._against_hint

    @property
    def deciding_by_hints(self) -> bool:
        """Whether a ``by_hints`` block is active."""
        return bool(self._hint_decisions)

    @contextlib.contextmanager
    def by_hints(self):
        """Inside, ``guard_or`` decides sizes that may be 1 by their example values (with a
        guard), as for every other size."""
        self._hint_decisions += 1
        try:
            yield
        finally:
            self._hint_decisions -= 1

    # ----------------------------------------------------------------- learning
    def _record(self, guard: sympy.Basic, origin: str) -> None:
        self._guards.append(ShapeGuard(guard, origin))
        self._learn(guard)
        self._remember(guard)

    def _remember(self, guard: sympy.Basic) -> None:
        """A recorded relation is a fact from now on: deciding it again records nothing."""
        if is_boolean_expr(guard):
            self._facts[guard] = True
            self._facts[sympy.Not(guard)] = False

    def _learn(self, guard: sympy.Basic) -> None:
        facts = learn_facts(guard, self._rank, lambda s: bool(s.is_integer))
        for sym, lower in facts.lower.items():
            r = self.range_of(sym)
            self._set_range(sym, ValueRange(max(r.lower, lower), r.upper))
        for sym, upper in facts.upper.items():
            r = self.range_of(sym)
            self._set_range(sym, ValueRange(r.lower, min(r.upper, upper)))
        for sym, value in facts.excluded.items():
            r = self.range_of(sym)
            if r.lower == value:
                self._set_range(sym, ValueRange(value + 1, r.upper))
            elif r.upper == value:
                self._set_range(sym, ValueRange(r.lower, value - 1))
        for mod in facts.divisible:
            # Mod(e, d) == 0 also makes e // d exact: FloorDiv(e, d) == e / d.
            self._divisible[mod] = sympy.Integer(0)
            self._divisible[FloorDiv(*mod.args)] = mod.args[0] / mod.args[1]
            self._invalidate()
        for sym, value in facts.replacements.items():
            if isinstance(sym, sympy.Symbol):
                self._add_replacement(sym, value)
            elif value.is_Number:
                self._set_range(sym, ValueRange.point(_py_value(value)))

    def _rank(self, sym: sympy.Symbol) -> tuple[int, int]:
        return (sym in self._unbacked, self._order.get(sym, -1))

    def _set_range(self, sym: sympy.Symbol, value_range: ValueRange) -> None:
        if self._ranges.get(sym) != value_range:
            self._ranges[sym] = value_range
            self._invalidate()

    def _invalidate(self) -> None:
        self._version += 1
        self._simplified.clear()
        self._oblivious_ranges = None

    def _add_replacement(self, sym: sympy.Symbol, value: sympy.Expr) -> None:
        value = self.simplify(value)
        if value == sym or sym in self._replacements:
            return
        if isinstance(value, sympy.Symbol):
            merged = self.range_of(value).intersect(self.range_of(sym))
            self._set_range(value, merged)
        self._replacements[sym] = value
        mentioned = value.free_symbols
        for s in mentioned:
            self._mentioned_by.setdefault(s, set()).add(sym)
        for key in self._mentioned_by.pop(sym, ()):
            self._replacements[key] = self._replacements[key].xreplace({sym: value})
            for s in mentioned:
                self._mentioned_by[s].add(key)
        self._invalidate()

    # ----------------------------------------------------------------- output
    def produce_guards(self) -> ProducedGuards:
        """The simplified guard set over source-bound symbols, with the binding.

        Contains: one equality per source-bound symbol that was replaced (duck sizing, 0/1
        and static specialization, learned equalities), the range of each remaining
        source-bound symbol where it is narrower than the default for its kind (unless its
        replacement already implies it), and every
        recorded guard that those do not already imply. Guards that mention symbols without
        a source are dropped from ``guards``; relations on unbacked symbols come back as
        ``runtime_asserts``.
        """
        out: list[sympy.Basic] = []
        bound_syms = [s for s in self._order if s in self._sources]
        # Relations are built unevaluated: sympy would try to decide each through its
        # assumption system, which costs more than the rest of a symbolic capture.
        for sym in bound_syms:
            if sym in self._replacements:
                out.append(sympy.Eq(sym, self._replacements[sym], evaluate=False))
        # Only symbol ranges: they are emitted below, while ranges of compound terms were
        # learned from guards that must themselves stay in the output.
        range_only = {s: r for s, r in self._ranges.items() if isinstance(s, sympy.Symbol)}
        for sym in bound_syms:
            r = self._ranges[sym]
            floor_default = 0 if sym in self._size_like else -math.inf
            candidates = [sympy.Ge(sym, r.lower, evaluate=False)] if r.lower > floor_default else []
            candidates += [sympy.Le(sym, r.upper, evaluate=False)] if r.upper < math.inf else []
            for candidate in candidates:
                implied = sym in self._replacements and decide(candidate.xreplace(self._replacements), range_only)
                if not implied:
                    out.append(candidate)
        runtime: list[sympy.Basic] = []
        replaced = self._replacements.keys()
        for guard in self._guards:
            expr = guard.expr
            if not replaced.isdisjoint(expr.free_symbols):
                expr = expr.xreplace(self._replacements)
            if expr is sympy.true or decide(expr, range_only) is True:
                continue
            if expr.free_symbols & self._unbacked:
                runtime.append(expr)
            elif expr.free_symbols <= set(self._sources):
                out.append(expr)
        runtime += [g.expr for g in self._runtime_asserts]
        syms = set().union(*(g.free_symbols for g in out)) if out else set()
        specialized = {
            self._sources[s]: self._replacements[s]
            for s in bound_syms
            if s in self._dynamic and s in self._replacements and self._replacements[s].is_Number
        }
        return ProducedGuards(
            guards=tuple(dict.fromkeys(out)),
            sources={s: self._sources[s] for s in bound_syms if s in syms},
            hints={s: self._hints[s] for s in bound_syms if s in syms},
            runtime_asserts=tuple(dict.fromkeys(runtime)),
            specialized={src: int(v) if v.is_Integer else float(v) for src, v in specialized.items()},
        )

    def format_guards(self, guards: Iterable[sympy.Basic] | None = None) -> list[str]:
        """Guards as strings with symbols printed as their sources."""
        produced = self.produce_guards()
        names = {s: sympy.Symbol(str(src)) for s, src in produced.sources.items()}
        return [str(g.xreplace(names)) for g in (produced.guards if guards is None else guards)]
