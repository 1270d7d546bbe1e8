"""Resume functions (make_resume) and the liveness they rely on, checked by running them:
the original is run under sys.settrace, and at each statement it reaches a resume function
is built there, called with the live locals it had then, and must return what the original
returned. Runs on every supported Python (no torch)."""

from __future__ import annotations

import copy
import sys
import types

import pytest

from kiln.symexec.bytecode import (
    STACK_PREFIX,
    decode,
    disassemble,
    in_loop,
    live_locals,
    make_resume,
    resumable,
)


def straight(x, n):
    y = x * 2
    z = abs(y) + n
    w = [z, y]
    w.append(x)
    if n > 1:
        q = sum(w)
    else:
        q = -1
    return q, w, z


def with_loop_and_try(xs, k):
    total = 0
    for v in xs:
        total += v * k
    try:
        r = xs[k]
    except IndexError:
        r = None
    label = f"{total}:{r}"
    return label, total


def defaults_and_kwargs(a, b=3, *rest, c, **kw):
    s = a + b + sum(rest)
    t = s * c
    u = sorted(kw.items())
    return s, t, u


def _make_closure():
    scale = 3
    offset = [10]

    def inner(x):
        y = x * scale
        z = y + offset[0]
        return z - scale

    return inner


closure = _make_closure()

CASES = [
    (straight, (5, 2)),
    (straight, (5, 0)),
    (with_loop_and_try, ([1, 2, 3], 1)),
    (with_loop_and_try, ([1, 2, 3], 7)),
    (defaults_and_kwargs, (1,), {"c": 4, "z": 1, "y": 2}),
    (closure, (4,)),
]


def _statement_starts(fn, args, kwargs):
    """(instruction index, locals) at each line event of one real call, and its result."""
    code = fn.__code__
    index_of = {ins.offset: k for k, ins in enumerate(decode(code).instructions())}
    seen = []

    def tracer(frame, event, arg):
        if frame.f_code is not code:
            return None
        if event == "line" and frame.f_lasti in index_of:
            seen.append((index_of[frame.f_lasti], copy.deepcopy(dict(frame.f_locals))))
        return tracer

    sys.settrace(tracer)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.settrace(None)
    return seen, result


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].__name__}{c[1]}")
def test_resuming_at_every_statement_gives_the_original_result(case):
    fn, args, kwargs = (*case, {})[:3]
    code = fn.__code__
    bc = decode(code)
    instrs = bc.instructions()
    live = live_locals(bc)
    points, expected = _statement_starts(fn, args, kwargs)
    resumed = 0
    for index, values in points:
        if in_loop(bc, index) or instrs[index].handler is not None:
            continue  # the value stack is not empty there (iterator, exception state)
        names = sorted(n for n in live[index] if n in values and n not in code.co_freevars)
        resume = make_resume(code, index, [], names, name=f"resume_at_{index}")
        assert resume.co_varnames[:resume.co_argcount] == (*names, *code.co_freevars)
        frees = [c.cell_contents for c in fn.__closure__ or ()]
        fn_resume = types.FunctionType(resume, fn.__globals__, resume.co_name)
        got = fn_resume(*[values[n] for n in names], *frees)
        assert got == expected, (index, disassemble(resume))
        resumed += 1
    assert resumed >= 3


def test_resuming_after_a_call_takes_its_result_as_a_stack_value():
    bc = decode(straight.__code__)
    instrs = bc.instructions()
    call = next(k for k, i in enumerate(instrs) if i.name == "CALL")  # abs(y)
    live = live_locals(bc)[call + 1]
    assert live == {"n", "y", "x"}  # z is written before it is read; w and q come later
    names = sorted(live)
    resume = make_resume(straight.__code__, call + 1, [False], names, name="after_abs")
    assert resume.co_varnames[:4] == (f"{STACK_PREFIX}0", "n", "x", "y")
    fn = types.FunctionType(resume, globals(), "after_abs")
    assert fn(abs(10), 2, 5, 10) == straight(5, 2)


def test_resuming_with_a_null_below_on_the_stack():
    # ``print(x, f(y))``-like: resume between the arguments of an outer call, whose NULL and
    # callable are below; the NULL is pushed by the prologue, the callable passed
    def outer(a, b):
        return max(a, abs(b))

    bc = decode(outer.__code__)
    instrs = bc.instructions()
    inner_call = next(k for k, i in enumerate(instrs) if i.name == "CALL")
    # below abs's result: max's NULL and max (3.11/3.12: NULL first; 3.13: max first), then a
    stack = [False, True] if sys.version_info >= (3, 13) else [True, False]
    resume = make_resume(outer.__code__, inner_call + 1, [*stack, False, False], [], name="mid_call")
    fn = types.FunctionType(resume, globals(), "mid_call")
    assert fn(max, 3, abs(-7)) == outer(3, -7) == 7


def test_liveness_follows_jumps_and_loops():
    bc = decode(with_loop_and_try.__code__)
    live = live_locals(bc)
    first = live[0]
    assert first == {"xs", "k"}
    loop_points = [k for k in range(len(live)) if in_loop(bc, k)]
    assert loop_points and not in_loop(bc, 0)
    # at the loop's head total and k are live (read in the body and after the loop); between
    # reading total and storing the sum, total is dead
    instrs = bc.instructions()
    head = next(k for k, i in enumerate(instrs) if i.name == "FOR_ITER")
    assert {"total", "k"} <= live[head]
    store = max(k for k in loop_points if instrs[k].name == "STORE_FAST" and instrs[k].arg == "total")
    assert "total" not in live[store] and "total" in live[store + 1]


def test_what_cannot_be_resumed_says_why():
    def gen(x):
        yield x

    def writes_nonlocal():
        v = 0

        def bump():
            nonlocal v
            v += 1
            return v

        return bump

    assert "generator" in resumable(gen.__code__)
    assert "captured by inner functions" in resumable(writes_nonlocal.__code__)
    assert "writes to a variable of an enclosing function" in resumable(writes_nonlocal().__code__)
    assert resumable(closure.__code__) is None

    class Bare(dict):
        def get(self, key):
            parent = super()  # reads the frame on every version
            return parent.get(key)

    assert "super()" in resumable(Bare.get.__code__)
    with pytest.raises(ValueError, match="cannot be resumed"):
        make_resume(gen.__code__, 0, [], [], name="r")


class _Base:
    def scale(self, x):
        return x * 2


class _Child(_Base):
    def scale(self, x):
        y = x + 1
        z = super().scale(y)
        return z - x


def test_super_attribute_calls_resume_where_the_version_loads_them_on_the_stack():
    code = _Child.scale.__code__
    why = resumable(code)
    if sys.version_info < (3, 12):
        assert why is not None and "super()" in why  # 3.11: super() reads the frame
        return
    assert why is None  # 3.12+: LOAD_SUPER_ATTR takes __class__ and self from the stack
    obj = _Child()
    points, expected = _statement_starts(_Child.scale, (obj, 5), {})
    bc = decode(code)
    live = live_locals(bc)
    resumed = 0
    for index, values in points:
        names = sorted(n for n in live[index] if n in values)
        resume = make_resume(code, index, [], names, name=f"resume_at_{index}")
        fn = types.FunctionType(resume, globals(), resume.co_name)
        assert fn(*[values[n] for n in names], _Child) == expected == 7
        resumed += 1
    assert resumed == 3
