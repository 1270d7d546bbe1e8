"""Errors raised by symbolic reasoning."""

from __future__ import annotations

__all__ = ["GuardOnDataDependentError", "SymbolicShapeError"]


class SymbolicShapeError(RuntimeError):
    """Base class of the errors raised by kiln.symshapes."""


class GuardOnDataDependentError(SymbolicShapeError):
    """A decision needed the value of an unbacked (data-dependent) symbol.

    ``expr`` is the sympy expression that could not be decided statically.
    """

    def __init__(self, expr: object, why: str = "") -> None:
        self.expr = expr
        detail = f" ({why})" if why else ""
        super().__init__(
            f"could not decide {expr} without the value of a data-dependent size{detail}; "
            "add a check such as torch._check() or expect_true() that settles it"
        )
