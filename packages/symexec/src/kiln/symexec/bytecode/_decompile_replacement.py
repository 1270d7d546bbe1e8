"""Replacement code back to Python: a general decompiler for kiln's straight-line code.

The code that runs instead of a captured frame is generated: loads of the frame's values,
a call of the compiled graph, stores of its outputs, replayed side effects, then a ``return``
or the unsupported instruction and a call of a resume function (``if __kiln_r: return ...``
for a data-dependent branch). ``decompile_replacement`` runs its instructions on a stack of
syntax-tree expressions and gives the function's source. Objects without a literal (the
compiled graph, resume functions, types, ...) are named ``__kiln_<what><n>`` and returned
alongside.

The result is checked, not trusted: the source is compiled again (names of objects as
constants) and its instructions must equal the original's one for one, or NotExact says
where they differ. Where the decompiler does not take the code (try blocks) but the text
kiln compiled it from is at hand (``linecache``, or the file a trace wrote), that text is
the source, under the same check (``_from_text``).
"""

from __future__ import annotations

import ast
import linecache
import math
import types
import warnings
from typing import Any

from ._decode import decode
from ._instr import NO_ARG, ArgKind, Instr, Label, const_key, label_positions
from ._resume import RESUME_PREFIX
from ._signature import names_to_constants, signature

__all__ = ["decompile_replacement"]

_PLACEHOLDER = "\x00kiln-decompile:"


class _Null:
    def __repr__(self) -> str:
        return "NULL"


_NULL = _Null()


class _Method:
    """A method load: the attribute node, called with its object as self."""

    def __init__(self, node: ast.Attribute) -> None:
        self.node = node


_SELF = object()
_BINOPS = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "/": ast.Div, "//": ast.FloorDiv, "%": ast.Mod,
           "**": ast.Pow, "@": ast.MatMult, "<<": ast.LShift, ">>": ast.RShift, "&": ast.BitAnd,
           "|": ast.BitOr, "^": ast.BitXor}
_CMPOPS = {"<": ast.Lt, "<=": ast.LtE, "==": ast.Eq, "!=": ast.NotEq, ">": ast.Gt, ">=": ast.GtE}
_UNARY = {"UNARY_NEGATIVE": ast.USub, "UNARY_NOT": ast.Not, "UNARY_INVERT": ast.Invert,
          "UNARY_POSITIVE": ast.UAdd}
_NAME_LOADS = frozenset(("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_NAME", "LOAD_CLOSURE"))
_NAME_STORES = frozenset(("STORE_FAST", "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF"))
_INTRINSIC_LIST_TO_TUPLE = 6  # CALL_INTRINSIC_1's argument for ``tuple(list)`` (3.12, 3.13)
_SKIP = frozenset(("NOP", "RESUME", "PRECALL", "COPY_FREE_VARS", "TO_BOOL", "EXTENDED_ARG", "CACHE"))


def _not_exact(why: str) -> Exception:
    from ._decompile_resume import NotExact

    return NotExact(why)


def _literal(value: Any) -> bool:
    t = type(value)
    if value is None or value is ... or t in (bool, int, str, bytes):
        return True
    if t in (float, complex):
        return all(math.isfinite(p) for p in (value.real, value.imag)) if t is complex else math.isfinite(value)
    return t is tuple and all(_literal(v) for v in value)


