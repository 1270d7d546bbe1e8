"""Resume functions decompiled to Python and compiled back behave like their bytecode.

For each function of ``decompile_cases``, a resume function is made (``make_resume``) where
kiln would make one: after a call of ``brk`` (its result the top stack value) or at the
conditional jump that follows it, or at a try statement's handler. The values on the stack
there are written out per case (``stack``: a function of the frame's locals at the break,
which ``brk`` records); the live locals are those the frame had. The resume function's
bytecode and its decompiled-and-recompiled source are run with the same arguments and must
give the original function's result. Runs on every supported Python (no torch).
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import linecache
import sys
import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kiln.symexec.bytecode import (
    REPLACEMENT_PREFIX,
    RESUME_PREFIX,
    TABLE,
    decode,
    decompile_code,
    live_locals,
    make_resume,
)

_spec = importlib.util.spec_from_file_location("decompile_cases", Path(__file__).with_name("decompile_cases.py"))
dc = importlib.util.module_from_spec(_spec)
sys.modules["decompile_cases"] = dc
_spec.loader.exec_module(dc)


class _NullFn:
    """A callable loaded with a NULL (a global function, ``PUSH_NULL`` + a value)."""

    def __init__(self, fn):
        self.fn = fn


class _Method:
    """A method and its object (``obj.name(...)``, the method found on the class)."""

    def __init__(self, obj, name):
        self.obj, self.name = obj, name


def _layout(logical: list[Any]) -> tuple[list[bool], list[Any]]:
    """(NULL flags, values) of the version's stack for a logical stack."""
    flags: list[bool] = []
    values: list[Any] = []
    for v in logical:
        if isinstance(v, _NullFn):
            pair = [(False, v.fn), (True, None)] if TABLE.null_after_callable else [(True, None), (False, v.fn)]
        elif isinstance(v, _Method):
            pair = [(False, getattr(type(v.obj), v.name)), (False, v.obj)]
        else:
            pair = [(False, v)]
        for null, value in pair:
            flags.append(null)
            if not null:
                values.append(value)
    return flags, values


@dataclass
class Case:
    fn: types.FunctionType
    args: tuple
    stack: Any  # (locals at the break, brk's result) -> the logical stack below/after the call
    nth: int = 0  # which call of brk (in execution order)
    kind: str = "call"  # "call" | "jump" | "handler"
    kwargs: dict | None = None

    @property
    def id(self) -> str:
        return f"{self.fn.__name__}-{self.nth}-{self.kind}{self.args}"


N = _NullFn
M = _Method


