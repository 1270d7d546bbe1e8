"""Loop nests as C++ lines: ``loops`` (one ``for`` per variable), ``block`` (a braced,
indented body), and ``split_invariant`` (a loop body's lines split into those that do not
depend on the loop's variable, hoisted before the loop, and the rest)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import sympy

from ._ops import cexpr

__all__ = ["block", "loops", "runs", "split_invariant"]


def loops(variables: tuple[sympy.Symbol, ...], sizes: tuple[sympy.Expr, ...], indent: str) -> list[str]:
    return [f"{indent}for (int64_t {v} = 0; {v} < {cexpr(s)}; ++{v})" for v, s in zip(variables, sizes, strict=True)]


def block(body: list[str], indent: str) -> list[str]:
    return [f"{indent}{{", *(f"{indent}    {line}" for line in body), f"{indent}}}"]


_NAME = re.compile(r"\b(tmp\d+|[a-z]\d+)\b")


def split_invariant(lines: list[str], variable: str | Iterable[str]) -> tuple[list[str], list[str]]:
    """``lines`` of a loop body over ``variable`` (or several) split into those that do not
    depend on it (run once, before the loop: an index loaded and checked for a whole row) and
    the rest, each list in order. A line depends on the variable when it names it or a
    temporary of a line that does; a comment stays where it is. Only for a loop that
    provably runs at least once (``runs``): a hoisted check or load would otherwise run where
    the loop runs none."""
    hoisted: list[str] = []
    varying: list[str] = []
    dependent = {variable} if isinstance(variable, str) else set(variable)
    for line in lines:
        if line.startswith("//"):
            varying.append(line)
            continue
        names = set(_NAME.findall(line))
        defined = line.split(" = ", 1)[0].split()[-1] if " = " in line and not line.startswith("if") else None
        uses = names - {defined} if defined else names
        if uses & dependent:
            varying.append(line)
            if defined:
                dependent.add(defined)
        else:
            hoisted.append(line)
    return hoisted, varying


def runs(sizes: Sequence[sympy.Expr]) -> bool:
    """Whether a loop nest over ``sizes`` provably runs at least once."""
    return all(sympy.sympify(s).is_positive for s in sizes)
