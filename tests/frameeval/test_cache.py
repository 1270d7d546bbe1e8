"""The per-code cache: entries, guards, the C fast path over every argument layout, layout
validation, skip marks, reset and the cycles the extra slot cannot collect."""

import gc
import sys
import threading
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kiln.frameeval as fe

WHO = "test module"


def add(a, b):
    return a + b


def add_twice(a, b):
    return (a + b) * 2


def add_thrice(a, b):
    return (a + b) * 3


def always(L):
    return True


# ---------------------------------------------------------------- entries


def test_add_get_clear():
    first = fe.add_cache_entry(add.__code__, always, add_twice.__code__)
    second = fe.add_cache_entry(add.__code__, always, add_thrice.__code__)
    assert isinstance(first, fe.CacheEntry)
    assert (first.guard, first.code) == (always, add_twice.__code__)
    assert fe.get_cache_entries(add.__code__) == [second, first]
    assert fe.is_skipped(add_twice.__code__) and fe.is_skipped(add_thrice.__code__)
    assert not fe.is_skipped(add.__code__)
    assert fe.clear_cache(add.__code__) == 2
    assert fe.get_cache_entries(add.__code__) == []
    assert fe.clear_cache(add.__code__) == 0


def test_cache_entry_is_read_only_and_not_constructible():
    entry = fe.add_cache_entry(add.__code__, always, add_twice.__code__)
    with pytest.raises(AttributeError):
        entry.guard = None
    with pytest.raises(TypeError):
        fe.CacheEntry(always, add_twice.__code__)
    assert "add_twice" in repr(entry)


def test_reset_drops_entries_and_skip_marks():
    fe.add_cache_entry(add.__code__, always, add_twice.__code__)
    fe.mark_skip(add_thrice.__code__)
    assert fe.reset() >= 3
    assert fe.get_cache_entries(add.__code__) == []
    assert not fe.is_skipped(add_twice.__code__)
    assert not fe.is_skipped(add_thrice.__code__)


def test_clear_cache_clears_the_skip_mark():
    fe.mark_skip(add.__code__)
    fe.clear_cache(add.__code__)
    assert not fe.is_skipped(add.__code__)


def test_argument_types_are_checked():
    with pytest.raises(TypeError):
        fe.add_cache_entry(add, always, add_twice.__code__)
    with pytest.raises(TypeError):
        fe.add_cache_entry(add.__code__, always, add_twice)
    with pytest.raises(TypeError):
        fe.add_cache_entry(add.__code__, 42, add_twice.__code__)
    with pytest.raises(ValueError, match="different"):
        fe.add_cache_entry(add.__code__, always, add.__code__)
    for function in (fe.get_cache_entries, fe.clear_cache, fe.mark_skip, fe.is_skipped):
        with pytest.raises(TypeError):
            function(add)


# ---------------------------------------------------------------- layout validation


def two_kwonly(a, *, b):
    return 0


def star(a, *b):
    return 0


def renamed(a, c):
    return 0


def generator(a, b):
    yield 0


async def coroutine(a, b):
    return 0


def closure_of(value):
    def inner(a, b):
        return value

    return inner


@pytest.mark.parametrize(
    ("replacement", "why"),
    [
        (two_kwonly.__code__, "argument counts"),
        (star.__code__, "argument counts"),
        (renamed.__code__, "argument names"),
        (generator.__code__, "generator"),
        (coroutine.__code__, "generator"),
        (closure_of(1).__code__, "free variables"),
        (compile("x = 1", "<module>", "exec"), "not the code of a function"),
    ],
)
def test_layout_mismatch_is_rejected(replacement, why):
    with pytest.raises(ValueError, match=why):
        fe.add_cache_entry(add.__code__, always, replacement)
    assert fe.get_cache_entries(add.__code__) == []


def test_free_variable_names_must_match():
    def make_x():
        x = 1

        def f():
            return x

        return f

    def make_y():
        y = 2

        def f():
            return y

        return f

    with pytest.raises(ValueError, match="free variable names"):
        fe.add_cache_entry(make_x().__code__, always, make_y().__code__)