def _cases() -> list[Case]:
    return [
        Case(dc.assign_call, (3, 4), lambda L, r: [L["a"], r]),
        Case(dc.nested_call, (3, 4), lambda L, r: [N(dc.plus), L["x"], N(dc.plus), r]),
        Case(dc.star_and_keyword_calls, (3, 4), lambda L, r: [dc.plus(*L["xs"]), r]),
        Case(dc.star_and_keyword_calls, (3, 4), lambda L, r: [dc.plus(L["x"], b=L["y"]), r], nth=1),
        Case(dc.method_call, (3, 4), lambda L, r: [M(L["box"], "add"), L["y"], r]),
        Case(dc.method_call, (3, 4), lambda L, r: [L["r"], M(L["box"], "scale"), r], nth=1),
        Case(dc.expression_statement, (3,), lambda L, r: [r]),
        Case(dc.if_elif, (5, 1), lambda L, r: [r]),
        Case(dc.if_elif, (2, 1), lambda L, r: [r]),
        Case(dc.if_elif, (5, 1), lambda L, r: [], kind="jump"),
        Case(dc.if_elif, (2, 1), lambda L, r: [], kind="jump"),
        Case(dc.if_elif, (2, -1), lambda L, r: [], kind="jump"),
        Case(dc.if_break_in_body, (2, 3), lambda L, r: [r]),
        Case(dc.and_or, (1, 2), lambda L, r: [r]),
        Case(dc.and_or, (1, 0), lambda L, r: [r]),
        Case(dc.and_or, (2, 5), lambda L, r: [r], nth=1),
        Case(dc.and_or, (0, 5), lambda L, r: [r], nth=1),
        Case(dc.ternary, (3, 1), lambda L, r: [r]),
        Case(dc.ternary, (3, 1), lambda L, r: [r], nth=1),
        Case(dc.ternary, (3, 1), lambda L, r: [], nth=1, kind="jump"),
        Case(dc.ternary, (3, -2), lambda L, r: [], nth=1, kind="jump"),
        Case(dc.aug_assign, (3, 4), lambda L, r: [L["total"], r]),
        Case(dc.aug_assign, (3, 4), lambda L, r: [L["box"], L["box"].v, r], nth=1),
        Case(dc.aug_assign, (3, 4), lambda L, r: [L["box"].items, 0, L["box"].items[0], r], nth=2),
        Case(dc.comprehension, ([1, 2], 3), lambda L, r: [*_comprehension_function(dc.comprehension), r]),
        Case(dc.assert_statement, (1, 5), lambda L, r: [r]),
        Case(dc.assert_statement, (1, 5), lambda L, r: [L["x"], r], nth=1),
        Case(dc.assert_statement, (7, 5), lambda L, r: [L["x"], r], nth=1),
        Case(dc.assert_statement, (-1, 5), lambda L, r: [], kind="jump"),
        Case(dc.try_body, (3, 1), lambda L, r: [M(L["out"], "append"), r]),
        Case(dc.try_body, (3, 0), lambda L, r: [M(L["out"], "append"), r]),
        Case(dc.with_block, (3, 1), lambda L, r: [_exit_of(L), M(L["log"], "append"), r]),
        Case(dc.with_block, (3, -1), lambda L, r: [_exit_of(L), M(L["log"], "append"), r]),
        Case(dc.with_return, (3,), lambda L, r: [_exit_of(L), r]),
        Case(dc.unbound_local, (3, True), lambda L, r: [r]),
        Case(dc.unbound_local, (3, False), lambda L, r: [r]),
        Case(dc.unbound_shadowing_a_global, (3,), lambda L, r: [r]),
        Case(dc.for_after_break, ([1, 2, 3],), lambda L, r: [r]),
        Case(dc.while_after_break, (3,), lambda L, r: [r]),
        Case(dc.branch_on_value, (4,), lambda L, r: [], kind="jump"),
        Case(dc.branch_on_value, (1,), lambda L, r: [], kind="jump"),
        Case(dc.walrus, (3,), lambda L, r: [r]),
        Case(dc.fstring, (3, 4), lambda L, r: [r]),
        Case(dc.subscript_store, (3,), lambda L, r: [L["x"], L["d"], r]),
        Case(dc.multiline_call, (3, 4), lambda L, r: [N(dc.plus), L["x"] * 2, r]),
        Case(dc.nested_with_try, (3, 1), lambda L, r: [_exit_of(L), M(L["log"], "append"), r]),
        Case(dc.nested_with_try, (3, 0), lambda L, r: [_exit_of(L), M(L["log"], "append"), r]),
        Case(dc.keyword_only, (3,), lambda L, r: [r], kwargs={"scale": 5, "z": 1}),
        Case(dc.lam, (3, 4), lambda L, r: [N(dc.plus), r]),
        Case(dc.try_body, (3, 1), lambda L, r: [M(L["out"], "append"), ZeroDivisionError("x")], kind="handler"),
        Case(dc.try_body, (3, 1), lambda L, r: [M(L["out"], "append"), RuntimeError("x")], kind="handler"),
    ]


def _comprehension_function(fn):
    """The function a comprehension is compiled to, on the stack below its iterable where
    comprehensions are functions of their own (3.11); nothing where they are inlined."""
    codes = [c for c in fn.__code__.co_consts if isinstance(c, types.CodeType) and c.co_name == "<listcomp>"]
    return [types.FunctionType(codes[0], fn.__globals__)] if codes else []


def _exit_of(L):
    """The bound ``__exit__`` of the with block's manager (the only Exit among the locals'
    values' referrers: the log it writes to)."""
    return L["__exit__"]


CASES = _cases()


