"""Rewriting the user's syntax tree into a resume function's body (see ``_decompile_resume``).

``Rewriter`` is told what each stack value stands for (an expression's value, a method and
its ``self``, a with block's ``__exit__``), rewrites the interrupted statement with those
values in place, nests the rest of the function around it, and ``build_function`` wraps
the result in a ``def`` with the resume function's name and arguments. New nodes take the
position of the statement they stand for, so tracebacks point at the user's lines.
"""

from __future__ import annotations

import ast
import copy
from types import CodeType
from typing import Any

from ._decompile_source import FunctionSource, Span, contains, span_of

__all__ = ["Rewriter", "build_function"]

_Key = tuple[type, Span]


def _key(node: ast.AST) -> _Key | None:
    span = span_of(node)
    return (type(node), span) if span is not None else None


def _load(name: str, like: ast.AST) -> ast.Name:
    return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), like)


def _locate(nodes: list[ast.stmt], like: ast.AST | None) -> list[ast.stmt]:
    """Give every new node (one without a position) the position of ``like``."""
    if like is None:
        return nodes
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, (ast.expr, ast.stmt, ast.excepthandler)) and not hasattr(node, "lineno"):
                ast.copy_location(node, like)
    return nodes


_LOOPS = (ast.For, ast.While, ast.AsyncFor)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class Rewriter:
    def __init__(self, src: FunctionSource) -> None:
        self.src = src
        self.values: dict[_Key, str] = {}  # expression -> the argument holding its value
        self.methods: dict[_Key, tuple[str, str]] = {}  # call -> (method, self) arguments
        self.exits: dict[int, list[str]] = {}  # id(with statement) -> its exits' arguments
        self.with_nodes: dict[int, ast.With] = {}
        self.spans: list[Span] = []  # where evaluation got to (stack values and the target)
        self.method_spans: list[Span] = []  # the ``obj.name`` of each method on the stack
        self.comprehensions: list[ast.expr] = []  # whose function is on the stack
        self._lambda_stmt: ast.Return | None = None

    # -- what the stack holds ------------------------------------------------------------

    def value(self, node: ast.expr, name: str) -> None:
        key = _key(node)
        if key in self.values or key in self.methods:
            raise _not_exact("two stack values stand for the same expression")
        self.values[key] = name  # type: ignore[index]
        self.spans.append(key[1])  # type: ignore[index]

    def method(self, attribute: ast.expr, method: str, self_: str) -> None:
        call = self.src.parent(attribute)
        if not (isinstance(call, ast.Call) and call.func is attribute):
            raise _not_exact("a method and its self on the stack are not called")
        self.methods[_key(call)] = (method, self_)  # type: ignore[index]
        self.method_spans.append(span_of(attribute))  # type: ignore[arg-type]
        self.spans.append(span_of(attribute))  # type: ignore[arg-type]

    def comprehension(self, node: ast.expr) -> None:
        """A comprehension's function (3.11) is on the stack: the source's comprehension,
        its first iterable a stack value above, makes and calls the same function."""
        self.comprehensions.append(node)

    def with_exit(self, node: ast.With, name: str) -> None:
        self.exits.setdefault(id(node), []).append(name)
        self.with_nodes[id(node)] = node

    def exits_of(self, node: ast.AST) -> list[str] | None:
        return self.exits.get(id(node))

    def lambda_return(self) -> ast.Return:
        """A lambda's body as the statement ``return <body>``."""
        if self._lambda_stmt is None:
            body = self.src.node.body  # type: ignore[attr-defined]
            self._lambda_stmt = ast.copy_location(ast.Return(value=body), body)
            self.src.parents[id(body)] = self._lambda_stmt
            self.src.parents[id(self._lambda_stmt)] = self.src.node
        return self._lambda_stmt

    # -- the interrupted statement ----------------------------------------------------------

    def _check_nesting(self, stmt: ast.stmt) -> None:
        spans = [k[1] for k in self.values] + self.method_spans
        stmt_span = span_of(stmt)
        for s in spans:
            if stmt_span is None or not contains(stmt_span, s):
                raise _not_exact("a value on the stack comes from outside the interrupted statement")
        for comp in self.comprehensions:
            first = span_of(comp.generators[0].iter)  # type: ignore[attr-defined]
            if first is None or not any(contains(first, s) for s in spans):
                raise _not_exact("a comprehension's function is on the stack but not its iterable")
        for a in spans:
            for b in spans:
                if a != b and contains(a, b):
                    raise _not_exact("a value on the stack is part of another one (a display or call "
                                     "half built)")

    def statement(self, stmt: ast.stmt, anchor: Span) -> list[ast.stmt]:
        """``stmt`` evaluated from where the break left it."""
        self.spans.append(anchor)
        if isinstance(stmt, ast.AugAssign) and (self.values or self.methods):
            current = self.values.pop(_key(stmt.target), None)  # type: ignore[arg-type]
            if current is None:
                raise _not_exact("an augmented assignment's target was not read before the break")
            self._check_nesting(stmt)
            target = copy.deepcopy(stmt.target)
            update = ast.AugAssign(target=ast.Name(id=current, ctx=ast.Store()), op=stmt.op,
                                   value=self._expr(stmt.value))
            store = self._expr(target)
            store.ctx = ast.Store()
            return _locate([update, ast.Assign(targets=[store], value=ast.Name(id=current, ctx=ast.Load()))],
                           stmt)
        self._check_nesting(stmt)
        if isinstance(stmt, ast.Return) and self._lambda_stmt is stmt:
            return [ast.copy_location(ast.Return(value=self._expr(stmt.value)), stmt)]
        return [_Substitute(self).visit(copy.deepcopy(stmt))]

    def _expr(self, node: ast.expr) -> ast.expr:
        return _Substitute(self).visit(copy.deepcopy(node))

    def assert_fails(self, stmt: ast.Assert) -> list[ast.stmt]:
        self._check_nesting(stmt)
        exc: ast.expr = ast.Name(id="AssertionError", ctx=ast.Load())
        if stmt.msg is not None:
            exc = ast.Call(func=exc, args=[self._expr(stmt.msg)], keywords=[])
        return _locate([ast.Raise(exc=exc, cause=None)], stmt)

    def handler_entry(self, where: Span, exc: str) -> tuple[list[ast.stmt], ast.stmt]:
        """The try statement whose handler holds ``where``, entered with exception ``exc``."""
        node = self.src.innermost(where, (ast.ExceptHandler, ast.stmt))
        while node is not None:
            parent = self.src.parent(node)
            if isinstance(parent, ast.Try):
                if isinstance(node, ast.ExceptHandler):
                    handlers, kind = copy.deepcopy(parent.handlers), "except"
                    break
                if any(node is s for s in parent.finalbody):
                    handlers, kind = [], "finally"
                    break
            node = parent
        else:
            raise _not_exact("the handler the resume function starts at belongs to no try statement")
        del kind
        raise_ = ast.Raise(exc=ast.Name(id=exc, ctx=ast.Load()), cause=None)
        try_ = ast.Try(body=[raise_], handlers=handlers, orelse=[], finalbody=copy.deepcopy(parent.finalbody))
        return _locate([try_], parent), parent

    # -- the rest of the function --------------------------------------------------------

    def nest(self, stmts: list[ast.stmt], at: Any) -> list[ast.stmt]:
        """``stmts`` followed by the rest of the function after ``at``, nested as in the source."""
        if at is None:
            self._check_exits_used(set())
            return stmts
        if isinstance(at, tuple):  # ("exit", with statement): its body is done
            with_node = at[1]
            node, container, index = with_node, with_node, len(with_node.body) - 1
            levels = [(container, "body", index)]
            levels += self._levels(node)
        else:
            levels = self._levels(at)
        used: set[int] = set()
        for parent, field, index in levels:
            if parent is self.src.node:
                stmts = stmts + copy.deepcopy(self._body()[index + 1:])
                break
            siblings = getattr(parent, field)
            if field not in ("cases", "handlers"):
                stmts = stmts + copy.deepcopy(siblings[index + 1:])
            stmts = _reachable(self._close(parent, field, stmts, used))
        self._check_exits_used(used)
        return _reachable(stmts)

    def _levels(self, stmt: ast.AST) -> list[tuple[ast.AST, str, int]]:
        """(container, field, index) from ``stmt`` up to the function, innermost first."""
        out = []
        node = stmt
        while node is not self.src.node:
            parent = self.src.parent(node)
            if parent is None:
                raise _not_exact("the statement is not inside the function")
            if parent is self.src.node:
                body = self._body()
                out.append((parent, "body", next(i for i, s in enumerate(body) if s is node)))
                break
            for field, value in ast.iter_fields(parent):
                if isinstance(value, list) and any(v is node for v in value):
                    out.append((parent, field, next(i for i, v in enumerate(value) if v is node)))
                    break
            else:  # an expression inside a statement's header: not a body
                raise _not_exact("the resume target is inside an expression that holds statements")
            node = parent
        return out

    def _body(self) -> list[ast.stmt]:
        if isinstance(self.src.node, ast.Lambda):
            return [self.lambda_return()]
        return self.src.node.body  # type: ignore[attr-defined]

    def _close(self, parent: ast.AST, field: str, stmts: list[ast.stmt], used: set[int]) -> list[ast.stmt]:
        """What ends ``parent`` once the rest of its ``field`` ran."""
        if isinstance(parent, _LOOPS):
            if field == "body":
                raise _not_exact("the resume target is inside a loop body")
            return stmts
        if isinstance(parent, (ast.If, ast.match_case, ast.Match)):
            return stmts
        if isinstance(parent, ast.With):
            names = self.exits.get(id(parent))
            if names is None or len(names) != len(parent.items):
                raise _not_exact("a with block around the resume target has no exit on the stack")
            used.add(id(parent))
            for i, name in reversed(list(enumerate(names))):
                stmts = _exit_block(name, stmts, parent, f"___with{len(used) - 1}_{i}")
            return stmts
        if isinstance(parent, ast.Try):
            if field == "body":
                return _locate([ast.Try(body=stmts, handlers=copy.deepcopy(parent.handlers),
                                        orelse=copy.deepcopy(parent.orelse),
                                        finalbody=copy.deepcopy(parent.finalbody))], parent)
            if field == "orelse":
                if not parent.finalbody:
                    return stmts
                return _locate([ast.Try(body=stmts, handlers=[], orelse=[],
                                        finalbody=copy.deepcopy(parent.finalbody))], parent)
            if field == "finalbody":
                return stmts
            raise _not_exact("the resume target is inside an except block")
        if isinstance(parent, ast.ExceptHandler):
            raise _not_exact("the resume target is inside an except block")
        raise _not_exact(f"the resume target is inside a {type(parent).__name__} statement")

    def _check_exits_used(self, used: set[int]) -> None:
        if set(self.exits) - used:
            raise _not_exact("a with block's exit is on the stack but the target is not in its body")


