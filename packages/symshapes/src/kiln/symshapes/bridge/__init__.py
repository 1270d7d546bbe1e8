"""kiln.symshapes.bridge: kiln's symbolic sizes inside torch, and fake tensors.

The only part of kiln.symshapes that imports torch. ``KilnSymNode`` lets
``torch.SymInt(node)`` carry kiln expressions through torch's meta kernels and Python
decompositions; ``FakeTensorMode``/``FakeTensor`` propagate metadata (device, dtype,
symbolic sizes/strides, aliasing) through ATen ops without data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from kiln.symshapes.bridge import _data_dependent  # noqa: F401  (registers the rules)
from kiln.symshapes.bridge._convert import to_real
from kiln.symshapes.bridge._dispatch_cache import DispatchCache
from kiln.symshapes.bridge._fake_mode import (
    FakeTensorMode,
    UnsupportedOpError,
    data_dependent_rules,
)
from kiln.symshapes.bridge._fake_tensor import FakeStorage, FakeTensor
from kiln.symshapes.bridge._fast_reshape import reshape_plan
from kiln.symshapes.bridge._frontend import no_frontend_import
from kiln.symshapes.bridge._shape_env_view import ShapeEnvView
from kiln.symshapes.bridge._sym_node import KilnSymNode, from_torch, to_torch
from kiln.symshapes.bridge._user_state import hide_user_state

__all__ = [
    "DispatchCache",
    "FakeStorage",
    "FakeTensor",
    "FakeTensorMode",
    "KilnSymNode",
    "ShapeEnvView",
    "UnsupportedOpError",
    "data_dependent_rules",
    "from_real",
    "from_torch",
    "hide_user_state",
    "no_frontend_import",
    "reshape_plan",
    "to_real",
    "to_torch",
]


def from_real(
    mode: FakeTensorMode,
    tensor: torch.Tensor,
    *,
    dynamic_dims: Iterable[int] = (),
    name: str | None = None,
    size_source: Callable[[int], object] | None = None,
) -> FakeTensor:
    """A FakeTensor of ``mode`` with ``tensor``'s metadata; ``dynamic_dims`` become symbols
    in ``mode.shape_env`` bound to ``DimSource(name, dim)`` (or ``size_source(dim)``)."""
    return mode.from_real(tensor, dynamic_dims=dynamic_dims, name=name, size_source=size_source)