class _Decompiler:
    def __init__(self, code: types.CodeType) -> None:
        self.code = code
        self.bc = decode(code)
        self.items = self.bc.instrs
        self.objects: dict[str, Any] = {}
        self.kw_names: tuple[str, ...] = ()
        self.label_at = {item: k for k, item in enumerate(self.items) if isinstance(item, Label)}

    def name_for(self, obj: Any) -> str:
        for name, known in self.objects.items():
            if known is obj:
                return name
        hint = "k"
        if getattr(obj, "__name__", "") == "forward":
            hint = "graph"
        elif isinstance(obj, types.FunctionType) and obj.__name__.startswith(RESUME_PREFIX):
            hint = obj.__name__.removeprefix("__") + "_"
        elif isinstance(obj, types.FunctionType):
            hint = "fn"
        elif isinstance(obj, type):
            hint = "type"
        name = f"__kiln_{hint}{len(self.objects)}" if not hint.endswith("_") else f"__{hint}{len(self.objects)}"
        self.objects[name] = obj
        return name

    def const(self, value: Any) -> ast.expr:
        if _literal(value):
            return ast.Constant(value)
        if type(value) is tuple:
            return ast.Tuple(elts=[self.const(v) for v in value], ctx=ast.Load())
        if type(value) is frozenset:
            return ast.Set(elts=[self.const(v) for v in value])
        return ast.Name(id=self.name_for(value), ctx=ast.Load())

    def block(self, start: int, end: int) -> list[ast.stmt]:
        """The statements of items[start:end]; the stack is empty at both ends."""
        stack: list[Any] = []
        out: list[ast.stmt] = []
        k = start
        while k < end:
            item = self.items[k]
            k += 1
            if isinstance(item, Label):
                if stack:
                    raise _not_exact("a jump lands where values are on the stack")
                continue
            if item.handler is not None:
                raise _not_exact("try blocks in replacement code are not decompiled")
            name, arg = item.name, item.arg
            if name in _SKIP:
                continue
            if name.startswith("POP_JUMP_IF_"):
                test = stack.pop()
                if stack:
                    raise _not_exact("a conditional jump inside an expression")
                then_end = self.label_at[arg]
                if then_end < k:
                    raise _not_exact("a backward jump (a loop)")
                body = self.block(k, then_end)
                if not body or not _no_fallthrough(body[-1]):
                    raise _not_exact("a branch that does not end the function")
                test = _condition(name, test)
                out.append(ast.If(test=test, body=body, orelse=[]))
                k = then_end
                continue
            k = self.step(item, stack, out, k)
        if stack:
            raise _not_exact("values are left on the stack at the end of a block")
        return out

    def step(self, ins: Instr, stack: list[Any], out: list[ast.stmt], k: int) -> int:
        name, arg = ins.name, ins.arg
        if name in _NAME_LOADS:
            stack.append(ast.Name(id=arg, ctx=ast.Load()))
        elif name == "LOAD_FAST_LOAD_FAST":
            stack += [ast.Name(id=arg[0], ctx=ast.Load()), ast.Name(id=arg[1], ctx=ast.Load())]
        elif name == "LOAD_GLOBAL":
            node = ast.Name(id=arg.name, ctx=ast.Load())
            if not arg.push_null:
                stack.append(node)
            else:
                stack += [node, _NULL] if _null_after() else [_NULL, node]
        elif name == "PUSH_NULL":
            stack.append(_NULL)
        elif name == "LOAD_CONST":
            stack.append(self.const(arg))
        elif name in ("LOAD_ATTR", "LOAD_METHOD"):
            attr = arg.name if name == "LOAD_ATTR" else arg
            node = ast.Attribute(value=stack.pop(), attr=attr, ctx=ast.Load())
            if name == "LOAD_METHOD" or arg.method:
                stack += [_Method(node), _SELF]
            else:
                stack.append(node)
        elif name == "BINARY_OP":
            if arg not in _BINOPS:
                raise _not_exact(f"in-place operator {arg}")
            right, left = stack.pop(), stack.pop()
            stack.append(ast.BinOp(left=left, op=_BINOPS[arg](), right=right))
        elif name in ("COMPARE_OP", "IS_OP", "CONTAINS_OP"):
            right, left = stack.pop(), stack.pop()
            if name == "COMPARE_OP":
                op = _CMPOPS[arg.op]()
            elif name == "IS_OP":
                op = ast.IsNot() if arg else ast.Is()
            else:
                op = ast.NotIn() if arg else ast.In()
            stack.append(ast.Compare(left=left, ops=[op], comparators=[right]))
        elif name == "BINARY_SUBSCR":
            key, container = stack.pop(), stack.pop()
            stack.append(ast.Subscript(value=container, slice=key, ctx=ast.Load()))
        elif name in _UNARY:
            stack.append(ast.UnaryOp(op=_UNARY[name](), operand=stack.pop()))
        elif name in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET"):
            elts = _pop(stack, arg)
            kind = {"BUILD_TUPLE": ast.Tuple, "BUILD_LIST": ast.List, "BUILD_SET": ast.Set}[name]
            stack.append(kind(elts=elts) if kind is ast.Set else kind(elts=elts, ctx=ast.Load()))
        elif name == "BUILD_MAP":
            flat = _pop(stack, 2 * arg)
            stack.append(ast.Dict(keys=flat[0::2], values=flat[1::2]))
        elif name == "BUILD_CONST_KEY_MAP":
            keys = stack.pop()
            values = _pop(stack, arg)
            if not isinstance(keys, (ast.Tuple, ast.Constant)):
                raise _not_exact("BUILD_CONST_KEY_MAP without constant keys")
            key_nodes = keys.elts if isinstance(keys, ast.Tuple) else [ast.Constant(v) for v in keys.value]
            stack.append(ast.Dict(keys=key_nodes, values=values))
        elif name in ("LIST_EXTEND", "SET_UPDATE"):
            items = stack.pop()
            target = stack[-arg]
            if isinstance(items, ast.Constant) and type(items.value) is tuple:
                target.elts += [ast.Constant(v) for v in items.value]
            elif isinstance(items, (ast.Tuple, ast.Set)) and name == "LIST_EXTEND" and isinstance(items, ast.Tuple):
                target.elts += items.elts
            else:
                target.elts.append(ast.Starred(value=items, ctx=ast.Load()))
        elif name in ("DICT_UPDATE", "DICT_MERGE"):
            items = stack.pop()
            target = stack[-arg]
            target.keys.append(None)
            target.values.append(items)
            if name == "DICT_MERGE":  # the ``**`` arguments of a call (CALL_FUNCTION_EX below)
                target.merged = True
        elif name == "BUILD_SLICE":
            parts = _pop(stack, arg)
            stack.append(ast.Slice(lower=parts[0], upper=parts[1], step=parts[2] if arg == 3 else None))
        elif name == "BINARY_SLICE":
            upper, lower, container = stack.pop(), stack.pop(), stack.pop()
            stack.append(ast.Subscript(value=container, slice=ast.Slice(lower=lower, upper=upper), ctx=ast.Load()))
        elif name == "STORE_SLICE":
            upper, lower, container, value = stack.pop(), stack.pop(), stack.pop(), stack.pop()
            target = ast.Subscript(value=container, slice=ast.Slice(lower=lower, upper=upper), ctx=ast.Store())
            out.append(ast.Assign(targets=[target], value=value))
        elif name == "LIST_TO_TUPLE" or (name == "CALL_INTRINSIC_1" and arg == _INTRINSIC_LIST_TO_TUPLE):
            node = stack.pop()
            stack.append(ast.Tuple(elts=node.elts, ctx=ast.Load()))
        elif name == "KW_NAMES":
            self.kw_names = arg
        elif name in ("CALL", "CALL_KW"):
            names = self.kw_names
            if name == "CALL_KW":
                names = stack.pop()
                names = tuple(e.value for e in names.elts) if isinstance(names, ast.Tuple) else names.value
            self.kw_names = ()
            args = _pop(stack, arg)
            first, second = stack.pop(-2), stack.pop()
            stack.append(_call(first, second, args, names))
        elif name == "CALL_FUNCTION_EX":
            kwargs = stack.pop() if arg & 1 else None
            star = stack.pop()
            first, second = stack.pop(-2), stack.pop()
            fn = second if first is _NULL else first
            if first is not _NULL and second is not _NULL:
                raise _not_exact("CALL_FUNCTION_EX on a method")
            if isinstance(kwargs, ast.Dict) and getattr(kwargs, "merged", False):
                if not all(k is None or (isinstance(k, ast.Constant) and type(k.value) is str) for k in kwargs.keys):
                    raise _not_exact("keyword arguments with computed names")
                keywords = [ast.keyword(arg=None if k is None else k.value, value=v)
                            for k, v in zip(kwargs.keys, kwargs.values, strict=True)]
            else:
                keywords = [ast.keyword(arg=None, value=kwargs)] if kwargs is not None else []
            args = star.elts if isinstance(star, ast.Tuple) else [ast.Starred(value=star, ctx=ast.Load())]
            stack.append(ast.Call(func=fn, args=args, keywords=keywords))
        elif name in _NAME_STORES:
            out.append(ast.Assign(targets=[ast.Name(id=arg, ctx=ast.Store())], value=stack.pop()))
        elif name == "STORE_FAST_STORE_FAST":
            out.append(ast.Assign(targets=[ast.Name(id=arg[0], ctx=ast.Store())], value=stack.pop()))
            out.append(ast.Assign(targets=[ast.Name(id=arg[1], ctx=ast.Store())], value=stack.pop()))
        elif name == "STORE_FAST_LOAD_FAST":
            out.append(ast.Assign(targets=[ast.Name(id=arg[0], ctx=ast.Store())], value=stack.pop()))
            stack.append(ast.Name(id=arg[1], ctx=ast.Load()))
        elif name == "STORE_ATTR":
            owner, value = stack.pop(), stack.pop()
            out.append(ast.Assign(targets=[ast.Attribute(value=owner, attr=arg, ctx=ast.Store())], value=value))
        elif name == "STORE_SUBSCR":
            key, container, value = stack.pop(), stack.pop(), stack.pop()
            out.append(ast.Assign(targets=[ast.Subscript(value=container, slice=key, ctx=ast.Store())],
                                  value=value))
        elif name == "UNPACK_SEQUENCE":
            value = stack.pop()
            names: list[str] = []
            while len(names) < arg:
                store = self.items[k]
                k += 1
                if isinstance(store, Instr) and store.name in _NAME_STORES:
                    names.append(store.arg)
                elif isinstance(store, Instr) and store.name == "STORE_FAST_STORE_FAST":
                    names += list(store.arg)
                else:
                    raise _not_exact("an unpacking into something other than names")
            if len(names) != arg:
                raise _not_exact("an unpacking into something other than names")
            targets = [ast.Name(id=n, ctx=ast.Store()) for n in names]
            out.append(ast.Assign(targets=[ast.Tuple(elts=targets, ctx=ast.Store())], value=value))
        elif name == "POP_TOP":
            out.append(ast.Expr(value=stack.pop()))
        elif name == "RETURN_VALUE":
            out.append(ast.Return(value=stack.pop()))
        elif name == "RETURN_CONST":
            out.append(ast.Return(value=self.const(arg)))
        elif name == "RAISE_VARARGS" and arg <= 1:
            out.append(ast.Raise(exc=stack.pop() if arg else None, cause=None))
        elif name == "JUMP" or name == "JUMP_FORWARD":
            raise _not_exact("an unconditional jump in replacement code")
        else:
            raise _not_exact(f"{name} is not decompiled in replacement code")
        return k