def _reachable(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """``stmts`` up to the first that never falls through (what follows it never runs)."""
    for k, stmt in enumerate(stmts):
        if isinstance(stmt, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
            return stmts[:k + 1]
    return stmts


def _function_body(node: ast.AST) -> list[ast.stmt]:
    if isinstance(node, ast.Lambda):
        return []
    return node.body  # type: ignore[attr-defined]


def _can_leave(stmts: list[ast.stmt]) -> bool:
    """Whether control may leave ``stmts`` other than by falling off the end or raising."""
    todo: list[ast.AST] = list(stmts)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Return, ast.Break, ast.Continue)):
            return True
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _exit_block(exit_: str, body: list[ast.stmt], like: ast.AST, tmp: str) -> list[ast.stmt]:
    """``body`` inside a with block whose ``__exit__`` is ``exit_`` (PEP 343): the exit gets the
    exception (and may swallow it) or, on any other way out, None three times."""
    if _can_leave(body):
        text = (f"{tmp}_ok = True\n"
                "try:\n"
                "    try:\n"
                "        pass\n"
                f"    except BaseException as {tmp}:\n"
                f"        {tmp}_ok = False\n"
                f"        if not {exit_}({tmp}.__class__, {tmp}, {tmp}.__traceback__):\n"
                "            raise\n"
                "finally:\n"
                f"    if {tmp}_ok:\n"
                f"        {exit_}(None, None, None)\n")
        tree = ast.parse(text).body
        _relocate(tree, like)
        tree[1].body[0].body = body or [_relocate([ast.Pass()], like)[0]]
        return tree
    text = ("try:\n"
            "    pass\n"
            f"except BaseException as {tmp}:\n"
            f"    if not {exit_}({tmp}.__class__, {tmp}, {tmp}.__traceback__):\n"
            "        raise\n"
            "else:\n"
            f"    {exit_}(None, None, None)\n")
    tree = ast.parse(text).body
    _relocate(tree, like)
    tree[0].body = body or [_relocate([ast.Pass()], like)[0]]
    return tree


