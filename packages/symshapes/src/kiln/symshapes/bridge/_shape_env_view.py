"""ShapeEnvView: what torch's Python helpers find at ``symint.node.shape_env``.

torch's public helpers in ``torch.fx.experimental.symbolic_shapes`` (``guard_or_false``,
``statically_known_true``, ``optimization_hint``, ``has_static_value``, ...) are called by
its meta kernels and decompositions on every SymInt they see. When a node has a
``shape_env`` attribute they call a handful of methods on it (``evaluate_sym_node``,
``bound_sympy``, ``optimization_hint``, ``guarding_hint_or_throw``, ``is_unbacked_symint``,
``_maybe_evaluate_static``);
without one they fall back to ``guard_bool``, which would turn every "try, else assume"
decision on a data-dependent size into an error. This view answers those calls from a kiln
``ShapeEnv``. The method names are torch's calling convention (probed on torch 2.11-2.13),
not a documented API; this module is the only place that depends on them.

Invariant: the view holds no state of its own; every answer comes from ``env``. ``ops``
is a cache: the node each symbolic operation made, by operation and operands (see
``KilnSymNode._apply``).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from kiln.symshapes._errors import GuardOnDataDependentError
from kiln.symshapes._shape_env import ShapeEnv
from kiln.symshapes._sym_ops import is_boolean_expr
from kiln.symshapes._value_ranges import ValueRange
from kiln.symshapes.bridge._torch_internals import caller_frame, oblivious_site

__all__ = ["ShapeEnvView"]


@dataclass(slots=True, frozen=True)
class _TorchRange:
    """A ``ValueRange`` with the method names torch's helpers use."""

    lower: object
    upper: object

    def is_singleton(self) -> bool:
        return self.lower == self.upper

    def is_int(self) -> bool:
        return True


class ShapeEnvView:
    """Adapter from torch's ``node.shape_env`` calls onto a kiln ``ShapeEnv``."""

    __slots__ = ("__weakref__", "env", "ops")

    def __init__(self, env: ShapeEnv) -> None:
        self.env = env
        self.ops: dict[tuple, object] = {}

    def evaluate_sym_node(self, node, size_oblivious: bool = False, fallback_value: bool | None = None):
        if fallback_value is not None:
            static = self.env.statically_known(node.expr, size_oblivious=size_oblivious)
            if static is not None:
                return static
            # torch's guard_or_false/guard_or_true: a size that may be 1 gets the default
            # only where the caller is listed as valid for that (oblivious_site)
            oblivious = self.env.may_be_one(node.expr) and oblivious_site(caller_frame(1))
            return self.env.guard_or(node.expr, fallback_value, oblivious=oblivious)
        return self.env.evaluate(node.expr, node.hint, size_oblivious=size_oblivious)

    def evaluate_expr(self, expr, hint=None, fx_node=None, size_oblivious: bool = False, **_: object):
        return self.env.evaluate(expr, hint, size_oblivious=size_oblivious)

    def bound_sympy(self, expr: sympy.Basic, size_oblivious: bool = False) -> _TorchRange:
        r: ValueRange = self.env.bound(expr)
        return _TorchRange(r.lower, r.upper)

    def optimization_hint(self, expr: sympy.Basic, fallback: int | None = None):
        value = self.env.size_hint(expr, fallback=fallback if fallback is not None else 8192)
        return value

    def size_hint(self, expr: sympy.Basic, *, allow_none: bool = False):
        value = self.env.size_hint(expr)
        if value is None and not allow_none:
            raise GuardOnDataDependentError(expr, "size_hint")
        return value

    def guarding_hint_or_throw(self, expr: sympy.Basic):
        return self.size_hint(expr)

    def _maybe_evaluate_static(self, expr: sympy.Basic, **_: object):
        if is_boolean_expr(expr):
            return self.env.statically_known(expr)
        r = self.env.bound(expr)
        return sympy.sympify(r.lower) if r.is_point() else None

    def is_unbacked_symint(self, sym: sympy.Symbol) -> bool:
        return self.env.is_unbacked(sym)
