"""A code object's parameter list as Python source: what a ``def`` line generated for it (a
replacement's source, a decompiled one) says between its parentheses."""

from __future__ import annotations

import inspect
import types

__all__ = ["signature"]


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
