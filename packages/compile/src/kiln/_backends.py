"""Backends: what turns a captured GraphModule into the callable the replacement code runs.

A backend is a name from ``backend_rules`` or any callable ``backend(gm, example_inputs)``
returning a callable. ``"eager"`` runs the graph's generated Python (``gm.forward``).
``"aot_eager"`` and ``"inductor"`` are reserved for kiln.aotgrad and kiln.inductor:
``kiln.compile`` raises a clear error for them until those land.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["BackendUnavailable", "backend_rules", "resolve_backend"]

Backend = Callable[[Any, list[Any]], Callable[..., Any]]


class BackendUnavailable(RuntimeError):
    """The named backend exists in kiln's plan but is not built yet, or is unknown."""


def _eager(gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
    return gm.forward


backend_rules: dict[str, Backend] = {
    "eager": _eager,
}
# Names reserved for backends still to come, with what they need.
_PLANNED = {"aot_eager": "kiln.aotgrad", "inductor": "kiln.aotgrad and kiln.inductor"}


def resolve_backend(backend: str | Backend) -> Backend:
    """The backend callable for a name or callable; unknown or unbuilt names are an error."""
    if callable(backend):
        return backend
    if isinstance(backend, str) and backend in backend_rules:
        return backend_rules[backend]
    if isinstance(backend, str) and backend in _PLANNED:
        raise BackendUnavailable(
            f"backend {backend!r} needs {_PLANNED[backend]}, which is not available yet; "
            "use backend='eager' or pass a callable backend(gm, example_inputs)")
    known = sorted([*backend_rules, *_PLANNED])
    raise BackendUnavailable(f"unknown backend {backend!r}; known: {', '.join(known)}")