def _null_after() -> bool:
    from .versions import TABLE

    return TABLE.null_after_callable


def _pop(stack: list[Any], n: int) -> list[Any]:
    if n == 0:
        return []
    items = stack[-n:]
    del stack[-n:]
    return items


def _call(first: Any, second: Any, args: list[ast.expr], names: tuple[str, ...]) -> ast.Call:
    positional = args[:len(args) - len(names)]
    keywords = [ast.keyword(arg=n, value=v) for n, v in zip(names, args[len(positional):], strict=True)]
    if isinstance(first, _Method) and second is _SELF:
        return ast.Call(func=first.node, args=positional, keywords=keywords)
    if first is _NULL:
        return ast.Call(func=second, args=positional, keywords=keywords)
    if second is _NULL:
        return ast.Call(func=first, args=positional, keywords=keywords)
    return ast.Call(func=first, args=[second, *positional], keywords=keywords)


def _condition(jump: str, test: ast.expr) -> ast.expr:
    """The test under which a conditional jump falls through into the next block."""
    if jump == "POP_JUMP_IF_FALSE":
        return test
    if jump == "POP_JUMP_IF_TRUE":
        return ast.UnaryOp(op=ast.Not(), operand=test)
    if jump == "POP_JUMP_IF_NONE":
        return ast.Compare(left=test, ops=[ast.IsNot()], comparators=[ast.Constant(None)])
    return ast.Compare(left=test, ops=[ast.Is()], comparators=[ast.Constant(None)])


