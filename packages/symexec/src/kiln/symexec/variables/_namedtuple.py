"""Methods of namedtuples (and their subclasses) on tuple trackers: ``_asdict`` and
``_replace`` evaluated item by item, any other method of the class (user methods of a
namedtuple subclass) inlined as a Python function called with the tuple."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._containers import DictVariable, TupleVariable, field_names
from ._errors import traced_error

if TYPE_CHECKING:
    from .._translator import Translator

__all__ = ["namedtuple_method"]


def namedtuple_method(tx: Translator, t: VariableTracker, name: str, args: list[VariableTracker],
                      kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``t.name(*args, **kwargs)`` for a namedtuple tracker ``t`` and a method tuple lacks."""
    tp = t.python_type()
    fields = field_names(tp)
    if fields is not None and hasattr(tp, "_make"):
        if name == "_asdict" and not args and not kwargs:
            return DictVariable(dict(zip(fields, t.items, strict=True)))
        if name == "_replace" and not args:
            unknown = set(kwargs) - set(fields)
            if unknown:
                raise traced_error(ValueError(f"Got unexpected field names: {sorted(unknown)!r}"))
            return TupleVariable([kwargs.get(f, i) for f, i in zip(fields, t.items, strict=True)], tuple_type=tp)
    func = getattr(tp, name, None)
    if isinstance(func, types.FunctionType) and not name.startswith("_"):
        return tx.builder.wrap(func, None).call(tx, [t, *args], kwargs)
    raise Unsupported(f"method {name!r} of {t.describe()} is not supported")
