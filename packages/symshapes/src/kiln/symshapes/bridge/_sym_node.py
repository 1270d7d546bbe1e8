"""KilnSymNode: kiln's symbolic values behind ``torch.SymInt``/``SymFloat``/``SymBool``.

torch accepts any object implementing its SymNode protocol as the node of a symbolic number
(``torch.SymInt(node)``); C++ kernels and Python decompositions then call the protocol's
methods by name (``add``, ``int_floordiv``, ``eq``, ``guard_bool``, ``wrap_int``,
``is_contiguous``, ...). This node answers them with kiln's operation table and ShapeEnv, so
shape arithmetic inside torch's meta kernels builds sympy expressions over kiln symbols and
every decision torch takes on them becomes a kiln guard.

Invariants:
- ``node.expr`` is a sympy expression over ``node.env``'s symbols (``node.shape_env`` is the
  ``ShapeEnvView`` torch's helpers talk to); ``node.hint`` is its
  value on the example inputs (None for unbacked values), computed with Python semantics.
- Every node returned by an operation has the same ``shape_env``.
- ``is_constant()`` is True exactly when an int/bool node's ``expr`` is a number; torch
  then uses the value.
"""

from __future__ import annotations

import sympy
import torch

from kiln.symshapes._shape_env import ShapeEnv
from kiln.symshapes._sym_ops import sym_op_rules, to_sympy
from kiln.symshapes.bridge._shape_env_view import ShapeEnvView
from kiln.symshapes.bridge._torch_internals import caller_frame, oblivious_site, stride_only_caller

__all__ = ["KilnSymNode", "from_torch", "to_torch", "wrap_expr"]

_PYTYPES = {"int": int, "float": float, "bool": bool}


def _origin(file: str, line: int) -> str:
    return f"{file}:{line}" if file else ""


