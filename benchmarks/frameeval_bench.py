"""kiln.frameeval benchmark: what the PEP 523 hook costs per Python call.

Cases (each a median over timed batches after warm-up, ns per call of a Python function
from a Python loop, on the Python that runs this file):

* plain call, no hook installed (the reference);
* hook installed, this thread has no callback (another thread's callback installed it);
* hook installed, callback set, the code is skipped (the C skip check: what every library
  call pays while kiln is active);
* C fast path: a cache hit with a trivial guard ``lambda L: True`` runs the replacement
  (positional call; call with ``*args``/``**kwargs``; closure, whose function object is built
  per call), against calling the replacement directly; and the same hit with a guard written
  in C (``bool``), which leaves the cost of the hook itself (locals dict, replacement call);
* callback miss: the Python callback is consulted and answers None;
* setting and restoring a callback (``with callback_set(cb):``), which installs and removes
  the evaluation function when no other thread has a callback.

Run: ``python benchmarks/frameeval_bench.py`` (``--quick`` for fewer samples).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable

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


def median_ns(loop: Callable[[int], None], *, number: int, samples: int) -> float:
    """Median over ``samples`` batches of ``loop(number)``, in ns per iteration."""
    loop(number)
    times = []
    for _ in range(samples):
        t0 = time.perf_counter_ns()
        loop(number)
        times.append((time.perf_counter_ns() - t0) / number)
    return statistics.median(times)


class OtherThreadCallback:
    """Keeps a callback set on a helper thread, so the hook is installed for everyone."""

    def __enter__(self):
        self.ready, self.done = threading.Event(), threading.Event()

        def hold():
            with fe.callback_set(answer_none):
                self.ready.set()
                self.done.wait()

        self.thread = threading.Thread(target=hold)
        self.thread.start()
        self.ready.wait()
        assert fe.is_installed()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


def measure(number: int, samples: int) -> list[tuple[str, float, str]]:
    """(case, ns per call, what it is compared with) for every case."""
    fe.reset()
    timed = lambda loop: median_ns(loop, number=number, samples=samples)  # noqa: E731
    rows = []
    empty = timed(loop_empty)
    plain = timed(loop_f)
    plain_g = timed(loop_g)
    plain_h = timed(loop_h)
    direct = timed(loop_f_replacement)
    rows.append(("empty loop iteration", empty, ""))
    rows.append(("f(1, 2), no hook", plain, "reference"))
    rows.append(("g(1, 2, 3, k=4, z=5), no hook", plain_g, "reference"))
    rows.append(("closure h(1, 2), no hook", plain_h, "reference"))

    with OtherThreadCallback():
        rows.append(("hook installed, no callback in this thread", timed(loop_f), "f"))
    with fe.callback_set(skip_all):
        skipped = timed(loop_f)
    rows.append(("hook + callback set, code skipped (C)", skipped, "f"))
    fe.reset()

    fe.add_cache_entry(f.__code__, lambda L: True, f_replacement.__code__)
    fe.add_cache_entry(g.__code__, lambda L: True, g_replacement.__code__)
    fe.add_cache_entry(h.__code__, lambda L: True, h_replacement.__code__)
    with fe.callback_set(fe.RUN_ONLY):
        rows.append(("C fast path hit, trivial guard: f", timed(loop_f), "f"))
        fe.clear_cache(f.__code__)
        fe.add_cache_entry(f.__code__, bool, f_replacement.__code__)  # bool(L): C, true
        rows.append(("C fast path hit, C guard (bool): f", timed(loop_f), "f"))
        rows.append(("C fast path hit, trivial guard: g(*args, **kw)", timed(loop_g), "g"))
        rows.append(("C fast path hit, trivial guard: closure h", timed(loop_h), "h"))
    rows.append(("replacement called directly", direct, "f"))
    fe.reset()

    with fe.callback_set(answer_none):
        rows.append(("callback miss (Python callback -> None)", timed(loop_f), "f"))
    fe.reset()
    rows.append(
        ("with callback_set(cb): pass (install+uninstall)", timed(loop_callback_set), "empty")
    )
    references = {"f": plain, "g": plain_g, "h": plain_h, "empty": empty}
    return [(case, ns, references.get(ref, ref)) for case, ns, ref in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    args = parser.parse_args()
    number, samples = (20_000, 5) if args.quick else (200_000, 15)
    rows = measure(number, samples)
    print(f"kiln.frameeval per-call cost, {platform.python_implementation()} {sys.version.split()[0]}")
    print(f"median of {samples} batches x {number} calls, after warm-up; ns per call")
    print(f"{'case':<52} {'ns/call':>9} {'+ns':>8}")
    for case, ns, reference in rows:
        delta = f"{ns - reference:+8.1f}" if isinstance(reference, float) else ""
        print(f"{case:<52} {ns:9.1f} {delta:>8}")


if __name__ == "__main__":
    main()