# ---------------------------------------------------------------- guards


def test_first_passing_guard_wins_newest_first():
    seen = []

    def guard(name, verdict):
        def check(L):
            seen.append((name, dict(L)))
            return verdict

        return check

    fe.add_cache_entry(add.__code__, guard("old", True), add_twice.__code__)
    fe.add_cache_entry(add.__code__, guard("new", False), add_thrice.__code__)
    with fe.callback_set(fe.RUN_ONLY):
        assert add(1, 2) == 6
    assert seen == [("new", {"a": 1, "b": 2}), ("old", {"a": 1, "b": 2})]


def test_guards_share_one_locals_dict_per_frame():
    dicts = []

    def record(L):
        dicts.append(L)
        return False

    fe.add_cache_entry(add.__code__, record, add_twice.__code__)
    fe.add_cache_entry(add.__code__, record, add_thrice.__code__)
    with fe.callback_set(fe.RUN_ONLY):
        add(1, 2)
        add(1, 2)
    assert len(dicts) == 4
    assert dicts[0] is dicts[1] and dicts[2] is dicts[3] and dicts[0] is not dicts[2]


def test_guard_result_truthiness_is_used():
    fe.add_cache_entry(add.__code__, lambda L: [L["a"]] if L["a"] else [], add_twice.__code__)
    with fe.callback_set(fe.RUN_ONLY):
        assert add(1, 2) == 6
        assert add(0, 2) == 2


def test_miss_falls_back_to_the_callback_which_can_fill_the_cache():
    asked = []

    def callback(code, L, func):
        if code is add.__code__:
            asked.append(L["a"])
            fe.add_cache_entry(code, lambda G, a=L["a"]: G["a"] == a, add_twice.__code__)
            return add_twice.__code__
        return None

    with fe.callback_set(callback):
        results = [add(a, 1) for a in (1, 2, 1, 2, 3)]
    assert results == [4, 6, 4, 6, 8]
    assert asked == [1, 2, 3]
    assert len(fe.get_cache_entries(add.__code__)) == 3


def test_guard_exception_propagates_and_keeps_the_cache():
    ran = []

    def f(x):
        ran.append(x)

    def g(x):
        ran.append(-x)

    def guard(L):
        raise LookupError("guard failed")

    fe.add_cache_entry(f.__code__, guard, g.__code__)
    asked = []
    callback = lambda code, L, func: asked.append(code)  # noqa: E731
    with fe.callback_set(callback), pytest.raises(LookupError, match="guard failed"):
        f(1)
    assert ran == []
    assert f.__code__ not in asked
    assert len(fe.get_cache_entries(f.__code__)) == 1


def test_guard_result_whose_truth_raises_propagates():
    class Undecided:
        def __bool__(self):
            raise RuntimeError("no truth")

    fe.add_cache_entry(add.__code__, lambda L: Undecided(), add_twice.__code__)
    with fe.callback_set(fe.RUN_ONLY), pytest.raises(RuntimeError, match="no truth"):
        add(1, 2)


def test_guard_frames_are_not_intercepted():
    def guard(L):
        return add(0, 0) == 0  # a call of the code being looked up

    fe.add_cache_entry(add.__code__, guard, add_twice.__code__)
    asked = []
    with fe.callback_set(lambda code, L, func: asked.append(code)):
        assert add(1, 2) == 6
    assert add.__code__ not in asked


def test_cleared_entries_stop_hitting():
    fe.add_cache_entry(add.__code__, always, add_twice.__code__)
    with fe.callback_set(fe.RUN_ONLY):
        assert add(1, 2) == 6
        fe.clear_cache(add.__code__)
        assert add(1, 2) == 3


# ---------------------------------------------------------------- fast path over layouts


def positional_only(a, b, /, c):
    return ("original", a, b, c)


def positional_only_r(a, b, /, c):
    return ("replacement", a, b, c)


def defaults(a, b=2, c=3):
    return ("original", a, b, c)


def defaults_r(a, b=20, c=30):
    return ("replacement", a, b, c)


def keyword_only(a, *, k, m=5):
    return ("original", a, k, m)


