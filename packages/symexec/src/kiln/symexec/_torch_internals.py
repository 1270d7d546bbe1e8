"""The private torch attributes symexec reads, in one place (torch 2.11 to 2.13).

- ``version_counter(t)``: ``Tensor._version``, bumped by every in-place change of ``t`` or of
  a view sharing its memory (views share their base's counter); -1 where torch keeps none
  (inference tensors).
- ``view_base(t)``: ``Tensor._base``, the tensor a view was made from, or None.
"""

from __future__ import annotations

from typing import Any

__all__ = ["version_counter", "view_base"]


def version_counter(t: Any) -> int:
    """``t._version``, or -1 when ``t`` keeps no version counter."""
    try:
        return t._version
    except RuntimeError:  # "Inference tensors do not track version counter"
        return -1


def view_base(t: Any) -> Any:
    """``t._base``: the tensor ``t`` is a view of, or None."""
    return t._base
