"""The guard compiler: ordered guards in, one generated Python checker function out.

Calling convention (what kiln.frameeval relies on): ``check(L)`` where ``L`` is the frame's
locals as a dict (names to values). The frame's globals are bound at compile time as the
default of a second parameter, ``check(L, G=<globals given to compile>)``, the way torch
binds ``f_globals`` when it builds guards (``M``, the root of module sources, is
``sys.modules``, bound the same way); a caller whose code object may run under
several globals dicts passes ``G`` explicitly. The result is a bool, and the checker never
raises an ``Exception`` on any ``L``: the whole body sits in one ``try`` (free until
something raises) and any exception — a missing key or attribute, a hostile ``__eq__`` —
means "fails" (``KeyboardInterrupt`` and other BaseExceptions still propagate).

Shape of the generated code: each source is fetched once, into a local, right before the
first guard that needs it; its prefixes are shared, so ``L['self']._modules`` is read once
however many guards sit below it. A guard that has already read a source's value on the
way (``CodeContext.provide``) lends it, so the fetch reuses that cheaper expression. Each
guard contributes ``if not (...): return False`` lines in the order ``order_guards`` chose;
a condition already emitted is not repeated. Guards of one ``batch_key`` (tensor matches)
are checked by one ``emit_batch`` call placed where the last of them stands; a member whose
source lies under another member's source stays out of the batch, and guards reading below
a batched source wait until the batch has run, so a tensor is never looked into before its
own match.

The function carries ``source`` (the generated text), ``guards`` (the check order) and
``explain(L, G=...)`` (the first failure as text, or None).
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Sequence
from typing import Any

from kiln.guards._base import CodeContext, Guard
from kiln.guards._sources import Source, TensorSizeSource, TensorStrideSource

__all__ = ["compile_guards"]

_INDENT = " " * 8


def _batches(order: Sequence[Guard]) -> dict[int, list[Guard]]:
    """Batches keyed by the order index where each is emitted (its last member's)."""
    groups: dict[str, list[Guard]] = {}
    for g in order:
        if g.batch_key is not None:
            groups.setdefault(g.batch_key, []).append(g)
    out: dict[int, list[Guard]] = {}
    position = {g: i for i, g in enumerate(order)}
    for members in groups.values():
        roots = {s for g in members for s in g.sources}
        inner = [g for g in members if any(a in roots for s in g.sources for a in s.chain()[:-1])]
        batch = [g for g in members if g not in inner]
        overridden = batch and type(batch[0]).emit_batch.__func__ is not Guard.emit_batch.__func__
        if len(batch) > 1 or overridden:
            out[max(position[g] for g in batch)] = batch
    return out


class _Writer:
    """Accumulates the checker's lines and the locals holding fetched sources."""

    def __init__(self, ctx: CodeContext) -> None:
        self.ctx = ctx
        self.lines: list[str] = []
        self.vars: dict[Source, str] = {}
        self.seen: set[str] = set()  # conditions already checked: pure, so never repeated
        # a tensor's whole ``shape`` / ``stride()`` read once, for its sizes and strides
        self.wholes: dict[tuple[str, Source], str] = {}

    def fetch(self, source: Source) -> str:
        known = self.vars.get(source)
        if known is not None:  # most sources are fetched again, by the next guard on them
            return known
        for node in source.chain():
            if node not in self.vars:
                lent = self.ctx.provided.get(node)
                if lent is not None and lent.isidentifier():
                    self.lines.append(f"{_INDENT}# {_one_line(node)} is {lent}")
                    self.vars[node] = lent
                    continue
                base = "" if node.base is None else self.vars[node.base]
                name = f"v{len(self.vars)}"
                access = lent or self._dimension(node, base) or node.access(base)
                self.lines.append(f"{_INDENT}{name} = {access}  # {_one_line(node)}")
                self.vars[node] = name
        return self.vars[source]

    def _dimension(self, node: Source, base: str) -> str | None:
        """``shape[d]`` / ``strides[d]`` for a tensor's size or stride (one ``x.shape`` read
        serves every dimension: a ``size(d)`` call costs as much as the whole shape)."""
        if type(node) is TensorSizeSource:
            kind, whole = "sizes", f"{base}.shape"
        elif type(node) is TensorStrideSource:
            kind, whole = "strides", f"{base}.stride()"
        else:
            return None
        name = self.wholes.get((kind, node.base))
        if name is None:
            name = self.wholes[(kind, node.base)] = f"{kind}{len(self.wholes)}"
            self.lines.append(f"{_INDENT}{name} = {whole}")
        return f"{name}[{node.dim}]"

    def conditions(self, comment: str, conds: list[str]) -> None:
        self.lines.append(f"{_INDENT}# {_one_line(comment)}")
        for c in conds:
            if c not in self.seen:
                self.seen.add(c)
                self.lines.append(f"{_INDENT}if not ({c}): return False")


def _one_line(text: object, limit: int = 160) -> str:
    """``text`` fit for a comment: one line, printable characters only, at most ``limit``."""
    s = " ".join(str(text).split())
    if not s.isprintable():  # rare: escape character by character
        s = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in s)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _reads_under(guard: Guard, roots: set[Source]) -> bool:
    """Whether ``guard`` reads one of ``roots`` or something reached through one."""
    return any(node in roots for s in guard.sources for node in s.chain())


