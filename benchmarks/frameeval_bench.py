"""kiln.frameeval benchmark: what the PEP 523 hook costs per Python call.

Cases (ns per call of a Python function from a Python loop, on the Python that runs this
file; medians over timed batches after warm-up):

* plain calls with no hook installed (``f(a, b)``, a call with ``*args``/``**kwargs``, a
  closure); ``+ns`` is against an empty loop, i.e. the cost of the call itself;
* hook installed, this thread has no callback (another thread's callback installed it);
* hook installed, callback set, the code is skipped (the C skip check: what every library
  call pays while kiln is active);
* C fast path: a cache hit with a trivial guard ``lambda L: True`` runs the replacement
  (positional call; ``*args``/``**kwargs`` call; closure, whose function object is built per
  call); and the same hit with a guard written in C (``bool``), which leaves the cost of the
  hook itself (building ``L``, calling the guard and the replacement from C);
* callback miss: the Python callback is consulted and answers None;
* setting and restoring a callback (``with callback_set(cb):``), which installs and removes
  the evaluation function when no other thread has a callback, and the same with
  ``keep_installed(True)``, which leaves it installed.

For the hook cases ``+ns`` is against the same loop with no hook: the cost kiln adds.
Batches of a case and of its reference alternate and are differenced pairwise, which keeps
the deltas usable on a shared machine.

Run: ``python benchmarks/frameeval_bench.py`` (``--quick`` for fewer samples).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

import kiln.frameeval as fe


def f(a, b):
    return a


def f_replacement(a, b):
    return b


def g(a, b, *args, k, **kwargs):
    return a


def g_replacement(a, b, *args, k, **kwargs):
    return b


def make_closure():
    captured = 1

    def h(a, b):
        return captured

    return h


def make_closure_replacement():
    captured = 2

    def h(a, b):
        return captured

    return h


h = make_closure()
h_replacement = make_closure_replacement()


def loop_f(n: int) -> None:
    for _ in range(n):
        f(1, 2)


def loop_f_replacement(n: int) -> None:
    for _ in range(n):
        f_replacement(1, 2)


def loop_g(n: int) -> None:
    for _ in range(n):
        g(1, 2, 3, k=4, z=5)


def loop_h(n: int) -> None:
    for _ in range(n):
        h(1, 2)


def loop_empty(n: int) -> None:
    for _ in range(n):
        pass


def loop_callback_set(n: int) -> None:
    for _ in range(n):
        with fe.callback_set(skip_all):
            pass


def skip_all(code, L, func):
    return fe.SKIP


def answer_none(code, L, func):
    return None


def batch_ns(loop: Callable[[int], None], number: int) -> float:
    """One timed batch of ``loop(number)``, in ns per iteration."""
    t0 = time.perf_counter_ns()
    loop(number)
    return (time.perf_counter_ns() - t0) / number


@contextmanager
def other_thread_callback() -> Iterator[None]:
    """Keeps a callback set on a helper thread, so the hook is installed for everyone."""
    ready, done = threading.Event(), threading.Event()

    def hold():
        with fe.callback_set(answer_none):
            ready.set()
            done.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    ready.wait()
    assert fe.is_installed()
    try:
        yield
    finally:
        done.set()
        thread.join()


@contextmanager
def entries(*triples) -> Iterator[None]:
    """Cache entries (original, guard, replacement) for the block, run-only mode."""
    for original, guard, replacement in triples:
        fe.add_cache_entry(original.__code__, guard, replacement.__code__)
    try:
        with fe.callback_set(fe.RUN_ONLY):
            yield
    finally:
        fe.reset()


@contextmanager
def callback(cb) -> Iterator[None]:
    try:
        with fe.callback_set(cb):
            yield
    finally:
        fe.reset()


@contextmanager
def kept_installed() -> Iterator[None]:
    fe.keep_installed(True)
    try:
        yield
    finally:
        fe.keep_installed(False)


trivial = lambda L: True  # noqa: E731

#: (case, loop timed inside the setup, reference loop timed without it, setup)
CASES = [
    ("f(1, 2), no hook", loop_f, loop_empty, nullcontext),
    ("g(1, 2, 3, k=4, z=5), no hook", loop_g, loop_empty, nullcontext),
    ("closure h(1, 2), no hook", loop_h, loop_empty, nullcontext),
    ("hook installed, no callback in this thread", loop_f, loop_f, other_thread_callback),
    ("hook + callback set, code skipped (C)", loop_f, loop_f, lambda: callback(skip_all)),
    (
        "C fast path hit, trivial guard: f",
        loop_f,
        loop_f,
        lambda: entries((f, trivial, f_replacement)),
    ),
    (
        "C fast path hit, C guard (bool): f",  # bool(L) is true: no Python frame for the guard
        loop_f,
        loop_f,
        lambda: entries((f, bool, f_replacement)),
    ),
    (
        "C fast path hit, trivial guard: g(*args, **kw)",
        loop_g,
        loop_g,
        lambda: entries((g, trivial, g_replacement)),
    ),
    (
        "C fast path hit, trivial guard: closure h",
        loop_h,
        loop_h,
        lambda: entries((h, trivial, h_replacement)),
    ),
    ("replacement f called directly", loop_f_replacement, loop_f, nullcontext),
    ("callback miss (Python callback -> None)", loop_f, loop_f, lambda: callback(answer_none)),
    ("with callback_set(cb): pass (install+uninstall)", loop_callback_set, loop_empty, nullcontext),
    ("with callback_set(cb): pass, keep_installed", loop_callback_set, loop_empty, kept_installed),
]


def measure(number: int, samples: int) -> list[tuple[str, float, float]]:
    """(case, median ns per call, median paired difference with its reference loop).

    Batches of the case and of its reference alternate, so that a machine whose speed
    drifts (shared cores) shifts both alike; the difference is taken batch by batch."""
    fe.reset()
    rows = []
    for name, loop, reference, setup in CASES:
        with setup():
            loop(number)  # warm-up
        reference(number)
        case_ns, diff_ns = [], []
        for _ in range(samples):
            ref = batch_ns(reference, number)
            with setup():
                ns = batch_ns(loop, number)
            case_ns.append(ns)
            diff_ns.append(ns - ref)
        rows.append((name, statistics.median(case_ns), statistics.median(diff_ns)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    args = parser.parse_args()
    number, samples = (20_000, 5) if args.quick else (200_000, 15)
    rows = measure(number, samples)
    print(f"kiln.frameeval per-call cost, {platform.python_implementation()} {sys.version.split()[0]}")
    print(f"median of {samples} batches x {number} calls, after warm-up; ns per call")
    print(f"{'case':<52} {'ns/call':>9} {'+ns':>8}  (+ns: against the reference loop)")
    for case, ns, delta in rows:
        print(f"{case:<52} {ns:9.1f} {delta:+8.1f}")


if __name__ == "__main__":
    main()