def _no_fallthrough(stmt: ast.stmt) -> bool:
    return isinstance(stmt, (ast.Return, ast.Raise))


def _text(code: types.CodeType, body: list[ast.stmt]) -> str:
    """The function's source: kiln's layout (an enclosing function for free variables)."""
    name = code.co_name
    lines = [f"def {name}({', '.join(signature(code))}):"]
    if code.co_freevars:
        lines += ["    if False:", f"        {', '.join(code.co_freevars)},"]
    module = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(module)
    lines += ["    " + line for line in ast.unparse(module).splitlines()] if body else ["    pass"]
    if code.co_freevars:
        lines = [f"def __kiln_make({', '.join(code.co_freevars)}):", *["    " + line for line in lines],
                 f"    return {name}"]
    return "\n".join(lines) + "\n"


def decompile_replacement(code: types.CodeType) -> tuple[str, dict[str, Any]]:
    """``code``'s source and the objects its ``__kiln_*`` names stand for. NotExact where
    the code is not straight-line generated code or the source does not compile back to
    the same instructions, unless the text it was compiled from is at hand (``_from_text``)."""
    from ._decompile_resume import NotExact

    if not code.co_name.isidentifier():
        raise _not_exact(f"the code's name {code.co_name!r} is not an identifier")
    try:
        d = _Decompiler(code)
        body = d.block(0, len(d.items))
        text = _text(code, body)
        _check(code, text, d.objects)
        return text, d.objects
    except NotExact:
        found = _from_text(code)
        if found is None:
            raise
        return found


