"""The shape-relation guard: a sympy Boolean over symbols bound to sources.

``ShapeRelation(expr, {s0: TensorSizeSource(LocalSource('x'), 0), ...})`` holds when every
bound value is an int and ``expr`` is true with each symbol replaced by its value. The
compiled check never calls sympy: the expression is translated once into plain Python
arithmetic (integers stay integers, rationals become ``fractions.Fraction`` constants,
``floor``/``ceiling`` become ``math.floor``/``math.ceil``), so it is exact. The explanation
evaluates the same expression with sympy, an independent path that tests compare against.

Supported nodes: integers, rationals, symbols, ``+``, ``*``, ``**`` with an integer exponent
(a negative one as an exact Fraction), ``Mod``, ``floor``, ``ceiling``, ``Min``, ``Max``, ``Abs``, and the
functions kiln.symshapes defines, matched by name: ``FloorDiv`` (``a // b``) and
``TruncToInt`` (``math.trunc``); the six relations, ``And``, ``Or``, ``Not``, ``true`` and
``false``. Anything else is rejected when the guard is built. sympy is imported lazily.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kiln.guards._base import CodeContext, Guard
from kiln.guards._sources import Source, TensorSizeSource, TensorStrideSource

__all__ = ["ShapeRelation"]

_TENSOR_INTS = (TensorSizeSource, TensorStrideSource)
_RELATIONS = {"Equality": "==", "Unequality": "!=", "StrictLessThan": "<",
              "LessThan": "<=", "StrictGreaterThan": ">", "GreaterThan": ">="}


def to_python(expr: Any, names: Mapping[Any, str], const: Callable[[Any, str], str]) -> str:
    """Python source computing sympy ``expr`` with symbols read from ``names``."""
    import sympy

    def go(e: Any) -> str:
        if e is sympy.true or e is sympy.false:
            return str(bool(e))
        if isinstance(e, sympy.Symbol):
            if e not in names:
                raise ValueError(f"symbol {e} has no source bound")
            return names[e]
        if isinstance(e, sympy.Integer):
            return str(int(e))
        if isinstance(e, sympy.Rational):
            return const(Fraction(int(e.p), int(e.q)), "q")
        kind = type(e).__name__
        args = [go(a) for a in e.args]
        if kind in _RELATIONS:
            return f"({args[0]} {_RELATIONS[kind]} {args[1]})"
        if isinstance(e, sympy.Add):
            return "(" + " + ".join(args) + ")"
        if isinstance(e, sympy.Mul):
            return "(" + " * ".join(args) + ")"
        if isinstance(e, sympy.Pow):
            exp = e.args[1]
            if not isinstance(exp, sympy.Integer):
                raise TypeError(f"unsupported exponent in shape relation: {e}")
            if exp < 0:  # exact: a Fraction (a zero base raises, and the guard fails)
                one = const(Fraction(1), "q")
                return f"({one} / ({args[0]} ** {-int(exp)}))"
            return f"({args[0]} ** {args[1]})"
        simple = {"And": " and ", "Or": " or "}
        if kind in simple:
            return "(" + simple[kind].join(args) + ")"
        if kind == "Not":
            return f"(not {args[0]})"
        if kind in ("Mod", "FloorDiv"):
            op = "%" if kind == "Mod" else "//"
            return f"({args[0]} {op} {args[1]})"
        calls = {"floor": math.floor, "ceiling": math.ceil, "Min": min, "Max": max, "Abs": abs,
                 "TruncToInt": math.trunc}
        if kind in calls:
            return f"{const(calls[kind], kind.lower())}({', '.join(args)})"
        raise TypeError(f"unsupported node {kind} in shape relation: {e}")

    return go(expr)


@dataclass(frozen=True, slots=True)
class ShapeRelation(Guard):
    """A sympy Boolean over symbols, each bound to a source of an int value."""

    expr: Any
    bindings: Any  # a mapping symbol -> Source on input; stored as sorted (symbol, source) pairs
    code: str = field(init=False, compare=False)
    cost = 12

    def __post_init__(self) -> None:
        pairs = self.bindings.items() if isinstance(self.bindings, Mapping) else self.bindings
        pairs = tuple(sorted(pairs, key=lambda p: str(p[0])))
        for _, src in pairs:
            if not isinstance(src, Source):
                raise TypeError(f"binding values must be Sources, got {type(src).__name__}")
        object.__setattr__(self, "bindings", pairs)
        # validate now, so that an unsupported expression fails where it is built
        names = {sym: f"v{i}" for i, (sym, _) in enumerate(pairs)}
        object.__setattr__(self, "code", to_python(self.expr, names, lambda v, h: h))

    @property
    def sources(self) -> tuple[Source, ...]:
        return tuple(src for _, src in self.bindings)

    def describe(self) -> str:
        where = ", ".join(f"{sym} = {src}" for sym, src in self.bindings)
        return f"{self.expr} where {where}" if where else str(self.expr)

    def emit(self, ctx: CodeContext, *exprs: str) -> list[str]:
        names = {sym: e for (sym, _), e in zip(self.bindings, exprs, strict=True)}
        # A size or stride of a tensor is an int (``Tensor.size``/``stride`` of a plain
        # tensor, whose type the TensorMatch on the base established: kiln makes sizes
        # symbolic for plain tensors only); other values are checked to be ints.
        conds = [f"type({e}) is int" for (_, src), e in zip(self.bindings, exprs, strict=True)
                 if not isinstance(src, _TENSOR_INTS)]
        conds.append(to_python(self.expr, names, ctx.const))
        return conds

    def explain(self, *values: Any) -> str | None:
        import sympy

        for (sym, src), v in zip(self.bindings, values, strict=True):
            if type(v) is not int:
                return f"{src} (bound to {sym}): expected an int, got {type(v).__name__}"
        subs = {sym: sympy.Integer(v) for (sym, _), v in zip(self.bindings, values, strict=True)}
        result = self.expr.xreplace(subs)
        if result is sympy.true:
            return None
        if result is not sympy.false:
            result = sympy.simplify(result)
            if result is sympy.true:
                return None
        found = ", ".join(f"{sym} = {v}" for (sym, _), v in zip(self.bindings, values, strict=True))
        where = ", ".join(f"{sym} = {src}" for sym, src in self.bindings)
        return f"shape relation {self.expr} ({where}): expected True, got {result} with {found}"
