"""Backends: what turns a captured GraphModule into the callable the replacement code runs.

A backend is a name from ``backend_rules`` or any callable ``backend(gm, example_inputs)``
returning a callable. ``"eager"`` runs the graph's generated Python (``gm.forward``).
``"aot_eager"`` and ``"inductor"`` are reserved for kiln.aotgrad and kiln.inductor and
raise a clear error until those land.
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


def _not_yet(name: str, package: str) -> Backend:
    def backend(gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
        raise BackendUnavailable(f"backend {name!r} needs {package}, which is not available yet; "
                                 "use backend='eager' or pass a callable backend")

    return backend


backend_rules: dict[str, Backend] = {
    "eager": _eager,
    "aot_eager": _not_yet("aot_eager", "kiln.aotgrad"),
    "inductor": _not_yet("inductor", "kiln.aotgrad and kiln.inductor"),
}


def resolve_backend(backend: str | Backend) -> Backend:
    """The backend callable for a name or callable; unknown names are an error."""
    if callable(backend):
        return backend
    if isinstance(backend, str) and backend in backend_rules:
        return backend_rules[backend]
    raise BackendUnavailable(f"unknown backend {backend!r}; known: {', '.join(sorted(backend_rules))}")
