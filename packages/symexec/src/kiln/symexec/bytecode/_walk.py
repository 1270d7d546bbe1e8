"""Walking nested code objects and rebuilding a code object around replaced children.

A function's code object holds the code of the functions, lambdas, comprehensions and
classes it defines as constants. ``walk_code`` visits them depth-first (parent first);
``map_code`` rebuilds a whole tree bottom-up with a transformation applied to every code
object (children are transformed before the parent sees them in its constants).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import CodeType

__all__ = ["map_code", "walk_code"]


def walk_code(code: CodeType) -> Iterator[CodeType]:
    """``code`` and every code object nested in its constants, recursively, parent first."""
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from walk_code(const)


def map_code(code: CodeType, fn: Callable[[CodeType], CodeType]) -> CodeType:
    """Apply ``fn`` to every code object of the tree, children first; return the new root.

    ``fn`` receives each code object with its nested code constants already replaced.
    """
    consts = tuple(map_code(c, fn) if isinstance(c, CodeType) else c for c in code.co_consts)
    if any(a is not b for a, b in zip(consts, code.co_consts, strict=True)):
        code = code.replace(co_consts=consts)
    return fn(code)