def generate(order: Sequence[Guard], ctx: CodeContext) -> str:
    """The checker's source for guards in ``order``; constants go into ``ctx``.

    A batch is emitted where its last member stands; a guard before that point which reads
    a batched source (or below one) waits until the batch has run, so that a value is
    never looked into before the guard establishing its type.
    """
    w = _Writer(ctx)
    batches = _batches(order)
    batched = {g for members in batches.values() for g in members}
    pending = {s for members in batches.values() for g in members for s in g.sources}
    waiting: list[Guard] = []

    def emit_one(guard: Guard) -> None:
        exprs = tuple(w.fetch(s) for s in guard.sources)
        w.conditions(guard.describe(), guard.emit(ctx, *exprs))

    for i, guard in enumerate(order):
        if i in batches:
            members = batches[i]
            exprs = [tuple(w.fetch(s) for s in g.sources) for g in members]
            conds = type(members[0]).emit_batch(ctx, members, exprs)
            if conds is not None:
                w.conditions(f"{len(members)} x {type(members[0]).__name__} (batched)", conds)
            else:
                for g, e in zip(members, exprs, strict=True):
                    w.conditions(g.describe(), g.emit(ctx, *e))
            pending -= {s for g in members for s in g.sources}
            still = [g for g in waiting if _reads_under(g, pending)]
            for g in waiting:
                if g not in still:
                    emit_one(g)
            waiting = still
            continue
        if guard in batched:
            continue
        if _reads_under(guard, pending):
            waiting.append(guard)
            continue
        emit_one(guard)
    for g in waiting:
        emit_one(g)
    head = ["def check(L, G=_G):", "    try:"]
    tail = [f"{_INDENT}return True", "    except Exception:", f"{_INDENT}return False", ""]
    return "\n".join(head + w.lines + tail)


def compile_guards(
    order: Sequence[Guard], globals: dict[str, Any] | None = None, *, native: bool = True,
    code_of: Any = None,
) -> Any:
    """Compile guards, already in check order, to one checker function.

    Takes the guards (as ``GuardSet.ordered()`` returns them), the frame's globals dict
    (None when no guard reads ``G``) and whether torch's native guard helpers may be used;
    returns ``check(L, G=globals) -> bool`` with ``.source``, ``.code`` (the compiled module
    of ``.source``), ``.guards`` and ``.explain``. ``code_of(source)``, when given, stands in
    for ``compile`` (a cache of compiled checkers: it must return the code of ``source``).
    """
    from kiln.guards._explain import explain_failure

    order = tuple(order)
    if globals is None and any(s.uses_globals() for g in order for s in g.sources):
        raise ValueError("guards read G (global sources) but no globals dict was given")
    ctx = CodeContext(native)
    source = generate(order, ctx)
    namespace = dict(ctx.namespace)
    namespace["_G"] = globals
    namespace["M"] = sys.modules  # the root of ModuleSource
    namespace["__builtins__"] = builtins
    code = compile(source, "<kiln.guards checker>", "exec") if code_of is None else code_of(source)
    exec(code, namespace)
    check = namespace["check"]
    check.source = source
    check.code = code
    check.guards = order

    def explain(L: dict[str, Any], G: dict[str, Any] | None = globals) -> str | None:
        return explain_failure(order, L, G)

    check.explain = explain
    return check