class KilnSymNode:
    """A symbolic int/float/bool for torch: a sympy expression, its hint, its ShapeEnv."""

    __slots__ = ("env", "expr", "hint", "pytype", "shape_env")

    def __init__(self, expr: sympy.Basic, shape_env: ShapeEnvView, pytype: type, hint: object) -> None:
        self.expr = expr
        self.shape_env = shape_env
        self.env: ShapeEnv = shape_env.env
        self.pytype = pytype
        self.hint = hint

    @property
    def _hint(self) -> object:
        return self.hint

    # ------------------------------------------------------------ introspection
    def is_int(self) -> bool:
        return self.pytype is int

    def is_float(self) -> bool:
        return self.pytype is float

    def is_bool(self) -> bool:
        return self.pytype is bool

    def is_nested_int(self) -> bool:
        return False

    def nested_int(self) -> None:
        return None

    def is_symbolic(self) -> bool:
        return not self.is_constant()

    def is_constant(self) -> bool:
        # torch unwraps constant SymInts/SymBools only; a constant SymFloat stays symbolic.
        if self.pytype is float:
            return False
        return self.expr.is_Number or self.expr is sympy.true or self.expr is sympy.false

    def has_hint(self) -> bool:
        return self.hint is not None

    def maybe_as_int(self) -> int | None:
        return int(self.expr) if self.expr.is_Integer else None

    def maybe_as_float(self) -> float | None:
        return float(self.expr) if self.expr.is_Number else None

    def maybe_as_bool(self) -> bool | None:
        if self.expr is sympy.true or self.expr is sympy.false:
            return self.expr is sympy.true
        return None

    def str(self) -> str:
        return str(self.expr)

    def _graph_repr(self) -> str:
        return str(self.expr)

    def __str__(self) -> str:
        return str(self.expr)

    def __repr__(self) -> str:
        return f"KilnSymNode({self.expr}, hint={self.hint})"

    def clone(self) -> KilnSymNode:
        return self

    # ------------------------------------------------------------ constants
    def wrap_int(self, num: int) -> KilnSymNode:
        return KilnSymNode(sympy.Integer(num), self.shape_env, int, num)

    def wrap_float(self, num: float) -> KilnSymNode:
        return KilnSymNode(sympy.Float(num), self.shape_env, float, num)

    def wrap_bool(self, num: bool) -> KilnSymNode:
        return KilnSymNode(to_sympy(bool(num)), self.shape_env, bool, bool(num))

    # ------------------------------------------------------------ decisions
    def guard_int(self, file: str = "", line: int = 0) -> int:
        return int(self.env.evaluate(self.expr, self.hint, origin=_origin(file, line)))

    def guard_float(self, file: str = "", line: int = 0) -> float:
        return float(self.env.evaluate(self.expr, self.hint, origin=_origin(file, line)))

    def guard_bool(self, file: str = "", line: int = 0) -> bool:
        return bool(self.env.evaluate(self.expr, self.hint, origin=_origin(file, line)))

    def guard_size_oblivious(self, file: str = "", line: int = 0) -> bool:
        return bool(self.env.evaluate(self.expr, self.hint, size_oblivious=True, origin=_origin(file, line)))

    def guard_or_false(self, file: str = "", line: int = 0) -> bool:
        return self._guard_or(False, file, line)

    def guard_or_true(self, file: str = "", line: int = 0) -> bool:
        return self._guard_or(True, file, line)

    def _guard_or(self, default: bool, file: str, line: int) -> bool:
        # torch's C++ TORCH_GUARD_OR_FALSE/TRUE: the default for a size that may be 1 only
        # where the C++ file (and the Python code that called into it) is listed
        oblivious = self.env.may_be_one(self.expr) and oblivious_site(caller_frame(2), file=file)
        return self.env.guard_or(self.expr, default, origin=_origin(file, line), oblivious=oblivious)

    def statically_known_true(self, file: str = "", line: int = 0) -> bool:
        return self.env.statically_known(self.expr) is True

    def expect_true(self, file: str = "", line: int = 0) -> bool:
        return self.env.expect_true(self.expr, origin=_origin(file, line))

    def expect_size(self, file: str = "", line: int = 0) -> bool:
        if isinstance(self.expr, sympy.Symbol):
            self.env.mark_size_like(self.expr)
        return self.env.expect_true(sympy.Ge(self.expr, 0), origin=_origin(file, line))

    def int_(self) -> int:
        return self.guard_int()

    def bool_(self) -> bool:
        # A size that may be 1 (ShapeEnvConfig.oblivious_one) asked about by one of torch's
        # stride-only decisions is decided as for a size >= 2 (see stride_only_caller).
        if self.env.may_be_one(self.expr) and stride_only_caller(caller_frame(2)):
            return self.guard_size_oblivious()
        return self.guard_bool()

    def evaluate(self, size_oblivious: bool = False) -> object:
        return self.env.evaluate(self.expr, self.hint, size_oblivious=size_oblivious)

    # ------------------------------------------------------------ operations
    def _apply(self, name: str, *others: KilnSymNode) -> KilnSymNode:
        # A node is a value (its hint follows from its expression), so the same operation on
        # the same operands gives the node made before: every tensor torch creates with
        # symbolic sizes recomputes its numel and contiguity from them (half of a
        # symbolic capture's operations on a transformer).
        key = (name, self.expr, self.pytype, *[x for o in others for x in (o.expr, o.pytype)])
        ops = self.shape_env.ops
        made = ops.get(key)
        if made is None:
            made = ops[key] = self._compute(name, others)
        return made

    def _compute(self, name: str, others: tuple[KilnSymNode, ...]) -> KilnSymNode:
        rule = sym_op_rules[name]
        operands = (self, *others)
        expr = rule.sympy_fn(*(o.expr for o in operands))
        hints = [o.hint for o in operands]
        hint = None if None in hints else rule.py_fn(*hints)
        if rule.kind == "same":
            pytype = float if any(o.pytype is float for o in operands) else int
        else:
            pytype = _PYTYPES[rule.kind]
        if hint is not None and pytype is not bool:
            hint = pytype(hint)
        return KilnSymNode(expr, self.shape_env, pytype, hint)

    def _float_or_int(self, other: KilnSymNode, int_name: str, float_name: str) -> KilnSymNode:
        return self._apply(float_name if float in (self.pytype, other.pytype) else int_name, other)

    def add(self, other):
        return self._apply("add", other)

    def sub(self, other):
        return self._apply("sub", other)

    def mul(self, other):
        return self._apply("mul", other)

    def mod(self, other):
        return self._apply("mod", other)

    def truediv(self, other):
        return self._float_or_int(other, "int_truediv", "float_truediv")

    def int_truediv(self, other):
        return self._apply("int_truediv", other)

    def float_truediv(self, other):
        return self._apply("float_truediv", other)

    def floordiv(self, other):
        return self._float_or_int(other, "int_floordiv", "float_floordiv")

    def int_floordiv(self, other):
        return self._apply("int_floordiv", other)

    def pow(self, other):
        if float in (self.pytype, other.pytype):
            return self._apply("float_pow", other)
        return self.pow_by_natural(other)

    def float_pow(self, other):
        return self._apply("float_pow", other)

    def pow_by_natural(self, other):
        if not other.is_constant():
            self.env.evaluate(sympy.Ge(other.expr, 0), None if other.hint is None else other.hint >= 0)
        return self._apply("pow_by_natural", other)

    def eq(self, other):
        return self._apply("eq", other)

    def ne(self, other):
        return self._apply("ne", other)

    def lt(self, other):
        return self._apply("lt", other)

    def le(self, other):
        return self._apply("le", other)

    def gt(self, other):
        return self._apply("gt", other)

    def ge(self, other):
        return self._apply("ge", other)

    def sym_min(self, other):
        return self._apply("sym_min", other)

    def sym_max(self, other):
        return self._apply("sym_max", other)

    def and_(self, other):
        return self._apply("and_", other)

    def or_(self, other):
        return self._apply("or_", other)

    sym_and = and_
    sym_or = or_

    def sym_not(self):
        return self._apply("sym_not")

    def sym_ite(self, then_node, else_node):
        return self._apply("sym_ite", then_node, else_node)

    def neg(self):
        return self._apply("neg")

    def pos(self):
        return self

    def abs(self):
        return self._apply("abs")

    def floor(self):
        return self._apply("floor")

    def ceil(self):
        return self._apply("ceil")

    def trunc(self):
        return self._apply("trunc")

    def sym_int(self):
        return self._apply("sym_int")

    def sym_float(self):
        return self._apply("sym_float")

    def round(self, ndigits: int | None = None):
        value = round(self.guard_float(), ndigits)
        return self.wrap_float(value) if ndigits is not None else self.wrap_int(value)

    def is_integer(self):
        return self._apply("floor").eq(self)

    def sym_sum(self, args):
        """The sum of ``args`` (torch passes every term, ``self`` is just one of them)."""
        total = self.wrap_int(0)
        for arg in args:
            total = total.add(arg)
        return total

    # ------------------------------------------------------------ memory layout
    def is_contiguous(self, sizes, strides):
        return self._layout_bool(_contiguous_expr(sizes, strides, list(range(len(sizes) - 1, -1, -1))))

    def is_channels_last_contiguous_2d(self, sizes, strides):
        if len(sizes) != 4:
            return self.wrap_bool(False)
        return self._layout_bool(_contiguous_expr(sizes, strides, [1, 3, 2, 0]))

    def is_channels_last_contiguous_3d(self, sizes, strides):
        if len(sizes) != 5:
            return self.wrap_bool(False)
        return self._layout_bool(_contiguous_expr(sizes, strides, [1, 4, 3, 2, 0]))

    def is_channels_last_strides_2d(self, sizes, strides):
        return self.wrap_bool(len(sizes) == 4 and _channels_last_strides(sizes, strides, [1, 3, 2, 0]))

    def is_channels_last_strides_3d(self, sizes, strides):
        return self.wrap_bool(len(sizes) == 5 and _channels_last_strides(sizes, strides, [1, 4, 3, 2, 0]))

    def is_non_overlapping_and_dense(self, sizes, strides):
        return self.wrap_bool(_non_overlapping_and_dense(sizes, strides))

    def is_non_overlapping_and_dense_indicator(self, sizes, strides):
        return self.wrap_int(int(_non_overlapping_and_dense(sizes, strides)))

    def _layout_bool(self, expr: sympy.Basic) -> KilnSymNode:
        return KilnSymNode(expr, self.shape_env, bool, self.env.size_hint(expr))