def keyword_only_r(a, *, k, m=50):
    return ("replacement", a, k, m)


def var_positional(a, *args):
    return ("original", a, args)


def var_positional_r(a, *args):
    return ("replacement", a, args)


def var_keyword(a, /, b, **kwargs):
    return ("original", a, b, kwargs)


def var_keyword_r(a, /, b, **kwargs):
    return ("replacement", a, b, kwargs)


def everything(p, /, q, r=3, *args, k, m=5, **kwargs):
    return ("original", p, q, r, args, k, m, kwargs)


def everything_r(p, /, q, r=30, *args, k, m=50, **kwargs):
    return ("replacement", p, q, r, args, k, m, kwargs)


NAMES = [f"a{i}" for i in range(20)]
exec(f"def many({', '.join(NAMES)}):\n    return ('original', {', '.join(NAMES)})")
exec(f"def many_r({', '.join(NAMES)}):\n    return ('replacement', {', '.join(NAMES)})")
exec(f"def many_kw(*, {', '.join(NAMES)}):\n    return ('original', {', '.join(NAMES)})")
exec(f"def many_kw_r(*, {', '.join(NAMES)}):\n    return ('replacement', {', '.join(NAMES)})")


def cell_argument(x, y):
    def inner():
        return x, y

    return ("original", inner())


def cell_argument_r(x, y):
    def inner():
        return x, y

    return ("replacement", inner())


def method_holder():
    class Holder:
        def method(self, a):
            return ("original", self.value, a)

        def method_r(self, a):
            return ("replacement", self.value, a)

    holder = Holder()
    holder.value = 7
    return holder


