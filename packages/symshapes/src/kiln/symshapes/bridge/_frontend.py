"""A kiln trace never loads torch's own compiler frontend (``torch._dynamo``).

Many of torch's Python meta kernels and references, which fake tensors run, are wrapped by
``torch._disable_dynamo``. The wrapper's first call imports ``torch._dynamo`` (and through
it parts of ``torch._inductor``: about 1 s, most of a fresh process's first compile) only
to build ``torch._dynamo.disable(fn)``, a twin of ``fn`` that turns torch.compile's frame
callback off while ``fn`` runs, and caches it on ``fn``. Inside ``no_frontend_import()``
each wrapped function that has no twin yet gets itself as its twin, so the wrapper calls
it directly, and the scope that set the attribute removes it when it closes.

Why that is the same behaviour: while ``torch._dynamo`` has never been imported, torch's
frame callback cannot be set (only that package sets it), so the twin would have nothing
to turn off. The scope does nothing when ``torch._dynamo`` is already loaded. If it gets
loaded while a scope is open (another thread starting torch.compile), a wrapped function
called there runs without the callback turned off until the scope closes: torch.compile
may then trace into one of its own references instead of skipping it, a slower compile,
never a different result.

Invariants:
- On close, no wrapped function keeps an attribute this scope set; an attribute set before
  (by an enclosing scope, or a real twin torch built) is left alone.
- No state outside the scope: a nested scope finds the attributes set and sets nothing. A
  scope closing in one thread while another thread's trace runs only costs that trace the
  import (the attributes are gone), never a different result.
- Wrapped functions are found once (``dynamo_disable_wrappers``, cached, ~10 ms); ones torch
  creates later (custom ops registered afterwards) are not covered and import
  ``torch._dynamo`` on their first call, as without this module.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator

from kiln.symshapes.bridge._torch_internals import DYNAMO_DISABLE_ATTR, dynamo_disable_wrappers

__all__ = ["no_frontend_import"]

_FRONTEND = "torch._dynamo"
_wrappers = functools.cache(dynamo_disable_wrappers)  # torch's functions: fixed once imported


@contextlib.contextmanager
def no_frontend_import() -> Iterator[None]:
    """While open, torch's ``_disable_dynamo`` wrappers do not import ``torch._dynamo``."""
    mine = []
    if _FRONTEND not in sys.modules:
        for fn in _wrappers():
            if DYNAMO_DISABLE_ATTR not in fn.__dict__:
                fn.__dict__[DYNAMO_DISABLE_ATTR] = fn
                mine.append(fn)
    try:
        yield
    finally:
        for fn in mine:
            if fn.__dict__.get(DYNAMO_DISABLE_ATTR) is fn:
                del fn.__dict__[DYNAMO_DISABLE_ATTR]
