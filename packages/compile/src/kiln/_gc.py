"""Full collections of Python's cyclic garbage collector deferred while kiln compiles a frame.

A compile allocates hundreds of thousands of short-lived objects (sympy expressions, FX
nodes, kernels' text). Each time enough survive CPython's young generations, it runs a full
collection, which walks every object of the process (torch, transformers, the model: about
400,000 objects here, 115 ms a collection). A 12-layer GPT-2 training step's first call ran
two of them, 0.23 s of its 2.55 s; the young collections took 0.025 s.

``deferred_full_collections`` raises the oldest generation's threshold while kiln compiles
(capture, its backends, guards) and puts back the thresholds it found when it ends. It keeps no
state of its own: a deferral that finds the threshold already raised (a compile inside a
compile, or another thread's) leaves it to the one that raised it, and a deferral puts the
thresholds back only if they are still what it set (someone else's thresholds, set during the
compile, stay; a collector switched off by a threshold of 0 is left so). Where threads compile
at once, the first to finish puts the thresholds back, and the others' compiles go on with
full collections as usual. The young generations are still collected as before, so cyclic
garbage that dies young is freed as usual; what reaches the oldest generation waits for the
next full collection after the compile.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["deferred_full_collections"]

_NEVER = 2**31 - 1  # the oldest generation's threshold while compiling


@contextlib.contextmanager
def deferred_full_collections() -> Iterator[None]:
    """Within it, the cyclic collector runs no full collection (see the module docstring)."""
    found = gc.get_threshold()
    raised = None
    if len(found) == 3 and found[0] > 0 and found[2] < _NEVER:
        raised = (found[0], found[1], _NEVER)
        gc.set_threshold(*raised)
    try:
        yield
    finally:
        if raised is not None and gc.get_threshold() == raised:
            gc.set_threshold(*found)