def _relocate(nodes: list[ast.AST], like: ast.AST) -> list[ast.AST]:
    for top in nodes:
        for node in ast.walk(top):
            if hasattr(node, "lineno") or isinstance(node, (ast.expr, ast.stmt, ast.excepthandler)):
                ast.copy_location(node, like)
    return nodes


class _Substitute(ast.NodeTransformer):
    """Stack values in place of the expressions that computed them; decided conditional
    expressions and ``and``/``or`` reduced to what is left to evaluate."""

    def __init__(self, rw: Rewriter) -> None:
        self.rw = rw

    def _progress_in(self, node: ast.AST | None) -> bool:
        span = span_of(node) if node is not None else None
        return span is not None and any(contains(span, s) for s in self.rw.spans)

    def visit(self, node: ast.AST) -> Any:
        key = _key(node) if isinstance(node, ast.expr) else None
        if key is not None and key in self.rw.methods:
            method, self_ = self.rw.methods[key]
            call = node
            return ast.copy_location(ast.Call(func=_load(method, call.func),
                                              args=[_load(self_, call.func), *[self.visit(a) for a in call.args]],
                                              keywords=[self.visit(k) for k in call.keywords]), call)
        if key is not None and key in self.rw.values:
            name = _load(self.rw.values[key], node)
            if isinstance(node, ast.FormattedValue):  # already formatted: a str formats as itself
                return ast.copy_location(ast.FormattedValue(value=name, conversion=-1, format_spec=None), node)
            return name
        if isinstance(node, ast.IfExp):
            if self._progress_in(node.body):
                return self.visit(node.body)
            if self._progress_in(node.orelse):
                return self.visit(node.orelse)
        if isinstance(node, ast.BoolOp):
            decided = max((i for i, v in enumerate(node.values) if self._progress_in(v)), default=0)
            if decided:
                rest = node.values[decided:]
                if len(rest) == 1:
                    return self.visit(rest[0])
                node.values = rest
        if isinstance(node, ast.Compare) and len(node.ops) > 1 \
                and any(self._progress_in(c) for c in node.comparators[1:]):
            raise _not_exact("the break is in the middle of a chained comparison")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" \
                and not node.args and not node.keywords:
            raise _not_exact("super() without arguments needs the frame's __class__ cell")
        return self.generic_visit(node)


