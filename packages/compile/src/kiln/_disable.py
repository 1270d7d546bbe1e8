"""``kiln.disable``: run a function without kiln, as ``torch.compiler.disable``.

``recursive=True`` (the default) runs the function and everything it calls with kiln's
frame callback off. ``recursive=False`` skips only the function's own frame: the functions
it calls are still compiled. Both wrappers say ``_kiln_disabled``, so kiln.symexec refuses
to trace a call to them (a graph break there, an error with ``fullgraph``). A non-recursive
wrapper's frame is kiln's code (never a root); the frame it starts, the function's own, is
recognised by the policy from its caller's code (``NONRECURSIVE_CODE``) and runs as it is,
that once, as torch's convert_frame recognises its non-recursive disable wrapper.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import kiln.frameeval as fe

__all__ = ["NONRECURSIVE_CODE", "disable"]


def disable(fn: Callable[..., Any] | None = None, recursive: bool = True) -> Any:
    """Run ``fn`` without kiln, also when called from compiled code (decorator or call).

    ``recursive=False`` skips ``fn``'s frame only; what ``fn`` calls is compiled as usual.
    ``kiln.disable(recursive=False)`` without ``fn`` is a decorator."""
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    if not callable(fn):
        raise TypeError(f"kiln.disable expects a callable, got {type(fn).__name__}")
    return _disable_all(fn) if recursive else _skip_frame(fn)


def _disable_all(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def eager(*args: Any, **kwargs: Any) -> Any:
        previous = fe.set_callback(None)
        try:
            return fn(*args, **kwargs)
        finally:
            fe.set_callback(previous)

    eager._kiln_disabled = True  # type: ignore[attr-defined]
    return eager


def _skip_frame(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def skip_frame(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)  # the policy runs the frame this call starts as it is

    skip_frame._kiln_disabled = True  # type: ignore[attr-defined]
    return skip_frame


# Every non-recursive wrapper runs this code object: a frame it calls is the disabled one.
NONRECURSIVE_CODE: types.CodeType = _skip_frame(len).__code__
