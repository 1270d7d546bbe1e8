"""Replacement code: the function body that runs instead of a captured frame.

It is generated as Python source, readable in logs::

    def forward(self, x):
        __kiln_out = __kiln_graph(x, self.fc.weight, self.fc.bias)
        return (__kiln_out[0], 3)

then compiled with the ``__kiln_*`` names of objects that have no literal (the compiled graph,
types, other constants) turned into constants of the code object, so nothing is added to
the user's module globals and loading them costs one LOAD_CONST. The generated function has the
original's exact argument layout and free variables (frameeval requires it): parameters are
listed in the original order and every free variable is referenced once.
"""

from __future__ import annotations

import hashlib
import keyword
import linecache
import sys
import types
import warnings
from dataclasses import dataclass, field
from typing import Any

from kiln.guards import GlobalSource, ItemSource, LocalSource, ModuleSource, Source

from .bytecode import REPLACEMENT_PREFIX, names_to_constants, signature

__all__ = ["ReplacementSource", "build_replacement", "render_source"]


def render_source(source: Source, params: set[str], body: ReplacementSource) -> str:
    """The expression reaching ``source`` from inside the replacement function (``body``
    binds what it needs that has no literal: ``sys.modules`` for a module source)."""
    chain = source.chain()
    root = chain[0]
    if isinstance(root, LocalSource):
        expr = root.name
    elif isinstance(root, GlobalSource):
        expr = root.name if root.name not in params else f"globals()[{root.name!r}]"
    elif isinstance(root, ModuleSource):
        expr = f"{body.ref(sys.modules, 'modules')}[{root.name!r}]"
    else:
        raise ValueError(f"cannot render a source rooted at {root!r}")
    for step in chain[1:]:
        if isinstance(step, ItemSource) and not step.literal:
            expr = f"{expr}[{body.ref(step.key, 'key')}]"  # a key named by its import path
        else:
            expr = step.access(expr)
    return expr


@dataclass(slots=True)
class ReplacementSource:
    """Source text of a replacement body being assembled, plus the objects it refers to."""

    lines: list[str] = field(default_factory=list)
    objects: dict[str, Any] = field(default_factory=dict)

    def ref(self, obj: Any, hint: str = "k") -> str:
        """A name that will load ``obj`` (rewritten to LOAD_CONST)."""
        for name, known in self.objects.items():
            if known is obj:
                return name
        name = f"__kiln_{hint}{len(self.objects)}"
        self.objects[name] = obj
        return name


def build_replacement(code: types.CodeType, body: ReplacementSource,
                      template: types.CodeType | None = None) -> types.CodeType:
    """Compile ``body`` into a code object with ``code``'s argument layout and free variables.
    ``template``: what ``replacement_template(code, body)`` gave for the same text (a cache's
    copy), used instead of compiling the text again."""
    if template is None:
        template = replacement_template(code, body)
    else:
        _register_text(code, body)  # the source lines tracebacks show
    placeholders = {_placeholder(ref): obj for ref, obj in body.objects.items()}
    return _bind_objects(template, placeholders).replace(co_qualname=code.co_qualname)


def replacement_template(code: types.CodeType, body: ReplacementSource) -> types.CodeType:
    """``body`` compiled with a placeholder string constant for each of its objects (see
    ``build_replacement``); its source text is registered with ``linecache``. Marshal can
    write it (a disk cache keeps it)."""
    name, full, filename = _register_text(code, body)
    # Objects without a literal are loaded as constants: the source names them
    # (``__kiln_graph``), the compiled text holds a placeholder string in their place, and
    # the placeholder is swapped for the object in co_consts (``build_replacement``).
    tree = names_to_constants(full, set(body.objects), _placeholder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "'str' object is not callable"
        module = compile(tree, filename, "exec")
    return _find_code(module, name)


def _register_text(code: types.CodeType, body: ReplacementSource) -> tuple[str, str, str]:
    """The replacement function's name, its module's source text and file name (registered
    with ``linecache``)."""
    name = code.co_name if code.co_name.isidentifier() and not keyword.iskeyword(code.co_name) else "replacement"
    inner = [f"def {name}({', '.join(signature(code))}):"]
    if code.co_freevars:
        inner.append("    if False:")
        inner.append(f"        {', '.join(code.co_freevars)},")
    inner += [f"    {line}" for line in body.lines]
    text = "\n".join(inner) + "\n"
    if code.co_freevars:
        outer = [f"def __kiln_make({', '.join(code.co_freevars)}):"]
        outer += [f"    {line}" for line in text.splitlines()]
        outer.append(f"    return {name}")
        full = "\n".join(outer) + "\n"
    else:
        full = text
    digest = hashlib.sha1(full.encode()).hexdigest()[:10]
    filename = f"{REPLACEMENT_PREFIX}{code.co_qualname} {digest}>"
    linecache.cache[filename] = (len(full), None, full.splitlines(True), filename)
    return name, full, filename


def _find_code(module: types.CodeType, name: str) -> types.CodeType:
    for const in module.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name:
                return const
            found = _find_code(const, name)
            if found is not None:
                return found
    return None  # type: ignore[return-value]


def _bind_objects(code: types.CodeType, objects: dict[str, Any]) -> types.CodeType:
    """Swap the placeholder string constants for the objects they stand for, wherever the
    compiler put them: CPython folds constant expressions (``(__kiln_k0, 1)`` becomes one
    tuple constant, ``x in {__kiln_k0}`` a frozenset) and nested code objects have constants
    of their own. A placeholder left anywhere is an error, never a value the user sees."""
    if not objects:
        return code
    consts = tuple(_bind_constant(c, objects) for c in code.co_consts)
    return code.replace(co_consts=consts)


def _bind_constant(const: Any, objects: dict[str, Any]) -> Any:
    tp = type(const)
    if tp is str:
        if const.startswith(_PLACEHOLDER_PREFIX):
            if const not in objects:
                raise ValueError(f"replacement code holds an unbound placeholder {const!r}")
            return objects[const]
        return const
    if tp is tuple:
        return tuple(_bind_constant(c, objects) for c in const)
    if tp is frozenset:
        bound = [_bind_constant(c, objects) for c in const]
        # a set of objects that are not hashable cannot be a constant; refuse it rather
        # than build something else
        return frozenset(bound)
    if tp is types.CodeType:
        return _bind_objects(const, objects)
    return const


_PLACEHOLDER_PREFIX = "\x00kiln:"


def _placeholder(name: str) -> str:
    # A string constant no user code contains; it becomes the object in co_consts.
    return f"{_PLACEHOLDER_PREFIX}{name}"
