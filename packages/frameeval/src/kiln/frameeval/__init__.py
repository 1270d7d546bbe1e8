"""kiln.frameeval: the PEP 523 frame hook and the per-code-object cache of compiled entries.

When a thread has a callback set, every Python function frame that starts on that thread
goes through kiln's evaluation function (a C extension) before any of its bytecode runs:

1. Frames that are never intercepted run untouched: generator, coroutine and async-generator
   frames and their resumes, frames already started, ``throw()`` paths, module and class
   bodies and ``exec``/``eval`` code, frames started by the callback or a guard (per-thread
   re-entrancy guard), code marked with :func:`mark_skip` (replacement code always is).
2. The code's cache entries are tried in order (newest first): the first entry whose
   ``guard(L)`` is true has its replacement code run in place of the frame, from C, with the
   frame's arguments. ``L`` is a new dict of the frame's argument names (positional,
   keyword-only, ``*args`` tuple, ``**kwargs`` dict) and bound free variables to values,
   the same mapping that ``kiln.guards`` checkers take.
3. On a miss, in run-only mode (``set_callback(RUN_ONLY)``) the frame runs normally; else the
   callback is called as ``callback(code, L, func)`` (``func`` is the frame's function) and
   answers ``None`` or the frame's own code (run normally), ``SKIP`` (run normally and never
   intercept this code again) or another code object (run it in place of the frame, once).

Errors: an exception raised by a guard or by the callback propagates to the caller of the
frame, which does not run; the cache is left as it was. A replacement must have the same
argument layout as the original (counts, names, ``*``/``**``, free variables); a mismatch
raises ValueError. The callback and run-only mode are per thread; the evaluation function is
installed while at least one thread has a callback and the previous one is restored after,
unless :func:`keep_installed` asks to keep it (for callers that set a callback per call).

Cache entries and skip marks live in the code object's extra slot, which the garbage
collector does not traverse: an entry whose guard or replacement reaches back to its code
object keeps both alive until :func:`clear_cache` or :func:`reset`.

In a source checkout the extension is compiled on import when it is missing for the running
interpreter or older than its C sources (see ``_build``); an installed wheel carries it.
"""

from kiln.frameeval._build import ensure_built

ensure_built()

from kiln.frameeval._C import (  # noqa: E402
    RUN_ONLY,
    SKIP,
    CacheEntry,
    active_threads,
    add_cache_entry,
    callback_set,
    clear_cache,
    get_cache_entries,
    get_callback,
    is_installed,
    is_skipped,
    keep_installed,
    mark_skip,
    reset,
    set_callback,
)
from kiln.frameeval._compat import LIMITATIONS  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "LIMITATIONS",
    "RUN_ONLY",
    "SKIP",
    "CacheEntry",
    "active_threads",
    "add_cache_entry",
    "callback_set",
    "clear_cache",
    "get_cache_entries",
    "get_callback",
    "is_installed",
    "is_skipped",
    "keep_installed",
    "mark_skip",
    "reset",
    "set_callback",
]
