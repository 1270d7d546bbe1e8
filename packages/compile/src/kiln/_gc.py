"""Full collections of Python's cyclic garbage collector deferred while kiln compiles a frame.

A compile allocates hundreds of thousands of short-lived objects (sympy expressions, FX
nodes, kernels' text). Each time enough survive CPython's young generations, it runs a full
collection, which walks every object of the process (torch, transformers, the model: about
400,000 objects here, 115 ms a collection). A 12-layer GPT-2 training step's first call ran
two of them, 0.23 s of its 2.55 s; the young collections took 0.025 s.

``deferred_full_collections`` raises the oldest generation's threshold while kiln compiles
(capture, its backends, guards), and restores the thresholds found when the outermost compile
ends (several threads may compile at once: the first in sets it, the last out restores it). The
young generations are still collected as before, so cyclic garbage that dies young is freed as
usual; what reaches the oldest generation waits for the next full collection after the compile.
Thresholds someone else set during the compile are left as they are, and so is a collector
switched off by a threshold of 0.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["deferred_full_collections"]

_NEVER = 2**31 - 1  # the oldest generation's threshold while compiling
_lock = threading.Lock()
_depth = 0
_found: tuple[int, ...] | None = None  # the thresholds when the outermost compile began
_set: tuple[int, ...] | None = None  # what it set them to (None: it left them)


@contextlib.contextmanager
def deferred_full_collections() -> Iterator[None]:
    """Within it, the cyclic collector runs no full collection (see the module docstring)."""
    global _depth, _found, _set
    with _lock:
        if _depth == 0:
            _found = gc.get_threshold()
            _set = None
            if len(_found) == 3 and _found[0] > 0 and _found[2] < _NEVER:
                _set = (_found[0], _found[1], _NEVER)
                gc.set_threshold(*_set)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _set is not None and gc.get_threshold() == _set and _found is not None:
                    gc.set_threshold(*_found)
                _found = _set = None