def _brk_calls(code: types.CodeType) -> list[int]:
    """Indices (labels not counted) of the calls of ``brk`` in ``code``, in source order."""
    out = []
    for k, ins in enumerate(decode(code).instructions()):
        loc = ins.location
        if ins.name == "CALL" and ins.arg == 1 and loc is not None and loc.lineno is not None:
            line = linecache.getline(code.co_filename, loc.lineno).encode()
            if loc.lineno == loc.end_lineno and line[loc.col_offset:loc.end_col_offset].startswith(b"brk("):
                out.append(k)
    return out


def _record(case: Case) -> tuple[Any, dict[str, Any], Any]:
    """Run ``case.fn``: its result, and a copy of its locals and brk's result at the nth call
    of brk in the source (for a "handler" case, that call raises the exception the case puts
    on the stack, and the result is what the function does then)."""
    seen: dict[int, tuple[dict[str, Any], Any]] = {}
    code = case.fn.__code__
    offsets = [i.offset for i in decode(code).instructions()]
    wanted = _brk_calls(code)[case.nth]
    original = dc.brk
    managers: dict[int, Any] = {}
    enter = dc.Exit.__enter__

    def recording_enter(self):
        managers["last"] = self
        return enter(self)

    def recording(v):
        frame = sys._getframe(1)
        local = dict(frame.f_locals)
        if "last" in managers:
            local["__exit__"] = managers["last"].__exit__
        at = max(k for k, o in enumerate(offsets) if o <= frame.f_lasti) if frame.f_code is code else None
        if at == wanted and not seen:
            seen[0] = copy.deepcopy((local, v))
            if case.kind == "handler":
                raise type(case.stack(local, v)[-1])("raised at the break")
        return v

    dc.brk = recording
    dc.Exit.__enter__ = recording_enter
    try:
        result = case.fn(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs or {}))
    except Exception as e:
        result = type(e)
    finally:
        dc.brk = original
        dc.Exit.__enter__ = enter
    local, value = seen[0]
    return result, local, value


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as e:
        return type(e)


def _target(case: Case, code: types.CodeType, local: dict[str, Any], value: Any) -> tuple[int, list[Any]]:
    """Where the resume function starts and the logical stack there."""
    bc = decode(code)
    instrs = bc.instructions()
    call = _brk_calls(code)[case.nth]
    stack = case.stack(local, value)
    if case.kind == "call":
        return call + 1, stack
    if case.kind == "jump":
        jump = next(k for k in range(call, len(instrs)) if instrs[k].name.startswith("POP_JUMP_IF_"))
        cond = _condition_value(code, call, jump, local, value)
        taken = bool(cond) == (instrs[jump].name == "POP_JUMP_IF_TRUE")
        if taken:
            label = instrs[jump].arg
            items = bc.instrs
            return sum(isinstance(i, type(instrs[0])) for i in items[:items.index(label)]), stack
        return jump + 1, stack
    handler = instrs[call].handler  # the try statement around the call
    label = handler.target
    items = bc.instrs
    at = sum(isinstance(i, type(instrs[0])) for i in items[:items.index(label)])
    lasti = [instrs[call].offset] if handler.lasti else []
    return at, [*stack[:-1][:handler.depth], *lasti, stack[-1]]


def _condition_value(code, call, jump, local, value):
    """The condition a jump after brk tests: the source between brk's call and the jump,
    evaluated with brk's result (the cases compare brk(...) with constants or locals)."""
    instrs = decode(code).instructions()
    loc = instrs[jump].location
    line = linecache.getline(code.co_filename, loc.lineno).encode()
    text = line[loc.col_offset:loc.end_col_offset].decode()
    return eval(text, {"brk": lambda v: v, **vars(dc)}, dict(local))


