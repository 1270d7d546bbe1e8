"""What kiln.frameeval can and cannot see, per CPython version: one table per version.

Invariant: this is the only module of the package that reads ``sys.version_info``; the C
side keeps its version knowledge in ``csrc/compat.h``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limitations:
    """Known blind spots of the frame hook on one CPython version."""

    #: ``Cls(...)`` for a Python class runs ``__init__`` without calling the evaluation
    #: function once the call site is specialized (``CALL_ALLOC_AND_ENTER_INIT``, 3.13):
    #: kiln must intercept such calls another way (e.g. at the caller).
    init_bypasses_hook: bool


PY311 = Limitations(init_bypasses_hook=False)
PY312 = Limitations(init_bypasses_hook=False)
PY313 = Limitations(init_bypasses_hook=True)

_BY_VERSION = {(3, 11): PY311, (3, 12): PY312, (3, 13): PY313}

#: The limitations of the running interpreter.
LIMITATIONS: Limitations = _BY_VERSION[sys.version_info[:2]]
