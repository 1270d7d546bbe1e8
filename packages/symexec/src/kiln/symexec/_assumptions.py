"""Run-time checks of what a trace assumed about data-dependent values.

Meta kernels settle some questions about unbacked symbols (sizes of ``nonzero``, boolean-mask
or ``unique`` results; numbers from ``.item()``) by assuming an answer that holds for every
value the real kernel accepts: ``u0 == 5`` when a masked result is broadcast against five
elements, ``u0 >= 0`` for a size; ``torch._check(n < 8)`` in user code is one too. The
ShapeEnv keeps them as runtime assertions and later decisions rely on them, so a value that
breaks one would make the trace wrong where the real kernel does not fail (a masked result
of one element broadcasts to five). Each assertion therefore becomes graph nodes computing
it from values the graph produces, and a ``check_assumption`` node that raises RuntimeError
when it is false, placed right after the op that made it (torch.compile checks them too).

Binding: a symbol is computed by the first node whose value is that symbol (``t.item()``,
``x.size(0)``) or has it as a size (``x.nonzero()``: a ``size(0)`` node is added when an
assertion needs it); graph inputs bind the symbols of dynamic sizes. An assertion over a
symbol no node produces (one made inside a composite op) or that the translation does not
cover is Unsupported: the trace stops rather than leave it unchecked.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any

import sympy
import torch

from kiln.fxgraph import Node, register_impure_rule
from kiln.symshapes.bridge import FakeTensor, from_torch

from ._unsupported import Unsupported

if TYPE_CHECKING:
    from ._output_graph import OutputGraph

__all__ = ["Assumptions", "check_assumption"]


def check_assumption(holds: bool, assumption: str) -> None:
    """Raise when a data-dependent value breaks an assumption the compiled graph relies on."""
    if not holds:
        raise RuntimeError(f"a data-dependent value breaks an assumption of the compiled code: {assumption} "
                           "(add a torch._check the code satisfies, or compile this part without it)")


@register_impure_rule
def _is_check(node: Node) -> bool:
    return node.op == "call_function" and node.target is check_assumption


_RELATIONS = {sympy.Eq: operator.eq, sympy.Ne: operator.ne, sympy.Lt: operator.lt, sympy.Le: operator.le,
              sympy.Gt: operator.gt, sympy.Ge: operator.ge}
_FOLDS = {sympy.Add: operator.add, sympy.Mul: operator.mul, sympy.And: operator.and_, sympy.Or: operator.or_,
          sympy.Min: min, sympy.Max: max}
_BY_NAME = {"Mod": operator.mod, "FloorDiv": operator.floordiv, "TruncToInt": math.trunc, "floor": math.floor,
            "ceiling": math.ceil, "Abs": abs}


class Assumptions:
    """The symbols graph nodes compute, and how many runtime assertions are checked so far."""

    __slots__ = ("checked", "sizes", "values")

    def __init__(self) -> None:
        self.values: dict[sympy.Symbol, Any] = {}  # symbol -> the node whose value it is
        self.sizes: dict[sympy.Symbol, tuple[Node, int]] = {}  # symbol -> (tensor node, dim)
        self.checked = 0

    def note(self, node: Node, value: Any) -> None:
        """``node`` computes ``value`` (a fake tensor or a symbolic number)."""
        if isinstance(value, FakeTensor):
            for d, size in enumerate(value.shape):
                sym = _bare_symbol(size)
                if sym is not None and sym not in self.values:
                    self.sizes.setdefault(sym, (node, d))
            return
        sym = _bare_symbol(value)
        if sym is not None:
            self.values.setdefault(sym, node)

    def check_new(self, output: OutputGraph) -> list[Node]:
        """Check nodes for the runtime assertions the ShapeEnv made since the last call."""
        made = output.shape_env.runtime_asserts
        new, self.checked = made[self.checked:], len(made)
        checks = []
        for assertion in new:
            if assertion.expr is sympy.true:
                continue
            holds = self._compute(output, assertion.expr)
            checks.append(output.compute(check_assumption, (holds, str(assertion.expr))))
        return checks

    def _compute(self, output: OutputGraph, e: Any) -> Any:
        """A node (or a constant) computing sympy ``e`` in plain Python at run time."""
        if e is sympy.true or e is sympy.false:
            return bool(e)
        if isinstance(e, sympy.Integer):
            return int(e)
        if isinstance(e, sympy.Float):
            return float(e)
        if isinstance(e, sympy.Symbol):
            return self._symbol(output, e)
        args = [self._compute(output, a) for a in e.args]
        fn = _RELATIONS.get(type(e)) or _FOLDS.get(type(e)) or _BY_NAME.get(type(e).__name__)
        if isinstance(e, sympy.Pow) and isinstance(e.args[1], sympy.Integer) and e.args[1] >= 0:
            fn = operator.pow
        elif isinstance(e, sympy.Not):
            fn = operator.not_
        if fn is None:
            raise Unsupported(f"a run-time check of {e} (an assumption about a data-dependent value) "
                              "kiln cannot compute yet")
        if type(e) in _FOLDS and fn not in (min, max):
            result = args[0]
            for a in args[1:]:
                result = output.compute(fn, (result, a))
            return result
        return output.compute(fn, tuple(args))

    def _symbol(self, output: OutputGraph, sym: sympy.Symbol) -> Any:
        node = self.values.get(sym)
        if node is not None:
            return node
        found = self.sizes.get(sym)
        if found is None:
            raise Unsupported(f"an assumption about {sym} (a data-dependent value made inside an op) "
                              "cannot be checked at run time")
        tensor, d = found
        node = self.values[sym] = output.compute("size", (tensor, d))
        return node


def _bare_symbol(value: Any) -> sympy.Symbol | None:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        expr = from_torch(value).expr
        if isinstance(expr, sympy.Symbol):
            return expr
    return None