def _run(code: types.CodeType, fn: types.FunctionType, flags_values: list[Any], local: dict[str, Any], names):
    args = copy.deepcopy((flags_values, [local[n] for n in names]))
    resume = types.FunctionType(code, fn.__globals__, code.co_name)
    return _outcome(resume, *args[0], *args[1])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_resume_function_decompiles_to_source_that_does_what_it_does(case):
    code = case.fn.__code__
    expected, local, value = _record(case)
    target, logical = _target(case, code, local, value)
    flags, values = _layout(logical)
    live = live_locals(decode(code))[target]
    names = sorted(n for n in live if n in local)
    base = case.fn.__name__ if case.fn.__name__.isidentifier() else "fn"
    resume = make_resume(code, target, flags, names, name=f"{RESUME_PREFIX}{base}_at_1")
    assert _run(resume, case.fn, values, local, names) == expected  # the harness is right
    result = decompile_code(resume)
    assert result.exact, f"{result.why}\n{result.source}"
    again = result.recompile()
    assert again.co_varnames[:again.co_argcount] == resume.co_varnames[:resume.co_argcount]
    assert again.co_filename == code.co_filename
    assert _run(again, case.fn, values, local, names) == expected, result.source
    # the source is the user's: every line it came from is a line of the function
    lines = {n.lineno for n in ast.walk(result.tree) if isinstance(n, ast.stmt)}
    last = max(i.lineno or 0 for i in decode(code).instructions())
    assert all(code.co_firstlineno <= n <= last for n in lines)


def test_a_resume_function_of_a_resume_function_decompiles():
    # method_call breaks twice: resume at the first brk, then that resume function breaks at
    # the second (its code holds the first prologue, dead, before the original body)
    case = Case(dc.method_call, (3, 4), lambda L, r: [L["r"], M(L["box"], "scale"), r], nth=1)
    first = make_resume(dc.method_call.__code__, _brk_calls(dc.method_call.__code__)[0] + 1,
                        _layout([M(dc.Box(1), "add"), 0, 0])[0], ["box", "y"], name=f"{RESUME_PREFIX}method_call_at_1")
    expected, local, value = _record(case)
    target = _brk_calls(first)[1] + 1
    flags, values = _layout(case.stack(local, value))
    names = sorted(n for n in live_locals(decode(first))[target] if n in local)
    second = make_resume(first, target, flags, names, name=f"{RESUME_PREFIX}method_call_at_2")
    assert _run(second, dc.method_call, values, local, names) == expected
    result = decompile_code(second)
    assert result.exact, result.why
    assert _run(result.recompile(), dc.method_call, values, local, names) == expected
    assert "return ___stack0 + ___stack1(___stack2, ___stack3)" in result.source


def _replacement(text: str, name: str = "fn") -> types.CodeType:
    """A code object compiled the way kiln compiles replacement source (its file name)."""
    module = compile(text, f"{REPLACEMENT_PREFIX}{name} 0123456789>", "exec")
    return next(c for c in module.co_consts if isinstance(c, types.CodeType))


def test_replacement_code_decompiles_and_compiles_back_to_the_same_instructions():
    code = _replacement(
        "def fn(x, y, *rest, k=1, **kw):\n"
        "    __kiln_out = x.graph(x, y.w, rest[0])\n"
        "    y.w = __kiln_out[1]\n"
        "    globals()['G'] = [__kiln_out[0], 1, 2, 3]\n"
        "    __kiln_r = print(__kiln_out[2], sep='', end=k)\n"
        "    a, b = __kiln_r\n"
        "    if __kiln_r:\n"
        "        return (a, {'k': b, 'j': -1})\n"
        "    return x.go(b, *rest)\n")
    result = decompile_code(code)
    assert result.kind == "replacement" and result.exact, result.why
    assert "def fn(x, y, *rest, k=1, **kw):" not in result.source  # defaults are not the code's
    assert result.source.startswith("def fn(x, y, *rest, k, **kw):")
    assert "y.w = __kiln_out[1]" in result.source and "if __kiln_r:" in result.source
    assert result.recompile().co_code == code.co_code


def test_replacement_slices_and_double_star_calls_decompile():
    """``x[a:b]``, ``x[::c]`` and a slice assignment (BUILD_SLICE on 3.11; BINARY_SLICE and
    STORE_SLICE from 3.12), and a call with ``**`` arguments (DICT_MERGE), compile back to
    the same instructions and run the same."""
    code = _replacement(
        "def fn(x, *rest, **kw):\n"
        "    __kiln_out = x(*rest, **kw)\n"
        "    y = __kiln_out[1:3]\n"
        "    z = __kiln_out[::2]\n"
        "    __kiln_out[0:1] = z\n"
        "    return dict(*rest, k=y, **kw, **{'j': z})\n")
    result = decompile_code(code)
    assert result.exact, result.why
    assert "__kiln_out[1:3]" in result.source and "**kw" in result.source
    assert result.recompile().co_code == code.co_code
    fn, again = types.FunctionType(code, {}), types.FunctionType(result.recompile(), {})
    for f in (fn, again):
        assert f(lambda **kw: [0, 1, 2, 3, 4], a=1) == {"a": 1, "k": [1, 2], "j": [0, 2, 4]}