def _from_text(code: types.CodeType) -> tuple[str, dict[str, Any]] | None:
    """Where the source kiln compiled ``code`` from is still readable (``linecache``: kiln
    registers it under the code's file name; or the file a trace wrote), that source and
    its objects, checked as the decompiled source is: compiled again, the objects' names
    must stand where ``code`` holds objects, and every instruction must be ``code``'s.
    What kiln's straight-line decompiler does not take (try blocks) is shown so. None when
    the text is not at hand or does not match."""
    from ._decompile_resume import NotExact

    text = "".join(linecache.getlines(code.co_filename))
    if not text:
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    taken = {*code.co_varnames, *code.co_cellvars, *code.co_freevars, *code.co_names}
    names = {n.id for n in ast.walk(tree) if type(n) is ast.Name and type(n.ctx) is ast.Load
             and n.id.startswith("__kiln_") and n.id not in taken}
    try:
        again = _with_placeholders(code, text, names)
    except (SyntaxError, NotExact):
        return None
    if len(again.co_consts) != len(code.co_consts):
        return None
    objects: dict[str, Any] = {}
    for mine, theirs in zip(again.co_consts, code.co_consts, strict=True):
        if type(mine) is str and mine.startswith(_PLACEHOLDER):
            objects[mine[len(_PLACEHOLDER):]] = theirs
    if set(objects) != names:  # an object inside a tuple or a nested code: not matched here
        return None
    try:
        _check(code, text, objects)
    except NotExact:
        return None
    return text, objects


def recompile_replacement(code: types.CodeType, text: str, objects: dict[str, Any]) -> types.CodeType:
    """``text`` (from ``decompile_replacement``) compiled with ``objects`` bound as constants."""
    found = _with_placeholders(code, text, objects)
    return found.replace(co_consts=tuple(_bind(c, objects) for c in found.co_consts),
                         co_qualname=code.co_qualname, co_firstlineno=code.co_firstlineno)


def _with_placeholders(code: types.CodeType, text: str, names: Any) -> types.CodeType:
    """``text``'s function of ``code``'s name, compiled with a placeholder string constant
    for each loaded name in ``names``."""
    tree = names_to_constants(text, names, lambda name: _PLACEHOLDER + name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "'str' object is not callable"
        module = compile(tree, code.co_filename, "exec")
    found = _find(module, code.co_name)
    if found is None:
        raise _not_exact("the decompiled source defines no function of the code's name")
    return found


def _bind(const: Any, objects: dict[str, Any]) -> Any:
    if type(const) is str and const.startswith(_PLACEHOLDER):
        return objects[const[len(_PLACEHOLDER):]]
    if type(const) is tuple:
        return tuple(_bind(c, objects) for c in const)
    if type(const) is frozenset:
        return frozenset(_bind(c, objects) for c in const)
    return const


def _find(code: types.CodeType, name: str) -> types.CodeType | None:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name:
                return const
            inner = _find(const, name)
            if inner is not None:
                return inner
    return None


def _check(code: types.CodeType, text: str, objects: dict[str, Any]) -> None:
    """NotExact unless ``text`` compiles to ``code``'s instructions, one for one."""
    try:
        again = recompile_replacement(code, text, objects)
    except SyntaxError as e:
        raise _not_exact(f"the decompiled source does not compile: {e}") from None
    mine, theirs = decode(again), decode(code)
    a, b = mine.instructions(), theirs.instructions()
    labels_a = label_positions(mine.instrs)
    labels_b = label_positions(theirs.instrs)
    if len(a) != len(b):
        raise _not_exact(f"the decompiled source compiles to {len(a)} instructions, the code has {len(b)}")
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.name != y.name or not _same_arg(x, y, labels_a, labels_b) or \
                (x.handler is None) != (y.handler is None):
            raise _not_exact(f"the decompiled source differs at instruction {k}: {x.name} {_show(x.arg)} "
                             f"where the code has {y.name} {_show(y.arg)}")


def _show(arg: Any) -> str:
    return "" if arg is NO_ARG else repr(arg)[:60]


def _same_arg(x: Instr, y: Instr, la: dict[Label, int], lb: dict[Label, int]) -> bool:
    if x.kind is ArgKind.JUMP:
        return la[x.arg] == lb[y.arg]
    if x.kind is ArgKind.CONST:
        return const_key(x.arg) == const_key(y.arg)
    return x.arg == y.arg