LAYOUTS = {
    "positional_only": (positional_only, positional_only_r, [((1, 2, 3), {}), ((1, 2), {"c": 3})]),
    "defaults": (defaults, defaults_r, [((1,), {}), ((1, 5), {}), ((1,), {"c": 9})]),
    "keyword_only": (keyword_only, keyword_only_r, [((1,), {"k": 2}), ((1,), {"k": 2, "m": 3})]),
    "var_positional": (var_positional, var_positional_r, [((1,), {}), ((1, 2, 3, 4), {})]),
    "var_keyword": (
        var_keyword,
        var_keyword_r,
        [((1, 2), {}), ((1,), {"b": 2, "x": 3}), ((1, 2), {"a": "posonly name in **kw"})],
    ),
    "everything": (
        everything,
        everything_r,
        [((1, 2), {"k": 3}), ((1, 2, 3, 4, 5), {"k": 6, "m": 7, "p": 8, "z": 9})],
    ),
    "more_than_16_positional": (many, many_r, [(tuple(range(20)), {})]),  # noqa: F821
    "more_than_16_keywords": (many_kw, many_kw_r, [((), dict(zip(NAMES, range(20), strict=True)))]),  # noqa: F821
    "more_than_16_var_positional": (var_positional, var_positional_r, [(tuple(range(40)), {})]),
    "cell_arguments": (cell_argument, cell_argument_r, [((3, 4), {})]),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_fast_path_passes_arguments_exactly(layout):
    original, replacement, calls = LAYOUTS[layout]
    seen = []

    def guard(L):
        seen.append(dict(L))
        return True

    fe.add_cache_entry(original.__code__, guard, replacement.__code__)
    for args, kwargs in calls:
        # The replacement sees the arguments as the original bound them (its own defaults
        # differ on purpose and must not apply).
        expected = ("replacement", *original(*args, **kwargs)[1:])
        with fe.callback_set(fe.RUN_ONLY):
            got = original(*args, **kwargs)
        assert got == expected
    assert len(seen) == len(calls)


def test_fast_path_on_methods_passes_self():
    holder = method_holder()
    cls = type(holder)
    fe.add_cache_entry(cls.method.__code__, always, cls.method_r.__code__)
    with fe.callback_set(fe.RUN_ONLY):
        assert holder.method(1) == ("replacement", 7, 1)


def test_zero_argument_super_works_in_replacements():
    class Base:
        def name(self):
            return "base"

    class Child(Base):
        def name(self):
            return super().name() + "+child"

        def name_replacement(self):
            return super().name() + "+replacement"

    fe.add_cache_entry(Child.name.__code__, always, Child.name_replacement.__code__)
    with fe.callback_set(fe.RUN_ONLY):
        assert Child().name() == "base+replacement"


def test_replacement_runs_with_the_original_closure_and_globals():
    def make(value):
        def f(a):
            return ("original", value, a, WHO)

        return f

    namespace = {"WHO": "replacement module"}
    exec(
        "def make(value):\n"
        "    def f(a):\n"
        "        return ('replacement', value, a, WHO)\n"
        "    return f\n",
        namespace,
    )
    replacement_code = namespace["make"](None).__code__
    f1, f2 = make(1), make(2)
    assert f1.__code__ is f2.__code__
    fe.add_cache_entry(f1.__code__, always, replacement_code)
    with fe.callback_set(fe.RUN_ONLY):
        results = [f1(10), f2(20), f1(30)]
    assert results == [
        ("replacement", 1, 10, "test module"),
        ("replacement", 2, 20, "test module"),
        ("replacement", 1, 30, "test module"),
    ]


# ---------------------------------------------------------------- cycles through the extra slot


def test_reset_breaks_cycles_through_the_extra_slot():
    namespace = {}
    exec("def f(a):\n    return a\ndef r(a):\n    return -a\n", namespace)
    f, r = namespace["f"], namespace["r"]
    code_ref = weakref.ref(f.__code__)
    # The guard reaches back to f (and so to f's code) through the namespace.
    fe.add_cache_entry(f.__code__, lambda L, ns=namespace: "f" in ns, r.__code__)
    with fe.callback_set(fe.RUN_ONLY):
        assert f(3) == -3
    del f, r, namespace
    gc.collect()
    assert code_ref() is not None  # kept alive by its own cache entry: uncollectable
    fe.reset()
    gc.collect()
    assert code_ref() is None


# ---------------------------------------------------------------- finalizers during allocation


def test_cache_stays_consistent_when_collections_run_finalizers_that_touch_it():
    """With a collection on every allocation, finalizers that clear, fill and reset caches
    run in the middle of add_cache_entry and reset; the state must stay consistent."""
    actions = [
        lambda: fe.clear_cache(add.__code__),
        lambda: fe.add_cache_entry(add.__code__, always, add_thrice.__code__),
        fe.reset,
    ]

    class Cyclic:
        def __init__(self, action):
            self.action, self.me = action, self

        def __del__(self):
            self.action()

    thresholds = gc.get_threshold()
    gc.disable()
    try:
        gc.set_threshold(1, 1, 1)
        gc.enable()
        for i in range(300):
            Cyclic(actions[i % 3])
            fe.add_cache_entry(add.__code__, always, add_twice.__code__)
            fe.get_cache_entries(add.__code__)
            if len(fe.get_cache_entries(add.__code__)) > 20:
                fe.reset()
    finally:
        gc.set_threshold(*thresholds)
        gc.collect()
    entries = fe.get_cache_entries(add.__code__)
    assert all(isinstance(e, fe.CacheEntry) for e in entries)
    assert {e.code for e in entries} <= {add_twice.__code__, add_thrice.__code__}
    with fe.callback_set(fe.RUN_ONLY):
        assert add(1, 2) in (3, 6, 9)


def test_threads_hitting_while_another_thread_rewrites_the_cache():
    """Guards switch threads often (tiny switch interval) while one thread keeps clearing,
    refilling and resetting the cache: every call returns an allowed answer, none crashes."""
    stop = threading.Event()
    errors = []

    def slow_guard(L):
        return sum(range(20)) == 190

    def writer():
        try:
            while not stop.is_set():
                fe.add_cache_entry(add.__code__, slow_guard, add_twice.__code__)
                fe.add_cache_entry(add.__code__, slow_guard, add_thrice.__code__)
                fe.clear_cache(add.__code__)
                fe.add_cache_entry(add.__code__, slow_guard, add_twice.__code__)
                fe.reset()
        except BaseException as error:
            errors.append(error)

    def reader():
        try:
            with fe.callback_set(fe.RUN_ONLY):
                for _ in range(3000):
                    assert add(1, 2) in (3, 6, 9)
        except BaseException as error:
            errors.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=reader) for _ in range(4)]
        writing = threading.Thread(target=writer)
        writing.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.set()
        writing.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_state_of_a_dead_code_object_is_freed():
    # Garbage left by earlier tests can take more than one collection to die (finalizers,
    # weak-reference callbacks): collect until nothing is left, so that only this test's
    # code objects die below (on the H200 two earlier code objects died in the second
    # collection and the count came out 2 short).
    while gc.collect():
        pass
    before = fe.reset()  # number of code objects that have a state
    codes = [add.__code__.replace(co_name=f"add{i}") for i in range(100)]
    for code in codes:
        fe.mark_skip(code)
    assert fe.reset() == before + 100
    del code, codes
    gc.collect()
    assert fe.reset() == before


