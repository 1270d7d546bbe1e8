"""``kiln.decompile``: the code kiln generated for a function, as readable Python.

For a function (a ``kiln.compile`` wrapper, a compiled or plain ``nn.Module``: its
``forward``; or a code object), every variant kiln compiled for its code (a replacement code
object itself, as the trace keeps it, is decompiled with the resume functions it holds): the replacement of
each cache entry of the frame cache (``kiln.frameeval.get_cache_entries``), then each resume
function those replacements call, and in turn the entries and resume functions of those
(a resume function that breaks again). Each is decompiled by
``kiln.symexec.bytecode.decompile_code``; where one cannot be decompiled exactly, its part
says why and shows the disassembly instead.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

import kiln.frameeval as fe
from kiln.symexec.bytecode import DecompiledCode, decompile_code, is_replacement, is_resume

__all__ = ["Decompiled", "decompile"]


@dataclass
class Decompiled:
    """What ``kiln.decompile`` gives: ``parts`` (title, DecompiledCode) in order, the whole
    ``source``, ``exact`` (every part exact) and ``why`` (the reasons of the parts that are
    not, None when exact)."""

    target: str
    parts: list[tuple[str, DecompiledCode]] = field(default_factory=list)
    empty_why: str | None = None

    @property
    def exact(self) -> bool:
        return self.empty_why is None and all(part.exact for _, part in self.parts)

    @property
    def why(self) -> str | None:
        if self.empty_why is not None:
            return self.empty_why
        reasons = [f"{title}: {part.why}" for title, part in self.parts if not part.exact]
        return "; ".join(reasons) if reasons else None

    @property
    def source(self) -> str:
        return "\n".join(f"# --- {title}\n{part}" for title, part in self.parts)

    def __str__(self) -> str:
        head = f"# kiln.decompile({self.target}): {len(self.parts)} generated code object(s)"
        if not self.exact:
            head += f"\n# not exact: {self.why}"
        return f"{head}\n{self.source}"


def _code_of(obj: Any) -> types.CodeType:
    if isinstance(obj, types.CodeType):
        return obj
    inner = getattr(obj, "_kiln_compiled", None)
    if inner is not None:
        return _code_of(inner)
    import torch

    from ._compiled_module import CompiledModule

    if isinstance(obj, CompiledModule):
        return _code_of(obj._orig_mod)
    if isinstance(obj, torch.nn.Module):
        return _code_of(type(obj).forward)
    if isinstance(obj, types.MethodType):
        return _code_of(obj.__func__)
    code = getattr(obj, "__code__", None)
    if isinstance(code, types.CodeType):
        return code
    raise TypeError(f"kiln.decompile takes a function, a kiln.compile wrapper, an nn.Module or a code object, "
                    f"not {type(obj).__name__}")


def _resume_functions(code: types.CodeType) -> list[types.FunctionType]:
    """The resume functions a replacement code calls (its constants, nested ones included)."""
    found: list[types.FunctionType] = []
    todo: list[Any] = list(code.co_consts)
    while todo:
        const = todo.pop(0)
        if isinstance(const, types.FunctionType) and is_resume(const.__code__):
            if all(f is not const for f in found):
                found.append(const)
        elif isinstance(const, (tuple, frozenset)):
            todo.extend(const)
        elif isinstance(const, types.CodeType):
            todo.extend(const.co_consts)
    return found


def decompile(obj: Any) -> Decompiled:
    """Every variant kiln compiled for ``obj``'s code, as Python source (see the module
    docstring). Works on what the current session compiled so far."""
    code = _code_of(obj)
    result = Decompiled(code.co_qualname)
    seen: set[int] = set()

    def visit(code: types.CodeType, title: str | None) -> None:
        if id(code) in seen:
            return
        seen.add(id(code))
        if title is not None:
            result.parts.append((title, decompile_code(code)))
        for i, entry in enumerate(fe.get_cache_entries(code)):
            replacement = entry.code
            result.parts.append((f"cache entry {i} of {code.co_qualname}: replacement code",
                                 decompile_code(replacement)))
            for fn in _resume_functions(replacement):
                visit(fn.__code__, f"resume function {fn.__name__} (called by entry {i} of {code.co_qualname})")

    if is_replacement(code):  # a generated replacement itself (a trace's): it, and the resume functions it calls
        result.parts.append((f"replacement code of {code.co_qualname}", decompile_code(code)))
        for fn in _resume_functions(code):
            visit(fn.__code__, f"resume function {fn.__name__}")
    else:
        visit(code, f"resume function {code.co_name}" if is_resume(code) else None)
    if not result.parts:
        result.empty_why = (f"kiln has compiled nothing for {code.co_qualname} in this session "
                            "(call it through kiln.compile first)")
    return result