def test_replacement_objects_without_a_literal_are_named_and_bound_back():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "'str' object is not callable"
        code = _replacement("def fn(x):\n    return 'PLACEHOLDER'(x)\n")
    marker = object()

    def graph(v):
        return (v, marker)

    # kiln's replacement loads such objects as constants (_codegen swaps them in likewise)
    code = code.replace(co_consts=tuple(graph if c == "PLACEHOLDER" else c for c in code.co_consts))
    result = decompile_code(code)
    assert result.exact, result.why
    (name,) = result.objects
    assert result.objects[name] is graph and f"return {name}(x)" in result.source
    again = result.recompile()
    assert types.FunctionType(again, {})(5) == (5, marker)


def test_a_replacement_with_a_try_block_is_its_registered_text_checked():
    """Try blocks are not decompiled from the instructions, but where the text kiln compiled
    the replacement from is registered with linecache (as kiln registers it), that text is
    the source: its objects found where the code holds them, every instruction checked. A
    text that does not match the code is not taken."""
    text = ("def fn(x):\n    try:\n        return __kiln_graph3(x)\n"
            "    except BaseException:\n        return __kiln_fallback(x)\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        filename = f"{REPLACEMENT_PREFIX}fn_try 0123456789>"
        module = compile(text.replace("__kiln_graph3", "'G'").replace("__kiln_fallback", "'F'"), filename, "exec")
    code = next(c for c in module.co_consts if isinstance(c, types.CodeType))

    def graph(v):
        return v + 1

    def fallback(v):
        return ("fallback", v)

    code = code.replace(co_consts=tuple({"G": graph, "F": fallback}.get(c, c) if type(c) is str else c
                                        for c in code.co_consts))
    assert not decompile_code(code).exact  # the text is not registered yet
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    try:
        result = decompile_code(code)
        assert result.exact, result.why
        assert result.objects == {"__kiln_graph3": graph, "__kiln_fallback": fallback}
        assert "try:" in result.source and "return __kiln_graph3(x)" in result.source
        again, original = types.FunctionType(result.recompile(), {}), types.FunctionType(code, {})
        assert again(4) == original(4) == 5
        assert again("s") == original("s") == ("fallback", "s")  # the handler's path
        # a registered text that is not the code's: not taken
        other = text.replace("return __kiln_fallback(x)", "return __kiln_fallback(x, x)")
        linecache.cache[filename] = (len(other), None, other.splitlines(True), filename)
        assert not decompile_code(code).exact
    finally:
        linecache.cache.pop(filename, None)


def test_what_is_not_decompiled_says_why_and_shows_the_disassembly():
    in_try = _replacement("def fn(x):\n    try:\n        return x()\n    except BaseException:\n        raise\n")
    result = decompile_code(in_try)
    assert not result.exact and result.why == "try blocks in replacement code are not decompiled"
    assert "RETURN_VALUE" in result.source and "not decompiled exactly" in str(result)
    with pytest.raises(ValueError, match="not decompiled exactly"):
        result.recompile()
    plain = decompile_code(dc.plus.__code__)
    assert plain.kind == "other" and not plain.exact and "not code kiln generated" in plain.why
    # inside a loop body (kiln never breaks there: the resume would have to continue the loop)
    code = dc.looped.__code__
    target = _brk_calls(code)[0] + 1
    flags, _ = _layout([iter([]), 0, 0])  # the loop's iterator, total, brk's result
    resume = make_resume(code, target, flags, [], name=f"{RESUME_PREFIX}looped_at_1")
    result = decompile_code(resume)
    assert not result.exact and result.why and "LOAD_FAST" in result.source