def _contiguous_expr(sizes, strides, order) -> sympy.Basic:
    """Strides are the dense ones for ``order`` (innermost first), ignoring size-1 dims;
    any size 0 makes the tensor contiguous."""
    expected = sympy.Integer(1)
    terms = []
    for d in order:
        size, stride = sizes[d].expr, strides[d].expr
        terms.append(sympy.Or(sympy.Eq(size, 1), sympy.Eq(stride, expected)))
        expected = expected * size
    empty = sympy.Or(*(sympy.Eq(s.expr, 0) for s in sizes))
    return sympy.Or(empty, sympy.And(*terms))


def _decide(node: KilnSymNode, expr: sympy.Basic) -> bool:
    return bool(node.env.evaluate(expr))


def _channels_last_strides(sizes, strides, order) -> bool:
    """c10's heuristic: strides increase along ``order`` (C innermost), deciding with guards."""
    node = sizes[0]
    minimum = sympy.Integer(0)
    if _decide(node, sympy.Eq(strides[1].expr, 0)):
        return False
    for d in order:
        size, stride = sizes[d].expr, strides[d].expr
        if _decide(node, sympy.Eq(size, 0)) or _decide(node, sympy.Lt(stride, minimum)):
            return False
        if d == 0 and _decide(node, sympy.Eq(minimum, strides[1].expr)):
            return False
        minimum = stride
        if _decide(node, sympy.Gt(size, 1)):
            minimum = minimum * size
    return True


