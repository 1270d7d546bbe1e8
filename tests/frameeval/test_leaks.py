"""No growth on any path of the hook: 10,000 calls each, measured with tracemalloc, objects
counted by __del__, and exact reference counts; negative controls prove the checks can fail.
"""

import gc
import sys
import tracemalloc

import pytest

import kiln.frameeval as fe

CALLS = 10_000
#: Bytes allowed to remain after CALLS calls: far below one leaked object per call.
SLACK = 8_192


class Tracked:
    """An argument whose live instances are counted."""

    live = 0

    def __init__(self):
        Tracked.live += 1

    def __del__(self):
        type(self).live -= 1


def traced_here():
    """Bytes currently allocated while code of this file was the innermost Python frame
    (other threads, e.g. pytest-xdist's channel, allocate elsewhere and are left out)."""
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, __file__)])
    return sum(stat.size for stat in snapshot.statistics("filename"))


def growth(call, n=CALLS):
    """Bytes still allocated after n more calls of `call` (after warm-up and collection)."""
    for _ in range(200):
        call()
    gc.collect()
    tracemalloc.start()
    try:
        before = traced_here()
        for _ in range(n):
            call()
        gc.collect()
        return traced_here() - before
    finally:
        tracemalloc.stop()


def refcounts(objects):
    gc.collect()
    return [sys.getrefcount(obj) for obj in objects]


def plain(a, b):
    return a


def plain_r(a, b):
    return b


def everything(p, /, q, *args, k, **kwargs):
    return p


def everything_r(p, /, q, *args, k, **kwargs):
    return q


def raising(a, b):
    raise ValueError("replacement")


def make_closure():
    captured = Tracked()

    def inner(a, b):
        return captured

    return inner


def make_closure_r():
    captured = None

    def inner(a, b):
        return captured

    return inner


def no_answer(code, L, func):
    return None


def replace_plain(code, L, func):
    return plain_r.__code__ if code is plain.__code__ else None


def fresh_replacement_for_plain(code, L, func):
    # a new code object every call: its skip mark (a CodeState) must die with it
    return plain_r.__code__.replace() if code is plain.__code__ else None


def raise_for_plain(code, L, func):
    if code is plain.__code__:
        raise KeyError("callback")


def wrong_answer_for_plain(code, L, func):
    return 42 if code is plain.__code__ else None


def always(L):
    return True


def never(L):
    return False


def guard_raises(L):
    raise LookupError("guard")


def call_plain():
    plain(Tracked(), Tracked())


def call_everything():
    everything(Tracked(), Tracked(), Tracked(), k=Tracked(), z=Tracked())


def call_many():
    plain(*[Tracked(), Tracked()])


def expect(error):
    def call():
        try:
            plain(Tracked(), Tracked())
        except error:
            pass
        else:
            raise AssertionError(f"{error.__name__} not raised")

    return call


def call_new_closure():
    make_closure()(Tracked(), Tracked())


PATHS = {
    # name: (callback, entries to add [(original, guard, replacement)], code to skip, call)
    "skipped_code": (no_answer, [], plain, call_plain),
    "callback_none": (no_answer, [], None, call_plain),
    "callback_replaces": (replace_plain, [], None, call_plain),
    "callback_replaces_with_new_code": (fresh_replacement_for_plain, [], None, call_plain),
    "callback_raises": (raise_for_plain, [], None, expect(KeyError)),
    "callback_wrong_answer": (wrong_answer_for_plain, [], None, expect(TypeError)),
    "fast_path_hit": (fe.RUN_ONLY, [(plain, always, plain_r)], None, call_plain),
    "fast_path_every_layout": (
        fe.RUN_ONLY,
        [(everything, always, everything_r)],
        None,
        call_everything,
    ),
    "fast_path_new_closure_each_call": (
        fe.RUN_ONLY,
        [(make_closure(), always, make_closure_r())],
        None,
        call_new_closure,
    ),
    "guard_miss_then_callback": (no_answer, [(plain, never, plain_r)], None, call_plain),
    "guard_miss_run_only": (fe.RUN_ONLY, [(plain, never, plain_r)], None, call_plain),
    "guard_raises": (no_answer, [(plain, guard_raises, plain_r)], None, expect(LookupError)),
    "replacement_raises": (fe.RUN_ONLY, [(plain, always, raising)], None, expect(ValueError)),
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_no_growth(path):
    callback, entries, skipped, call = PATHS[path]
    for original, guard, replacement in entries:
        fe.add_cache_entry(original.__code__, guard, replacement.__code__)
    if skipped is not None:
        fe.mark_skip(skipped.__code__)
    gc.collect()
    baseline = Tracked.live
    with fe.callback_set(callback):
        grown = growth(call)
    assert Tracked.live == baseline
    assert grown < SLACK, f"{grown} bytes left after {CALLS} calls"


def test_reference_counts_are_exact_on_the_fast_path():
    guard_calls = []

    def guard(L):
        guard_calls.append(None)
        return True

    arg = Tracked()
    watched = [guard, plain_r.__code__, plain.__code__, plain, arg, fe.RUN_ONLY]
    before = refcounts(watched)
    entry = fe.add_cache_entry(plain.__code__, guard, plain_r.__code__)
    # The entry holds the guard and the replacement code, nothing else.
    added = [after - old for after, old in zip(refcounts(watched), before, strict=True)]
    assert added == [1, 1, 0, 0, 0, 0]
    with fe.callback_set(fe.RUN_ONLY):
        for _ in range(CALLS):
            plain(arg, arg)
    assert len(guard_calls) == CALLS
    guard_calls.clear()
    fe.clear_cache(plain.__code__)
    del entry
    gc.collect()
    assert refcounts(watched) == before


def test_reference_counts_are_exact_through_the_callback():
    arg = Tracked()
    watched = [replace_plain, plain_r.__code__, plain.__code__, plain, arg, fe.SKIP]
    before = refcounts(watched)
    with fe.callback_set(replace_plain):
        for _ in range(CALLS):
            plain(arg, arg)
    with fe.callback_set(lambda code, L, func: fe.SKIP if code is plain.__code__ else None):
        for _ in range(100):
            plain(arg, arg)
    fe.reset()
    assert refcounts(watched) == before


# ---------------------------------------------------------------- negative controls


def test_negative_control_growth_is_detected():
    kept = []

    def leaky_guard(L):
        kept.append(L)  # keeps every frame's locals dict and its Tracked arguments
        return True

    fe.add_cache_entry(plain.__code__, leaky_guard, plain_r.__code__)
    gc.collect()
    baseline = Tracked.live
    with fe.callback_set(fe.RUN_ONLY):
        grown = growth(call_plain)
    assert grown > SLACK * 10
    assert Tracked.live - baseline == 2 * (CALLS + 200)
    kept.clear()
    gc.collect()
    assert Tracked.live == baseline


def test_negative_control_reference_leak_is_detected():
    arg = Tracked()
    kept = []

    def callback(code, L, func):
        if code is plain.__code__:
            kept.append(L["a"])

    before = sys.getrefcount(arg)
    with fe.callback_set(callback):
        for _ in range(100):
            plain(arg, arg)
    assert sys.getrefcount(arg) == before + 100
