"""What kiln.symexec's code generator and the decompiler share about a replacement's source:
a code object's parameter list as Python source (what a ``def`` line generated for it says
between its parentheses), and the rewrite of object names into string constants that
compiling such source uses (the code then holds the objects in their place)."""

from __future__ import annotations

import ast
import inspect
import types
from collections.abc import Callable, Collection
from typing import Any

__all__ = ["names_to_constants", "signature"]


def signature(code: types.CodeType) -> list[str]:
    """The parameters of ``code`` in order, with ``/``, ``*``, ``*args`` and ``**kwargs`` where
    its flags and counts put them."""
    names = code.co_varnames
    nargs, nposonly, nkw = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    params = list(names[:nargs])
    if nposonly:
        params.insert(nposonly, "/")
    i = nargs + nkw
    if code.co_flags & inspect.CO_VARARGS:
        params.append("*" + names[i])
        i += 1
    elif nkw:
        params.append("*")
    params += names[nargs:nargs + nkw]
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append("**" + names[i])
    return params


def names_to_constants(text: str, names: Collection[str], constant: Callable[[str], str]) -> ast.Module:
    """``text`` parsed, with each name in ``names`` read as a variable replaced by the string
    constant ``constant(name)``; the same characters inside a string literal, or after a dot,
    stay as they are (a user's string ``"__kiln_graph"`` is data, not a reference). Done on the
    syntax tree: the tokenize module is quadratic in a line's length on Python 3.12 before
    3.12.4, and a graph call over thousands of inputs is one long line."""
    tree = ast.parse(text)

    def replaced(value: Any) -> Any:
        if type(value) is ast.Name and value.id in names and type(value.ctx) is ast.Load:
            return ast.copy_location(ast.Constant(constant(value.id)), value)
        return value

    for node in ast.walk(tree):
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                value[:] = [replaced(v) for v in value]
            else:
                setattr(node, field, replaced(value))
    return tree
