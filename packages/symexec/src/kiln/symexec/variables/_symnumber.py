"""SymNumberVariable: a Python int or float the graph takes as an input, not a constant.

A number read from the frame is a constant, guarded by its value (``L['scale'] == 0.5``).
When that guard is what fails on a recompile, the compile policy names the source dynamic
and the next trace makes the number a graph input (``automatic dynamic``, as torch.compile
does after a number changes): one graph then serves every value.

It stays an input only where its value cannot change what the trace computes: tensor
arithmetic with it (``x * scale``, ``torch.add(x, b)``, ``x.clamp(min=lo)``: the result's
dtype depends on its type, never its value) and ``+ - * /``, ``abs`` and unary minus between
such numbers and constants, which the graph computes at run time
(``1.0 / (1 + abs(scale))``). Any other use needs the value at trace time (``if n > 1``,
``range(n)``, a size or an index, a non-arithmetic torch argument): ``as_constant()`` then
*specializes* it, guarding each input it derives from by value, so the answer is right for
this value and a new value recompiles, as before.

A number computed from tensor data (``t.item()``, a size of a ``nonzero`` result) has an
unbacked ShapeEnv symbol as its example (``unbacked``): it has no value at trace time, so it
is never specialized. Arithmetic, ``int()``/``float()`` and comparisons stay in the graph (a
comparison the value ranges settle is a constant); ``torch._check``/``_check_is_size`` on it
are assumptions the graph checks at run time (``assume``); anything that needs its value
(``as_constant``: a branch, ``range(n)``, a dict key) is Unsupported there: a graph break.
"""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._base import VariableTracker

if TYPE_CHECKING:
    from kiln.fxgraph import Node
    from kiln.guards import Source

    from .._output_graph import OutputGraph
    from .._translator import Translator

__all__ = ["NUMBER_OPS", "SCALAR_SAFE_METHODS", "SIZE_OPS", "SymNumberVariable", "SymSliceVariable",
           "assume", "compare", "convert", "is_unbacked", "keeps_numbers_symbolic"]

# Arithmetic kept in the graph (the rest folds at trace time, specializing). Not ``**``: a
# negative base with a fractional exponent gives a complex, a type the trace would not have
# seen; not ``//`` or ``%``, whose results feed indexing and sizes more often than not.
NUMBER_OPS = frozenset((operator.add, operator.sub, operator.mul, operator.truediv,
                       operator.neg, operator.pos, abs))


# Arithmetic kept symbolic on sizes of dynamic tensors (a ShapeEnv expression: ``//`` and
# ``%`` stay exact there, and a size never becomes complex).
SIZE_OPS = NUMBER_OPS | frozenset((operator.floordiv, operator.mod))


@functools.cache
def _torch_safe_functions() -> frozenset[Any]:
    import torch

    return frozenset((operator.add, operator.sub, operator.mul, operator.truediv, operator.pow,
                      operator.iadd, operator.isub, operator.imul, operator.itruediv,
                      torch.add, torch.sub, torch.mul, torch.div, torch.true_divide, torch.pow,
                      torch.rsub, torch.clamp, torch.clamp_min, torch.clamp_max))


# Tensor methods whose float argument does not change the result's metadata.
SCALAR_SAFE_METHODS = frozenset(("add", "sub", "mul", "div", "true_divide", "pow", "rsub", "clamp",
                                 "clamp_min", "clamp_max", "add_", "sub_", "mul_", "div_", "pow_",
                                 "clamp_", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
                                 "__rmul__", "__truediv__", "__rtruediv__", "__pow__", "__rpow__"))


def keeps_numbers_symbolic(op: str, target: Any) -> bool:
    """Whether a graph call ``target`` may take a SymNumberVariable as an input (its value
    does not change the result's metadata)."""
    if op == "call_method":
        return target in SCALAR_SAFE_METHODS
    return target in _torch_safe_functions()


class SymNumberVariable(VariableTracker):
    """An int or float computed by the graph at run time (an input, or arithmetic on
    inputs); ``example`` is its value in the traced call. See the module docstring."""

    __slots__ = ("example", "inputs", "node", "output", "specialized")

    def __init__(self, node: Node, example: Any, output: OutputGraph, *,
                 inputs: tuple[SymNumberVariable, ...] | None = None, source: Source | None = None) -> None:
        super().__init__(source)
        self.node = node
        self.example = example
        self.output = output
        # the graph-input numbers it is computed from (None: it is one itself); a size of a
        # dynamic tensor has none: its example is a torch.SymInt of the ShapeEnv
        self.inputs = (self,) if inputs is None else inputs
        self.specialized = False

    @property
    def symbolic(self) -> bool:
        """Whether the example is a ShapeEnv symbol (a size of a dynamic tensor, or arithmetic
        on one): deciding anything about it records a shape guard, not a value guard."""
        return _is_sym(self.example)

    @property
    def unbacked(self) -> bool:
        """Whether it depends on tensor data (an unbacked symbol): no value at trace time."""
        return is_unbacked(self.example)

    def python_type(self) -> type:
        return _concrete_type(self.example)

    def is_constant(self) -> bool:
        return True  # known at trace time, once specialized

    def as_constant(self) -> int | float:
        """The value, after guarding every input this number derives from by value."""
        from kiln.guards import EqualsMatch

        if self.unbacked:
            raise Unsupported(f"the Python code needs the value of {self.describe()}; it is known only "
                              "when the graph runs (a data-dependent value)")

        for leaf in self.inputs:
            if not leaf.specialized and leaf.source is not None:
                leaf.specialized = True
                self.output.guards.add(EqualsMatch(leaf.source, leaf.example))
        # a symbol: its value now, which the ShapeEnv records as a guard (specialization)
        if self.symbolic:
            self.output.note_specialization(self.example)
            return _concrete_type(self.example)(self.example)
        return self.example

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        """``n.bit_length()``, ``f.is_integer()``, ``n.real``, ...: answered for this value
        (specialized: a guard on it, so another value recompiles), as torch.compile does."""
        from ._constant import ConstantVariable

        return ConstantVariable(self.as_constant()).get_attr(tx, name)

    def describe(self) -> str:
        kind = _concrete_type(self.example).__name__
        if self.unbacked:
            return f"{kind} {self.example!r} (computed by the graph from tensor data)"
        return f"{kind} {self.example!r} (a graph input{f' {self.source}' if self.source else ''})"