def _not_exact(why: str) -> Exception:
    from ._decompile_resume import NotExact

    return NotExact(why)


def _bound_in_scope(fn: ast.AST) -> tuple[set[str], set[str]]:
    """Names ``fn`` binds in its own scope (parameters included) and names it declares global."""
    bound: set[str] = set()
    declared: set[str] = set()
    args = fn.args  # type: ignore[attr-defined]
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if a is not None:
            bound.add(a.arg)
    todo = list(_function_body(fn)) if not isinstance(fn, ast.Lambda) else [fn.body]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            todo.extend(node.decorator_list)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.NamedExpr):
            bound.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif (isinstance(node, ast.ExceptHandler) and node.name) or (isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name):
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            # its own scope: only the first iterable and walrus targets belong to the function
            todo.append(node.generators[0].iter)
            todo.extend(n for n in ast.walk(node) if isinstance(n, ast.NamedExpr))
            continue
        todo.extend(ast.iter_child_nodes(node))
    return bound - declared, declared


def build_function(src: FunctionSource, code: CodeType, body: list[ast.stmt], at: Any) -> ast.Module:
    """A module defining ``code.co_name(<code's arguments>)`` with ``body``, positioned in the
    user's file; locals the function has and does not receive are declared unbound."""
    argnames = list(code.co_varnames[:code.co_argcount])
    bound, declared = _bound_in_scope(src.node)
    read = {n.id for stmt in body for n in ast.walk(stmt)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
    unbound = sorted((bound & set(code.co_varnames) & read) - set(argnames))
    head: list[ast.stmt] = []
    if declared:
        head.append(ast.Global(names=sorted(declared)))
    if unbound:
        targets = [ast.Name(id=n, ctx=ast.Store()) for n in unbound]
        head.append(ast.If(test=ast.Constant(False),
                           body=[ast.Assign(targets=targets, value=ast.Constant(None))], orelse=[]))
    like = at[1] if isinstance(at, tuple) else at if at is not None else (body[0] if body else src.node)
    _locate(head, like)
    fn = ast.parse(f"def {code.co_name}({', '.join(argnames)}):\n    pass\n").body[0]
    fn.body = head + body or [ast.Pass()]
    fn.decorator_list = []
    first = src.node
    fn.lineno, fn.col_offset = code.co_firstlineno, first.col_offset
    fn.end_lineno, fn.end_col_offset = first.end_lineno, first.end_col_offset
    for a in fn.args.args:
        a.lineno, a.col_offset, a.end_lineno, a.end_col_offset = (code.co_firstlineno, first.col_offset,
                                                                  code.co_firstlineno, first.col_offset)
    module = ast.Module(body=[fn], type_ignores=[])
    ast.fix_missing_locations(module)
    return module
