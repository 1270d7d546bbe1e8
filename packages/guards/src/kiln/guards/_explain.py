"""Evaluating guards one at a time, and explaining the first failure as text.

This is the slow, transparent twin of the compiled checker: it fetches each source with
``Source.fetch`` and asks each guard's ``explain``. It never raises: a source that cannot
be fetched, or a guard that raises while checking, is reported as the failure. For every
guard list and frame, ``explain_failure(...) is None`` exactly when the compiled checker
returns True; tests hold the two to that.

Failure text names the source expression, what was expected and what was found, e.g.
``tensor L['x'] size(0): expected 8, got 16``; it feeds the ``recompiles`` log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kiln.guards._base import Guard, safe_repr
from kiln.guards._sources import Source

__all__ = ["evaluate", "explain_all", "explain_failure"]


def _error_text(exc: BaseException) -> str:
    try:
        message = str(exc)
        if type(message) is not str:
            raise TypeError
    except Exception:
        message = safe_repr(exc, 120)
    message = message if len(message) <= 120 else message[:117] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _fetch(source: Source, L: dict[str, Any], G: dict[str, Any] | None) -> Any:
    """Fetch ``source``; on failure raise LookupError naming the first step that failed."""
    try:
        return source.fetch(L, G)
    except Exception as exc:
        failed: Source = source
        for node in source.chain():
            try:
                node.fetch(L, G)
            except Exception:
                failed = node
                break
        raise LookupError(f"{failed}: could not fetch ({_error_text(exc)})") from None


def evaluate(guard: Guard, L: dict[str, Any], G: dict[str, Any] | None = None) -> str | None:
    """Check one guard against a frame's locals ``L`` and globals ``G``.

    Returns None when it holds, else the failure text. Never raises.
    """
    try:
        values = [_fetch(s, L, G) for s in guard.sources]
    except LookupError as exc:
        return str(exc.args[0])
    try:
        result = guard.explain(*values)
    except Exception as exc:
        try:
            what = str(guard.describe())
        except Exception:
            what = type(guard).__name__
        return f"{what}: check raised {_error_text(exc)}"
    return None if result is None else str(result)


def _ordered(guards: Iterable[Guard]) -> list[Guard]:
    from kiln.guards._guard_set import GuardSet, order_guards

    if isinstance(guards, GuardSet):
        return guards.ordered()
    ordered = getattr(guards, "guards", None)  # a compiled checker keeps its order
    if isinstance(ordered, tuple):
        return list(ordered)
    return order_guards(guards)


def explain_failure(
    guards: Iterable[Guard], L: dict[str, Any], G: dict[str, Any] | None = None
) -> str | None:
    """The first failing guard (in check order) as text, or None when all hold.

    ``guards`` is a GuardSet, a compiled checker or any iterable of guards.
    """
    for guard in _ordered(guards):
        text = evaluate(guard, L, G)
        if text is not None:
            return text
    return None


def explain_all(
    guards: Iterable[Guard], L: dict[str, Any], G: dict[str, Any] | None = None
) -> list[str]:
    """Every failing guard's text, in check order (empty when all hold)."""
    return [t for g in _ordered(guards) if (t := evaluate(g, L, G)) is not None]