class SymSliceVariable(VariableTracker):
    """``slice(start, stop, step)`` with a symbolic size among its bounds: a tensor index
    keeps it symbolic (the graph computes the bounds); anything else specializes it."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[VariableTracker]) -> None:
        super().__init__(None)
        self.parts = parts

    def python_type(self) -> type:
        return slice

    def is_constant(self) -> bool:
        return True  # known at trace time, once specialized (as SymNumberVariable)

    def as_constant(self) -> slice:
        return slice(*[p.as_constant() for p in self.parts])

    def describe(self) -> str:
        return "a slice with symbolic bounds"


def is_unbacked(value: Any) -> bool:
    """Whether ``value`` is a torch.SymInt/SymFloat/SymBool over a data-dependent symbol."""
    if not _is_sym(value):
        return False
    from kiln.symshapes.bridge import from_torch

    sym = from_torch(value)
    return sym.env.size_hint(sym.expr) is None


def compare(output: OutputGraph, fn: Any, a: VariableTracker, b: VariableTracker) -> VariableTracker:
    """``a < b`` (any relation) with a data-dependent number among them: a constant where the
    value ranges settle it, else a bool the graph computes (deciding on it breaks there)."""
    from kiln.symshapes.bridge import from_torch

    from ._constant import ConstantVariable

    def value(v: VariableTracker) -> Any:
        return v.example if isinstance(v, SymNumberVariable) else v.as_constant()

    result = fn(value(a), value(b))
    if _is_sym(result):
        sym = from_torch(result)
        known = sym.env.statically_known(sym.expr)
        if known is None:
            return output.number_op(fn, [a, b])
        result = known
    return ConstantVariable(bool(result))


def convert(output: OutputGraph, fn: type, v: SymNumberVariable) -> VariableTracker:
    """``int(v)``/``float(v)`` of a data-dependent number: computed by the graph."""
    import torch

    kind = v.python_type()
    if fn is kind:
        return v
    if fn is int and kind is float:
        return output.number_op(torch.sym_int, [v])
    if fn is float and kind is int:
        return output.number_op(torch.sym_float, [v])
    raise Unsupported(f"{fn.__name__}() of {v.describe()}")


def assume(output: OutputGraph, fn: Any, args: list[VariableTracker]) -> None:
    """``torch._check(cond)`` / ``torch._check_is_size(n)``: on a data-dependent value, an
    assumption the ShapeEnv relies on from now on and the graph checks when it runs; on a
    size of a dynamic tensor, a shape guard; on a constant, checked now."""
    import torch

    from kiln.symshapes.bridge import from_torch

    value = args[0]
    if not isinstance(value, SymNumberVariable) or not value.symbolic:
        cond = value.as_constant()
        holds = cond >= 0 if fn is torch._check_is_size else cond
        if type(holds) is not bool or not holds:
            raise Unsupported(f"{fn.__name__}() fails or is not a bool check here: eager raises")
        return
    number = from_torch(value.example).expr
    env = output.shape_env
    expr = number >= 0 if fn is torch._check_is_size else number
    if not value.unbacked:
        if not env.evaluate(expr):
            raise Unsupported(f"{fn.__name__}() fails on the traced sizes: eager raises")
        return
    # the check first (a run-time assertion), then what it teaches (a size: >= 2 where torch
    # decides size-obliviously)
    if not env.expect_true(expr):
        raise Unsupported(f"{fn.__name__}() always fails here: eager raises")
    output.check_assumptions()
    if fn is torch._check_is_size and env.is_unbacked(number):
        env.mark_size_like(number)


def _is_sym(value: Any) -> bool:
    import torch

    return isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))


def _concrete_type(value: Any) -> type:
    import torch

    if isinstance(value, torch.SymInt):
        return int
    if isinstance(value, torch.SymFloat):
        return float
    if isinstance(value, torch.SymBool):
        return bool
    return type(value)
