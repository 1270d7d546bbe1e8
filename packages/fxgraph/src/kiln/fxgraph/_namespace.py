"""Namespace: hands out unique, readable Python identifiers.

Invariant: every name handed out is a valid identifier, not a keyword and not ``self``, and
was never handed out before by this namespace; generated names also avoid builtin names. Repeated bases are numbered
``add``, ``add_1``, ``add_2``... in O(1) per name.
"""

from __future__ import annotations

import builtins
import keyword
import re

__all__ = ["Namespace", "sanitize"]

# Exact names (placeholders are argument names) may shadow builtins: the code generator
# reaches builtins through its own globals when a node takes their name.
_RESERVED_EXACT = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | {"self"}
_RESERVED = frozenset(dir(builtins)) | _RESERVED_EXACT
_INVALID = re.compile(r"[^0-9a-zA-Z_]+")
_NUMBERED = re.compile(r"^(.*)_(\d+)$")


def sanitize(candidate: str) -> str:
    """Turn any text into an identifier-shaped base name (``aten.add.Tensor`` -> ``aten_add_Tensor``)."""
    base = _INVALID.sub("_", candidate) or "_unnamed"
    if base[0].isdigit():
        base = "_" + base
    return base


class Namespace:
    """Unique names for the nodes of one graph (or the globals of one generated module)."""

    __slots__ = ("_counters", "_used")

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._counters: dict[str, int] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._used

    def create_name(self, candidate: str) -> str:
        """A fresh name based on ``candidate``."""
        base = sanitize(candidate)
        m = _NUMBERED.match(base)
        if m is not None:
            base = m.group(1)
        if base not in self._used and base not in _RESERVED:
            self._used.add(base)
            return base
        i = self._counters.get(base, 0)
        while True:
            i += 1
            name = f"{base}_{i}"
            if name not in self._used:
                break
        self._counters[base] = i
        self._used.add(name)
        return name

    def claim(self, name: str) -> bool:
        """Take ``name`` exactly; False if it is taken, reserved or not an identifier."""
        if name in self._used or name in _RESERVED_EXACT or not name.isidentifier():
            return False
        self._used.add(name)
        return True

    def release(self, name: str) -> None:
        """Give a name back (its node was erased)."""
        self._used.discard(name)
