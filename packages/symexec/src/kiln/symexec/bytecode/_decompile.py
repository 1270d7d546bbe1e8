"""Decompiling kiln's generated code objects back to readable Python.

``decompile_code(code)`` recognizes what kiln generated and gives a ``DecompiledCode``:

- a *resume function* (named ``RESUME_PREFIX...``): the user's own source continued at the
  break, with the stack values in place (``_decompile_resume``);
- a *replacement* (compiled from a file named ``REPLACEMENT_PREFIX...``): its straight-line
  code decompiled and checked by compiling it again (``_decompile_replacement``).

``exact`` says whether the source surely does what the code does; where it is False, ``why``
says why and ``source`` is the disassembly (``dis``) instead: never source that would do
something else. ``recompile()`` compiles an exact result back into a code object with the
same name and arguments, keeping the user's file name and line numbers.
"""

from __future__ import annotations

import ast
import dis
import io
import os
import types
from dataclasses import dataclass, field
from typing import Any

from ._decompile_replacement import decompile_replacement, recompile_replacement
from ._decompile_resume import NotExact, decompile_resume
from ._decompile_source import SourceUnavailable
from ._resume import RESUME_PREFIX

__all__ = ["REPLACEMENT_FILE_PREFIX", "REPLACEMENT_PREFIX", "DecompiledCode", "NotExact", "decompile_code",
           "is_replacement", "is_resume"]

REPLACEMENT_PREFIX = "<kiln replacement of "  # the file name of every replacement code object
# ... or, where its source was written out as a file (kiln's trace does, for debuggers), the
# start of that file's name
REPLACEMENT_FILE_PREFIX = "kiln-replacement-"


def is_resume(code: types.CodeType) -> bool:
    """Whether ``code`` is a resume function kiln made (``make_resume``)."""
    return code.co_name.startswith(RESUME_PREFIX) and not is_replacement(code)


def is_replacement(code: types.CodeType) -> bool:
    """Whether ``code`` is replacement code kiln generated for a captured frame."""
    name = code.co_filename
    return name.startswith(REPLACEMENT_PREFIX) or (
        name.endswith(".py") and os.path.basename(name).startswith(REPLACEMENT_FILE_PREFIX))


@dataclass
class DecompiledCode:
    """One code object as Python source.

    ``kind``: "resume", "replacement" or "other"; ``source``: the Python source when
    ``exact``, else the disassembly; ``why``: None when exact, else the reason;
    ``tree``: the module the source was unparsed from (resume functions: positioned in the
    user's file); ``objects``: what the ``__kiln_*`` names of a replacement stand for."""

    code: types.CodeType
    kind: str
    source: str
    exact: bool
    why: str | None = None
    tree: ast.Module | None = None
    objects: dict[str, Any] = field(default_factory=dict)

    def recompile(self) -> types.CodeType:
        """The source compiled back into a code object (same name and arguments; the user's
        file and lines for a resume function). ValueError when not exact."""
        if not self.exact:
            raise ValueError(f"{self.code.co_qualname} was not decompiled exactly: {self.why}")
        if self.kind == "replacement":
            return recompile_replacement(self.code, self.source, self.objects)
        assert self.tree is not None
        module = compile(self.tree, self.code.co_filename, "exec")
        found = next(c for c in module.co_consts if isinstance(c, types.CodeType) and c.co_name == self.code.co_name)
        return found.replace(co_qualname=self.code.co_qualname)

    def __str__(self) -> str:
        head = f"# {self.kind} {self.code.co_qualname} ({self.code.co_filename}:{self.code.co_firstlineno})"
        if not self.exact:
            head += f"\n# not decompiled exactly: {self.why}\n# disassembly:"
        return f"{head}\n{self.source.rstrip()}\n"


def disassembly(code: types.CodeType) -> str:
    out = io.StringIO()
    dis.dis(code, file=out, depth=0)
    return out.getvalue()


def decompile_code(code: types.CodeType) -> DecompiledCode:
    """``code`` as Python source (see the module docstring)."""
    if is_replacement(code):  # (a resume function's replacement has the resume function's name)
        kind = "replacement"
    elif is_resume(code):
        kind = "resume"
    else:
        return DecompiledCode(code, "other", disassembly(code), False,
                              "it is not code kiln generated (neither a resume function nor a replacement)")
    try:
        if kind == "resume":
            tree = decompile_resume(code)
            source = ast.unparse(tree) + "\n"
            result = DecompiledCode(code, kind, source, True, None, tree)
            result.recompile()  # the source must compile
            return result
        text, objects = decompile_replacement(code)
        return DecompiledCode(code, kind, text, True, None, None, objects)
    except (NotExact, SourceUnavailable) as e:
        return DecompiledCode(code, kind, disassembly(code), False, str(e))
    except (SyntaxError, ValueError) as e:
        return DecompiledCode(code, kind, disassembly(code), False, f"the decompiled source does not compile: {e}")
    except Exception as e:  # a shape the decompiler did not foresee: say so, never guess
        return DecompiledCode(code, kind, disassembly(code), False,
                              f"the decompiler failed: {type(e).__name__}: {e}")