def _non_overlapping_and_dense(sizes, strides) -> bool:
    """Some permutation of the dims is contiguous; decided with guards on the hints."""
    node = sizes[0] if sizes else None
    if node is None:
        return True
    dims = [d for d in range(len(sizes)) if not _decide(node, sympy.Eq(sizes[d].expr, 1))]
    hints = {d: node.env.size_hint(strides[d].expr) for d in dims}
    dims.sort(key=lambda d: hints[d])
    expected = sympy.Integer(1)
    for d in dims:
        if not _decide(node, sympy.Eq(strides[d].expr, expected)):
            return False
        expected = expected * sizes[d].expr
    return True


def wrap_expr(expr: sympy.Basic, view: ShapeEnvView, pytype: type = int) -> KilnSymNode:
    """A node for ``expr`` with its hint computed from the view's ShapeEnv."""
    return KilnSymNode(expr, view, pytype, view.env.size_hint(expr))


def to_torch(expr: sympy.Basic, view: ShapeEnvView, pytype: type = int):
    """``expr`` as ``torch.SymInt``/``SymFloat``/``SymBool``, or a plain number if constant."""
    if expr.is_Integer and pytype is int:
        return int(expr)
    node = wrap_expr(expr, view, pytype)
    return {int: torch.SymInt, float: torch.SymFloat, bool: torch.SymBool}[pytype](node)


def from_torch(value):
    """A torch SymInt/SymFloat/SymBool over a KilnSymNode as kiln's own SymInt/SymFloat/
    SymBool (plain numbers pass through)."""
    from kiln.symshapes._symbolic import wrap

    node = getattr(value, "node", None)
    if not isinstance(node, KilnSymNode):
        if isinstance(value, (bool, int, float)):
            return value
        raise TypeError(f"{type(value).__name__} is not a kiln-backed symbolic value")
    kind = {int: "int", float: "float", bool: "bool"}[node.pytype]
    return wrap(node.expr, node.hint, kind, node.env)
