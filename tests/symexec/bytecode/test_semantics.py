"""Functions using every kind of control flow run the same after decode + assemble, and
after NOPs are inserted everywhere (every jump, handler range and line run moves).

Covered: loops with break/continue/else, try/except/else/finally with return inside,
except*, with (suppressing and not), generators (send, throw, close, yield from), async
functions, async with/for, comprehensions with closures, match, walrus, star unpacking,
f-strings, class bodies with super() and __class__, deep nesting with many locals.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import types
from pathlib import Path

import pytest

from kiln.symexec.bytecode import decode, map_code

_spec = importlib.util.spec_from_file_location("_bytecode_workload", Path(__file__).with_name("roundtrip_workload.py"))
workload = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(workload)


def loops(n):
    out = []
    for i in range(n):
        if i % 3 == 0:
            continue
        while i > 0:
            i -= 2
            if i == 3:
                break
        else:
            out.append(-i)
        out.append(i)
    else:
        out.append("done")
    return out


def handlers(x):
    log = []
    try:
        try:
            log.append(10 // x)
        except ZeroDivisionError as exc:
            log.append(type(exc).__name__)
            if x == 0:
                return log, "early"
        else:
            log.append("else")
        finally:
            log.append("finally")
        raise KeyError(x)
    except (KeyError, IndexError) as exc:
        log.append(repr(exc))
    return log, None


def groups(n):
    caught = []
    try:
        raise ExceptionGroup("g", [ValueError(n), TypeError(n)])
    except* ValueError as eg:
        caught.append(len(eg.exceptions))
    except* TypeError:
        caught.append("type")
    return caught


class Suppress(contextlib.AbstractContextManager):
    def __init__(self, log):
        self.log = log

    def __exit__(self, kind, value, tb):
        self.log.append(kind.__name__ if kind else None)
        return kind is ValueError


def withs(x):
    log = []
    with Suppress(log), Suppress(log) as inner:
        log.append(inner is not None)
        if x:
            raise ValueError(x)
    try:
        with Suppress(log):
            raise KeyError(x)
    except KeyError:
        log.append("escaped")
    return log


def gen(n):
    total = 0
    try:
        for i in range(n):
            got = yield i
            if got:
                total += got
        yield from sub(total)
    except GeneratorExit:
        raise
    except RuntimeError as exc:
        yield f"thrown {exc}"
    finally:
        total = -1


def sub(total):
    received = yield total
    return received


def drive_gen(n):
    g = gen(n)
    out = [next(g), g.send(5), g.send(None), next(g)]
    out.append(g.throw(RuntimeError("x")))
    g.close()
    return out


async def agen(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i * i


class AsyncCM:
    async def __aenter__(self):
        return 7

    async def __aexit__(self, *exc):
        return False


async def coro(n):
    async with AsyncCM() as v:
        items = [x async for x in agen(n) if x % 2 == 0]
    return v, items, [await asyncio.sleep(0, result=i) for i in range(2)]


def drive_coro(n):
    return asyncio.run(coro(n))


def comprehensions(xs):
    k = 3
    fns = [lambda y, i=i: y * i + k for i in xs]
    return ([f(2) for f in fns], {x: {y for y in range(x)} for x in xs if x},
            [(x, z) for x in xs if (z := x * 2) > 2], sum(x for row in [[1, 2], [3]] for x in row))


def matching(value):
    match value:
        case {"kind": "point", "x": x, "y": y} if x == y:
            return ("diag", x)
        case [first, *rest]:
            return ("seq", first, len(rest))
        case str() | bytes() as text:
            return ("text", len(text))
        case _:
            return ("other", value)


def unpacking(*args, **kwargs):
    a, *mid, b = (*args, 0)
    merged = {**kwargs, "z": 1}
    return a, mid, b, merged, f"{a!r:>5}|{b:.2f}|{len(mid)=}"


class Base:
    def hello(self):
        return "base"


class Child(Base):
    def hello(self):
        return super().hello() + ":" + __class__.__name__


def many_locals(n):
    v0 = v1 = v2 = v3 = v4 = v5 = v6 = v7 = v8 = v9 = v10 = v11 = v12 = v13 = v14 = v15 = v16 = n
    total = 0
    for i in range(n):
        total += v0 + v1 * i - v2 + v3 + v4 + v5 + v6 + v7 + v8 + v9 + v10 + v11 + v12 + v13 + v14 + v15 + v16
    return total


CASES = [
    (loops, (10,)), (handlers, (0,)), (handlers, (2,)), (groups, (1,)), (withs, (0,)), (withs, (1,)),
    (drive_gen, (3,)), (drive_coro, (5,)), (comprehensions, ([0, 1, 2],)),
    (matching, ({"kind": "point", "x": 1, "y": 1},)), (matching, ([1, 2, 3],)), (matching, (b"ab",)),
    (matching, (5,)), (unpacking, (1, 2, 3)), (many_locals, (4,)),
]
SWAPPED = [gen, sub, agen, coro, AsyncCM.__aenter__, AsyncCM.__aexit__, Child.hello, Suppress.__exit__]


@contextlib.contextmanager
def swapped_code(functions, transform):
    saved = [fn.__code__ for fn in functions]
    try:
        for fn in functions:
            fn.__code__ = map_code(fn.__code__, transform)
        yield
    finally:
        for fn, code in zip(functions, saved, strict=True):
            fn.__code__ = code


@pytest.mark.parametrize("transform", [workload.identity, workload.with_nops], ids=["identity", "nops"])
@pytest.mark.parametrize(("fn", "args"), CASES, ids=[f"{fn.__name__}{args!r}"[:40] for fn, args in CASES])
def test_runs_the_same(fn, args, transform):
    expected = fn(*args)
    functions = [fn, *(f for f in SWAPPED if f is not fn)]
    original = fn.__code__
    with swapped_code(functions, transform):
        assert (fn.__code__.co_code == original.co_code) == (transform is workload.identity)
        got = fn(*args)
    assert got == expected


def test_nops_really_move_offsets():
    for fn in (handlers, gen, coro, matching):
        new = map_code(fn.__code__, workload.with_nops)
        before, after = decode(fn.__code__).instructions(), decode(new).instructions()
        assert len(after) > 2 * len(before)
        assert [i.name for i in after if i.name != "NOP"] == [i.name for i in before if i.name != "NOP"]
        if fn is not matching:  # the others have exception tables, whose ranges must move
            assert fn.__code__.co_exceptiontable and new.co_exceptiontable != fn.__code__.co_exceptiontable


def test_swapped_functions_are_restored():
    before = [f.__code__ for f in SWAPPED]
    with swapped_code(SWAPPED, workload.with_nops):
        assert all(f.__code__ is not b for f, b in zip(SWAPPED, before, strict=True))
    assert all(f.__code__ is b for f, b in zip(SWAPPED, before, strict=True))
    assert isinstance(gen(1), types.GeneratorType)