# ---------------------------------------------------------------- any signature, any call


@st.composite
def signatures_and_calls(draw):
    """A random signature (its source) and a random call of it (may be invalid)."""
    n_posonly, n_normal, n_kwonly = (draw(st.integers(0, 3)) for _ in range(3))
    n_defaults = draw(st.integers(0, n_posonly + n_normal))
    varargs, varkw = draw(st.booleans()), draw(st.booleans())
    posonly = [f"p{i}" for i in range(n_posonly)]
    normal = [f"n{i}" for i in range(n_normal)]
    kwonly = [f"k{i}" for i in range(n_kwonly)]
    positional = posonly + normal
    first_default = len(positional) - n_defaults
    params = [f"{name}={i}" if i >= first_default else name for i, name in enumerate(positional)]
    if posonly:
        params.insert(n_posonly, "/")
    if varargs:
        params.append("*args")
    elif kwonly:
        params.append("*")
    params += [f"{name}=-{i}" if draw(st.booleans()) else name for i, name in enumerate(kwonly)]
    if varkw:
        params.append("**kwargs")
    names = [*positional, *kwonly, *(["args"] if varargs else []), *(["kwargs"] if varkw else [])]
    required_kwonly = [name for name in kwonly if f"{name}=" not in ", ".join(params)]
    if draw(st.booleans()):  # any call, often invalid
        n_args = draw(st.integers(0, len(positional) + 3))
        pool = [*positional, *kwonly, "x", "y"]
        keywords = draw(st.lists(st.sampled_from(pool), unique=True))
    else:  # a valid call
        n_args = draw(st.integers(min(n_posonly, first_default), len(positional) + 3 * varargs))
        uncovered = positional[n_args:]
        required = [n for i, n in enumerate(normal, n_posonly) if i >= n_args and i < first_default]
        optional = [n for n in uncovered if n not in required and n not in posonly]
        optional += [n for n in kwonly if n not in required_kwonly]
        if varkw:
            optional += ["x", "y", *posonly]
        chosen = draw(st.lists(st.sampled_from(optional), unique=True)) if optional else []
        keywords = [*required, *required_kwonly, *chosen]
    args = tuple(range(100, 100 + n_args))
    kwargs = {name: 1000 + i for i, name in enumerate(keywords)}
    return ", ".join(params), names, args, kwargs


@settings(max_examples=150, deadline=None)
@given(signatures_and_calls())
def test_fast_path_binds_like_cpython_for_any_signature(case):
    params, names, args, kwargs = case
    body = "(" + "".join(f"{name}, " for name in names) + ")"
    namespace = {}
    exec(f"def original({params}):\n    return ('original', {body})\n", namespace)
    exec(f"def replacement({params}):\n    return ('replacement', {body})\n", namespace)
    original, replacement = namespace["original"], namespace["replacement"]
    try:
        expected = ("replacement", original(*args, **kwargs)[1])
    except TypeError as error:
        expected = type(error)
    fe.add_cache_entry(original.__code__, always, replacement.__code__)
    try:
        with fe.callback_set(fe.RUN_ONLY):
            got = original(*args, **kwargs)
    except TypeError as error:
        got = type(error)
    finally:
        fe.clear_cache(original.__code__)
    assert got == expected
