"""Wrapping values made at trace time (results of constant folding, copies) as trackers."""

from __future__ import annotations

from typing import Any

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable, FrozenObjectVariable, frozen_types, is_constant_value
from ._containers import DictVariable, ListVariable, RangeVariable, TupleVariable

__all__ = ["wrap_trace_value"]


def wrap_trace_value(value: Any) -> VariableTracker:
    """A tracker for a value computed at trace time (no source, so no guards)."""
    if isinstance(value, VariableTracker):
        return value
    if is_constant_value(value):
        return ConstantVariable(value)
    if isinstance(value, frozen_types()):
        return FrozenObjectVariable(value)
    from ._torch import grad_mode_instance

    manager = grad_mode_instance(value)
    if manager is not None:
        return manager
    t = type(value)
    if t is range:
        return RangeVariable(value)
    if isinstance(value, tuple):
        return TupleVariable([wrap_trace_value(v) for v in value], tuple_type=t)
    if t is list:
        return ListVariable([wrap_trace_value(v) for v in value])
    if t is set:
        from ._containers import SetVariable

        return SetVariable([wrap_trace_value(v) for v in value], real=value)  # eager's layout
    if t is dict:
        return DictVariable({k: wrap_trace_value(v) for k, v in value.items()})
    raise Unsupported(f"a value of type {t.__name__} made at trace time cannot be tracked")
