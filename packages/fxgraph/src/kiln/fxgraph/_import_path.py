"""Import paths: name an object by the dotted path that imports it (``torch.ops.aten.add.Tensor``).

Used by the code generator (to write ``torch.relu`` rather than an opaque global) and by
pickling (targets such as ATen operators are not picklable by value, but their path is).
A path is only ever returned when following it leads back to the very same object.
"""

from __future__ import annotations

import importlib
import re
import sys
from typing import Any

__all__ = ["find_import_path", "load_import_path"]

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
# Modules whose objects report a private module name but live in a public one.
_PUBLIC_MODULE = {"_operator": "operator", "posix": "os", "_functools": "functools"}


def _candidates(obj: Any) -> list[str]:
    out = []
    module = getattr(obj, "__module__", None)
    if isinstance(module, str):
        module = _PUBLIC_MODULE.get(module, module)
        for n in (getattr(obj, "__name__", None), getattr(obj, "__qualname__", None)):
            if isinstance(n, str) and "<" not in n:
                out.append(f"{module}.{n}")
    text = repr(obj)
    if _DOTTED.match(text):
        out.append(text)  # torch.float32, torch.contiguous_format
    text = str(obj)
    if _DOTTED.match(text):
        out.append(f"torch.ops.{text}")  # ATen overloads print as aten.add.Tensor
    return out


def _follow(obj: Any, attr_path: str) -> Any:
    for p in attr_path.split(".") if attr_path else ():
        obj = getattr(obj, p)
    return obj


def find_import_path(obj: Any) -> str | None:
    """A dotted path from an imported top-level module back to ``obj``, or None."""
    for path in _candidates(obj):
        root, _, rest = path.partition(".")
        if root not in sys.modules:
            continue
        try:
            if _follow(sys.modules[root], rest) is obj:
                return path
        except Exception:
            continue
    return None


def load_import_path(path: str) -> Any:
    """The object at ``path``, importing its module if needed."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        return _follow(module, ".".join(parts[i:]))
    raise ImportError(f"cannot import {path!r}")
