"""The user's source behind a code object: the function's syntax tree and node lookups by span.

A code object knows its file (``co_filename``), its first line and, per instruction, the
span of source it came from (``co_positions``). ``FunctionSource`` finds the ``def`` (or
``lambda``) the code was compiled from in the file's syntax tree (read through
``linecache``), and indexes its expression and statement nodes by span, so that the
decompiler can go from an instruction to the syntax that produced it.
"""

from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass, field

from ._instr import Location

__all__ = ["FunctionSource", "SourceUnavailable", "Span", "find_function", "span_of"]

Span = tuple[int, int, int, int]  # lineno, col_offset, end_lineno, end_col_offset


class SourceUnavailable(LookupError):
    """The source of a code object cannot be found (or no longer matches it)."""


def span_of(node: ast.AST) -> Span | None:
    end_lineno = getattr(node, "end_lineno", None)
    if end_lineno is None or getattr(node, "col_offset", None) is None:
        return None
    return node.lineno, node.col_offset, end_lineno, node.end_col_offset  # type: ignore[attr-defined]


def location_span(loc: Location | None) -> Span | None:
    if loc is None or loc.lineno is None or loc.col_offset is None or loc.end_lineno is None \
            or loc.end_col_offset is None or loc.lineno < 1:
        return None
    if (loc.lineno, loc.col_offset) == (loc.end_lineno, loc.end_col_offset):
        return None  # an empty span: no expression (a lambda's return, a function's RESUME)
    return loc.lineno, loc.col_offset, loc.end_lineno, loc.end_col_offset


def contains(outer: Span, inner: Span) -> bool:
    return (outer[0], outer[1]) <= (inner[0], inner[1]) and (inner[2], inner[3]) <= (outer[2], outer[3])


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


@dataclass
class FunctionSource:
    """A function's syntax tree (``node``, a FunctionDef or Lambda) and its nodes by span."""

    filename: str
    node: ast.AST
    lines: list[str]
    parents: dict[int, ast.AST] = field(default_factory=dict)
    by_span: dict[Span, list[ast.AST]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        todo = [self.node]
        while todo:
            parent = todo.pop()
            for child in ast.iter_child_nodes(parent):
                self.parents[id(child)] = parent
                if isinstance(child, _SCOPES) and child is not self.node:
                    continue  # another function's code: never this code's instructions
                span = span_of(child)
                if span is not None:
                    self.by_span.setdefault(span, []).append(child)
                todo.append(child)

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(id(node))

    def expr_at(self, span: Span) -> ast.expr | None:
        """The outermost expression with exactly ``span``."""
        nodes = [n for n in self.by_span.get(span, ()) if isinstance(n, ast.expr)]
        for n in nodes:
            if not any(self.parent(n) is m for m in nodes):
                return n  # type: ignore[return-value]
        return None

    def innermost(self, span: Span, kinds: type | tuple[type, ...]) -> ast.AST | None:
        """The innermost node of ``kinds`` whose span contains ``span``."""
        best: ast.AST | None = None
        best_span: Span | None = None
        for node_span, nodes in self.by_span.items():
            if not contains(node_span, span):
                continue
            for n in nodes:
                if isinstance(n, kinds) and (best_span is None or contains(best_span, node_span)):
                    best, best_span = n, node_span
        return best

    def text(self, span: Span) -> str:
        """The source text of ``span`` (columns are UTF-8 byte offsets)."""
        first, col, last, end_col = span
        rows = [line.encode() for line in self.lines[first - 1:last]]
        if not rows:
            return ""
        if len(rows) == 1:
            return rows[0][col:end_col].decode(errors="replace")
        return b"".join([rows[0][col:], *rows[1:-1], rows[-1][:end_col]]).decode(errors="replace")


def find_function(filename: str, first_lineno: int, spans: list[Span]) -> FunctionSource:
    """The function defined at ``first_lineno`` of ``filename`` whose body holds every span of
    ``spans`` (the instruction positions of its code). Raises SourceUnavailable."""
    lines = linecache.getlines(filename)
    if not lines:
        raise SourceUnavailable(f"the source of {filename} is not available")
    try:
        tree = ast.parse("".join(lines), filename)
    except SyntaxError as e:
        raise SourceUnavailable(f"{filename} does not parse: {e}") from None
    candidates = []
    for node in ast.walk(tree):
        if not isinstance(node, _SCOPES):
            continue
        decorators = getattr(node, "decorator_list", [])
        start = min([node.lineno, *(d.lineno for d in decorators)])
        span = span_of(node)
        if start == first_lineno and span is not None and all(contains(span, s) for s in spans):
            candidates.append(node)
    # the innermost: a lambda defined on the line of its enclosing def holds fewer spans
    candidates.sort(key=lambda n: (n.end_lineno - n.lineno, n.end_col_offset - n.col_offset))
    if not candidates:
        raise SourceUnavailable(f"no function at {filename}:{first_lineno} holds the code's positions "
                                "(the file changed since it was compiled?)")
    return FunctionSource(filename, candidates[0], lines)
