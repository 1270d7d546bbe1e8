"""Marks a user puts on a tensor's dimensions before calling compiled code.

``mark_dynamic(t, dim, min=, max=)``: the dimension is a symbol from the first compile (also
under ``dynamic=None``/``False``), within ``[min, max]`` when given (checked now and guarded);
a size of 0 or 1 is specialized (as under torch.compile); if the code needs it to be one
value, compiling fails with
``ConstraintViolation`` naming the size, the value and, where kiln knows it, the user's line.
``maybe_mark_dynamic(t, dim)``: the same without the error (the code may specialize it).
``mark_static(t, dim)``: never a symbol, even under ``dynamic=True``.

Marks live on the tensor (``t._kiln_dim_marks``, as torch keeps its own in
``t._dynamo_dynamic_indices``): they go with it, copies included, and die with it. Only
the compile policy reads them, from the real tensor; the traced code never does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ConstraintViolation", "DimMark", "mark_dynamic", "mark_static", "marks_of", "maybe_mark_dynamic"]


class ConstraintViolation(RuntimeError):
    """A dimension marked dynamic (``mark_dynamic``) that the compiled code specializes."""


@dataclass(frozen=True, slots=True)
class DimMark:
    kind: str  # "dynamic", "maybe" or "static"
    min: int | None = None
    max: int | None = None


def _dims(t: Any, dim: Any, what: str) -> list[int]:
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} expects a tensor, got {type(t).__name__}")
    dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    out = []
    for d in dims:
        if type(d) is not int:
            raise TypeError(f"{what}: a dimension is an int, got {type(d).__name__}")
        if not -t.dim() <= d < t.dim():
            raise IndexError(f"{what}: dimension {d} out of range for a {t.dim()}-d tensor")
        out.append(d % t.dim())
    return out


_ATTR = "_kiln_dim_marks"


def _mark(t: Any, dims: list[int], mark: DimMark) -> None:
    marks = t.__dict__.setdefault(_ATTR, {})
    for d in dims:
        marks[d] = mark


def mark_dynamic(t: Any, dim: int | list[int], *, min: int | None = None, max: int | None = None) -> None:
    """Make dimension(s) ``dim`` of ``t`` symbols from the first compile; see the module docs."""
    for name, v in (("min", min), ("max", max)):
        if v is not None and type(v) is not int:
            raise TypeError(f"mark_dynamic: {name} is an int, got {type(v).__name__}")
    if min is not None and max is not None and min > max:
        raise ValueError(f"mark_dynamic: min={min} > max={max}")
    dims = _dims(t, dim, "mark_dynamic")
    for d in dims:
        size = t.shape[d]
        if (min is not None and size < min) or (max is not None and size > max):
            raise ValueError(f"mark_dynamic: dimension {d} has size {size}, outside [{min}, {max}]")
    _mark(t, dims, DimMark("dynamic", min, max))


def maybe_mark_dynamic(t: Any, dim: int | list[int]) -> None:
    """Make dimension(s) ``dim`` of ``t`` symbols, without an error if the code specializes them."""
    _mark(t, _dims(t, dim, "maybe_mark_dynamic"), DimMark("maybe"))


def mark_static(t: Any, dim: int | list[int]) -> None:
    """Keep dimension(s) ``dim`` of ``t`` static sizes, even under ``dynamic=True``."""
    _mark(t, _dims(t, dim, "mark_static"), DimMark("static"))


def marks_of(t: Any) -> dict[int, DimMark]:
    """The marks on ``t``'s dimensions (empty when none)."""
    return getattr(t, "__dict__", {}).get(_ATTR, {})
