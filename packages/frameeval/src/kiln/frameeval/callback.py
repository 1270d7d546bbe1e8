"""A context manager that sets this thread's frameeval callback for a block.

Invariant: on exit the thread's previous callback is back in place, whatever the block
raised, so nested uses compose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import CodeType, FunctionType
from typing import Any

from kiln.frameeval._C import set_callback

Callback = Callable[[CodeType, dict[str, Any], FunctionType], Any]


@contextmanager
def callback_set(callback: Callback | object | None) -> Iterator[None]:
    """Set this thread's callback (a callable, ``RUN_ONLY`` or None) inside the block."""
    previous = set_callback(callback)
    try:
        yield
    finally:
        set_callback(previous)
