"""VariableTracker: what the symbolic interpreter holds instead of a Python value.

Every value on the symbolic stack or in a symbolic local is a tracker. A tracker knows how to
answer the operations Python code performs on it (attribute reads, calls, iteration, truth)
either at trace time (constants, containers, modules) or by adding nodes to the graph
(tensors). ``source`` says where the value came from in the frame (``L['x'].weight``) when
it came from there; trackers built during tracing have no source.

Invariants: trackers never hold real tensors that flow into the graph (those are graph
inputs, reached through their source); an operation a tracker cannot model raises
``Unsupported`` with a reason naming the value and the operation, never a wrong answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["VariableTracker"]


class VariableTracker:
    """Base class; see the module docstring. Subclasses override what they model."""

    __slots__ = ("source",)

    def __init__(self, source: Source | None = None) -> None:
        self.source = source

    # -- what it is --------------------------------------------------------------------------

    def python_type(self) -> type:
        """The Python type the real value would have."""
        raise Unsupported(f"the type of {self.describe()} is not known at trace time")

    def is_constant(self) -> bool:
        """Whether the value is a Python constant known at trace time."""
        return False

    def as_constant(self) -> Any:
        """The Python value, when it is known at trace time."""
        raise Unsupported(f"{self.describe()} is not a constant known at trace time")

    def describe(self) -> str:
        """Words naming the value for error messages (its source when it has one)."""
        kind = type(self).__name__.removesuffix("Variable").lower() or "value"
        return f"{kind} {self.source}" if self.source is not None else f"a {kind} value"

    # -- what Python code does with it ---------------------------------------------------------

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        """``value.name``."""
        raise Unsupported(f"reading attribute {name!r} of {self.describe()} is not supported")

    def store_attr(self, tx: Translator, name: str, value: VariableTracker) -> None:
        """``value.name = v``."""
        raise Unsupported(f"assigning attribute {name!r} of {self.describe()} is not supported")

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``value(*args, **kwargs)``."""
        raise Unsupported(f"calling {self.describe()} is not supported")

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``value.name(*args, **kwargs)``; by default the attribute, then a call."""
        return self.get_attr(tx, name).call(tx, args, kwargs)

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        """The items ``for v in value`` would produce, all of them, at trace time."""
        raise Unsupported(f"iterating over {self.describe()} is not supported")

    def get_iter(self, tx: Translator) -> VariableTracker:
        """``iter(value)``: an iterator tracker. By default one over the items ``iterate``
        gives now; containers the trace may still change give iterators that read them as
        they advance (``variables._iterators``)."""
        from ._containers import IteratorVariable

        return IteratorVariable(self.iterate(tx))

    def truth(self, tx: Translator) -> bool:
        """``bool(value)`` at trace time (a value known at trace time: its own answer)."""
        if self.is_constant():
            return bool(self.as_constant())  # functions, classes, modules: true
        raise Unsupported(f"the truth value of {self.describe()} is not known at trace time")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"
