"""The evaluation function: what it intercepts, what the callback sees and answers, errors,
recursion, install/uninstall and threads. Real frames throughout."""

import gc
import os
import shlex
import subprocess
import sys
import sysconfig
import threading
import traceback
import warnings
import weakref
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kiln.frameeval as fe


def add(a, b):
    return a + b


def add_twice(a, b):
    return (a + b) * 2


def helper(x):
    return x + 1


def calls_helper(x):
    return helper(x) * 10


def calls_helper_replacement(x):
    return helper(x) * 100


# ---------------------------------------------------------------- what the callback sees


def test_callback_gets_code_arguments_and_function(recorder):
    with fe.callback_set(recorder):
        assert add(1, 2) == 3
    assert recorder.codes() == [add.__code__]
    _code, L, func = recorder.calls[0]
    assert L == {"a": 1, "b": 2}
    assert func is add


def test_locals_hold_every_kind_of_argument(recorder):
    def f(p, /, q, r=3, *args, k, m=5, **kwargs):
        return p

    with fe.callback_set(recorder):
        f(1, 2, 30, 40, 50, k=6, z=7, p=8)
    assert recorder.locals_of(f) == [
        {"p": 1, "q": 2, "r": 30, "args": (40, 50), "k": 6, "m": 5, "kwargs": {"z": 7, "p": 8}}
    ]


def test_locals_hold_bound_free_variables_only(recorder):
    bound = object()

    def outer():
        def inner(a):
            return a, bound, later  # noqa: F821 (unbound on purpose)

        later = None
        del later
        return inner

    inner = outer()
    with fe.callback_set(recorder), pytest.raises(NameError):
        inner(1)
    assert recorder.locals_of(inner) == [{"a": 1, "bound": bound}]


def test_argument_that_is_a_cell_is_seen_as_its_value(recorder):
    def f(x):
        def g():
            return x

        return g()

    with fe.callback_set(recorder):
        assert f(41) == 41
    assert recorder.locals_of(f) == [{"x": 41}]


# ---------------------------------------------------------------- the callback's answers


def test_none_runs_the_original_every_time(recorder):
    with fe.callback_set(recorder):
        assert [add(1, 2), add(3, 4)] == [3, 7]
    assert recorder.codes() == [add.__code__, add.__code__]
    assert not fe.is_skipped(add.__code__)


def test_skip_runs_the_original_and_never_asks_again(make_recorder):
    recorder = make_recorder(lambda code: fe.SKIP if code is add.__code__ else None)
    with fe.callback_set(recorder):
        assert [add(1, 2), add(3, 4)] == [3, 7]
    assert recorder.codes() == [add.__code__]
    assert fe.is_skipped(add.__code__)


def test_code_answer_runs_the_replacement_once(make_recorder):
    recorder = make_recorder(lambda code: add_twice.__code__ if code is add.__code__ else None)
    with fe.callback_set(recorder):
        assert add(1, 2) == 6
        assert add(2, 2) == 8
    assert recorder.codes() == [add.__code__, add.__code__]
    assert fe.is_skipped(add_twice.__code__)
    assert fe.get_cache_entries(add.__code__) == []


def test_replacement_frames_are_skipped_and_calls_inside_them_are_not(make_recorder):
    def answer(code):
        return calls_helper_replacement.__code__ if code is calls_helper.__code__ else None

    recorder = make_recorder(answer)
    with fe.callback_set(recorder):
        assert calls_helper(1) == 200
    assert recorder.codes() == [calls_helper.__code__, helper.__code__]


def test_answering_the_frames_own_code_runs_it_normally(make_recorder):
    recorder = make_recorder(lambda code: code)
    with fe.callback_set(recorder):
        assert [add(1, 2), add(3, 4)] == [3, 7]
    assert recorder.codes() == [add.__code__, add.__code__]
    assert not fe.is_skipped(add.__code__)


def test_callback_answer_of_wrong_type_raises_and_original_does_not_run(make_recorder):
    ran = []

    def f(x):
        ran.append(x)

    answer = make_recorder(lambda code: 42 if code is f.__code__ else None)
    with pytest.raises(TypeError, match="None, SKIP or a code object"), fe.callback_set(answer):
        f(1)
    assert ran == []


def test_callback_answer_with_other_layout_raises(make_recorder):
    def three(a, b, c):
        return 0

    answer = make_recorder(lambda code: three.__code__ if code is add.__code__ else None)
    with pytest.raises(ValueError, match="argument counts"), fe.callback_set(answer):
        add(1, 2)


def test_run_only_never_calls_back(recorder):
    fe.add_cache_entry(add.__code__, lambda L: L["a"] == 1, add_twice.__code__)
    with fe.callback_set(fe.RUN_ONLY):
        assert fe.get_callback() is fe.RUN_ONLY
        assert add(1, 2) == 6  # hit
        assert add(5, 2) == 7  # miss: runs normally
    assert fe.get_callback() is None


# ---------------------------------------------------------------- frames never intercepted


def test_callback_frames_are_not_intercepted(recorder):
    def callback(code, L, func):
        recorder(code, L, func)
        helper(1)  # a call made by the callback
        if code is add.__code__:
            add(10, 20)  # even the code being intercepted
        return None

    with fe.callback_set(callback):
        assert add(1, 2) == 3
    assert recorder.codes() == [add.__code__]


def test_generator_coroutine_async_generator_frames_are_not_intercepted(recorder):
    def gen(n):
        for i in range(n):
            yield helper(i)

    async def coro(x):
        return helper(x)

    async def agen(x):
        yield helper(x)

    def drive(awaitable):
        try:
            awaitable.send(None)
        except StopIteration as stop:
            return stop.value

    with fe.callback_set(recorder):
        generated = list(gen(2))
        returned = drive(coro(5))
        yielded = drive(agen(7).__anext__())
    assert (generated, returned, yielded) == ([1, 2], 6, 8)
    h, d = helper.__code__, drive.__code__
    assert recorder.codes() == [h, h, d, h, d, h]


def test_throw_into_a_generator_is_not_intercepted(recorder):
    def gen():
        try:
            yield 1
        except KeyError:
            yield helper(1)

    g = gen()
    next(g)
    with fe.callback_set(recorder):
        assert g.throw(KeyError) == 2
    assert recorder.codes() == [helper.__code__]


def test_module_and_class_bodies_and_exec_are_not_intercepted(recorder):
    def no_arguments():
        return helper(4)

    namespace = {"helper": helper}
    module_code = compile("x = helper(1)\nclass A:\n    y = helper(2)\n", "<kiln-test>", "exec")
    with fe.callback_set(recorder):
        exec(module_code, namespace)
        assert eval("helper(3)", namespace) == 4
        exec(no_arguments.__code__, namespace)  # a function's code run by exec
    # only this file's frames: an audit hook some installed library registers (filelock's,
    # on the GPU machine) runs on every exec and is intercepted like any function
    ours = [c for c in recorder.codes() if c.co_filename == __file__]
    assert ours == [helper.__code__] * 4
    assert namespace["A"].y == 3


def test_frames_started_before_the_callback_are_not_intercepted(recorder):
    def sets_callback_mid_frame():
        previous = fe.set_callback(recorder)
        try:
            return helper(1)
        finally:
            fe.set_callback(previous)

    assert sets_callback_mid_frame() == 2
    assert recorder.codes() == [helper.__code__]


def test_skip_marked_code_is_not_intercepted(recorder):
    fe.mark_skip(helper.__code__)
    with fe.callback_set(recorder):
        assert calls_helper(1) == 20
    assert recorder.codes() == [calls_helper.__code__]


def test_warm_call_sites_still_reach_the_hook(recorder):
    """Specialized call instructions (warmed up without a hook) deopt once a hook is set."""

    class C:
        def method(self):
            return 1

        @property
        def prop(self):
            return 2

        def __getitem__(self, key):
            return 3

        def __getattr__(self, name):
            return 4

    class D:
        def __getattribute__(self, name):
            return 8

    lam = lambda: 5  # noqa: E731

    def kw(*, a):
        return a

    c, d = C(), D()

    def workload():
        return [c.method(), c.prop, c[0], c.missing, lam(), kw(a=6), helper(6), d.anything]

    for _ in range(200):
        workload()
    with fe.callback_set(recorder):
        for _ in range(10):
            assert workload() == [1, 2, 3, 4, 5, 6, 7, 8]
    expected = [
        C.method.__code__,
        C.prop.fget.__code__,
        C.__getitem__.__code__,
        C.__getattr__.__code__,
        lam.__code__,
        kw.__code__,
        helper.__code__,
        D.__getattribute__.__code__,
    ]
    seen = recorder.codes()
    for code in expected:
        assert seen.count(code) == 10, code.co_name


@pytest.mark.parametrize("install", [sys.settrace, sys.setprofile])
def test_tracing_sees_the_replacement_and_results_stay_right(install):
    fe.add_cache_entry(add.__code__, lambda L: L["a"] > 0, add_twice.__code__)
    traced = []

    def tracer(frame, event, arg):
        if event == "call":
            traced.append(frame.f_code)
        return None

    install(tracer)
    try:
        with fe.callback_set(lambda code, L, func: None):
            results = [add(1, 2), add(-1, 2)]
    finally:
        install(None)
    assert results == [6, 1]
    assert add_twice.__code__ in traced  # tools see the code that ran, not the original
    assert traced.count(add.__code__) == 1  # the miss ran the original


# ---------------------------------------------------------------- errors


def test_exception_in_callback_propagates_and_frame_does_not_run():
    ran = []

    def f(x):
        ran.append(x)

    def callback(code, L, func):
        if code is f.__code__:
            raise KeyError("from the callback")

    with fe.callback_set(callback), pytest.raises(KeyError, match="from the callback") as info:
        f(1)
    assert ran == []
    names = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
    assert names[-1] == "callback"


def raising_replacement(a, b):
    raise ValueError(f"replacement {a} {b}")


def test_exception_in_replacement_propagates_with_its_traceback():
    fe.add_cache_entry(add.__code__, lambda L: True, raising_replacement.__code__)
    with fe.callback_set(fe.RUN_ONLY), pytest.raises(ValueError, match="replacement 1") as info:
        add(1, 2)
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert last.name == "raising_replacement"
    assert last.lineno == raising_replacement.__code__.co_firstlineno + 1


def test_arguments_are_released_after_errors():
    class Arg:
        pass

    def f(x):
        return x

    def callback(code, L, func):
        if code is f.__code__:
            raise RuntimeError

    arg = Arg()
    ref = weakref.ref(arg)
    with fe.callback_set(callback):
        for _ in range(3):
            with pytest.raises(RuntimeError):
                f(arg)
    del arg
    gc.collect()
    assert ref() is None


# ---------------------------------------------------------------- recursion


def countdown(n):
    return 0 if n == 0 else countdown(n - 1) + 1


def countdown_replacement(n):
    return 0 if n == 0 else countdown(n - 1) + 1


@pytest.mark.parametrize("mode", ["callback", "fast_path"])
def test_unbounded_recursion_raises_recursion_error(mode, recorder):
    if mode == "fast_path":
        fe.add_cache_entry(countdown.__code__, lambda L: True, countdown_replacement.__code__)
    callback = recorder if mode == "callback" else fe.RUN_ONLY
    with fe.callback_set(callback):
        assert countdown(50) == 50
        with pytest.raises(RecursionError):
            countdown(sys.getrecursionlimit() * 2)
        assert countdown(50) == 50  # the interpreter is still sound


# ---------------------------------------------------------------- frame release

BIG_LOCALS = 4000  # a frame larger than a data-stack chunk (16 KiB) gets a chunk of its own
_body = "".join(f"    v{i} = a\n" for i in range(BIG_LOCALS))
exec(f"def big_frame(a):\n{_body}    return ('original', a)\n")
exec(f"def big_frame_replacement(a):\n{_body}    return ('replacement', a)\n")


@pytest.mark.parametrize("path", ["callback", "fast_path", "callback_error", "guard_error"])
def test_frames_with_their_own_stack_chunk_are_released(path):
    big = big_frame  # noqa: F821 (made by exec above)
    replacement = big_frame_replacement  # noqa: F821
    expected = ("replacement", 1)

    def callback(code, L, func):
        if code is big.__code__:
            if path == "callback_error":
                raise KeyError("callback")
            return replacement.__code__

    if path in ("fast_path", "guard_error"):
        fail = path == "guard_error"
        fe.add_cache_entry(big.__code__, lambda L: 1 / 0 if fail else True, replacement.__code__)
    errors = (KeyError, ZeroDivisionError)
    with fe.callback_set(callback):
        for depth in range(2000):
            try:
                assert big(1) == expected
            except errors:
                assert path.endswith("error")
            assert countdown(depth % 30) == depth % 30  # the data stack is still sound


# ---------------------------------------------------------------- install, set, threads


def test_set_callback_returns_previous_and_installs_once():
    assert not fe.is_installed()
    first, second = (lambda c, L, f: None), (lambda c, L, f: None)
    assert fe.set_callback(first) is None
    assert fe.is_installed() and fe.active_threads() == 1
    assert fe.set_callback(second) is first
    assert fe.active_threads() == 1
    assert fe.set_callback(None) is second
    assert not fe.is_installed() and fe.active_threads() == 0


def test_set_callback_rejects_non_callables():
    with pytest.raises(TypeError):
        fe.set_callback(42)
    assert fe.get_callback() is None


def test_callback_set_restores_previous_on_error(recorder):
    with fe.callback_set(recorder):
        with pytest.raises(ZeroDivisionError), fe.callback_set(fe.RUN_ONLY):
            assert fe.get_callback() is fe.RUN_ONLY
            1 / 0  # noqa: B018
        assert fe.get_callback() is recorder
    assert fe.get_callback() is None


def test_callbacks_are_per_thread(recorder):
    seen_in_thread = []

    def worker():
        seen_in_thread.append(fe.get_callback())
        helper(1)

    with fe.callback_set(recorder):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen_in_thread == [None]
    assert helper.__code__ not in recorder.codes()


def test_eight_threads_toggling_callbacks(make_recorder):
    errors = []
    barrier = threading.Barrier(8)

    def worker(index):
        try:
            def mine(x):
                return x + index

            recorder = make_recorder()
            barrier.wait()
            for round_ in range(200):
                with fe.callback_set(recorder):
                    assert mine(round_) == round_ + index
                assert mine(0) == index
            calls = [code for code in recorder.codes() if code is mine.__code__]
            assert len(calls) == 200
            assert recorder.locals_of(mine) == [{"x": i, "index": index} for i in range(200)]
        except BaseException as error:  # reported in the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert fe.active_threads() == 0
    assert not fe.is_installed()


EXIT_SCRIPT = """
import sys, threading, time
import kiln.frameeval as fe

def f(a):
    return a

def g(a):
    return -a

def forever():
    fe.set_callback(lambda code, L, func: None)
    started.set()
    while True:
        f(1)
        time.sleep(0.001)

fe.add_cache_entry(f.__code__, lambda L: True, g.__code__)
started = threading.Event()
threading.Thread(target=forever, daemon=True).start()
started.wait()
fe.set_callback(lambda code, L, func: None)
assert f(2) == -2
print("exiting with callbacks set")
"""


def test_interpreter_exits_cleanly_with_callbacks_and_entries_set():
    out = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert (out.returncode, out.stdout.strip(), out.stderr) == (
        0,
        "exiting with callbacks set",
        "",
    )


def test_thread_exiting_with_a_callback_releases_it():
    class Callback:
        def __call__(self, code, L, func):
            return None

    holder = []

    def worker():
        callback = Callback()
        holder.append(weakref.ref(callback))
        fe.set_callback(callback)
        helper(1)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    gc.collect()
    assert holder[0]() is None
    assert fe.active_threads() == 0
    assert not fe.is_installed()


def test_callback_set_is_reusable_but_not_reentrant(recorder):
    scope = fe.callback_set(recorder)
    for _ in range(2):
        with scope:
            assert fe.get_callback() is recorder
            with pytest.raises(RuntimeError, match="not reentrant"), scope:
                pass
        assert fe.get_callback() is None
    with pytest.raises(RuntimeError, match="without __enter__"):
        scope.__exit__(None, None, None)
    with pytest.raises(TypeError):
        fe.callback_set(recorder, 1)


def test_hook_stays_installed_while_any_thread_has_a_callback(recorder):
    ready, done = threading.Event(), threading.Event()

    def hold():
        with fe.callback_set(recorder):
            ready.set()
            done.wait()

    t = threading.Thread(target=hold)
    t.start()
    ready.wait()
    try:
        assert fe.is_installed() and fe.active_threads() == 1
        with fe.callback_set(fe.RUN_ONLY):
            assert fe.active_threads() == 2
        assert fe.is_installed() and fe.active_threads() == 1
    finally:
        done.set()
        t.join()
    assert not fe.is_installed() and fe.active_threads() == 0


def test_keep_installed_avoids_reinstalling_per_call(recorder):
    assert fe.keep_installed(True) is False
    try:
        assert fe.is_installed() and fe.active_threads() == 0
        for _ in range(3):
            with fe.callback_set(recorder):
                assert add(1, 2) == 3
            assert fe.is_installed()
            assert add(1, 2) == 3  # no callback on this thread: not intercepted
        assert recorder.codes() == [add.__code__] * 3
    finally:
        assert fe.keep_installed(False) is True
    assert not fe.is_installed()


SUBINTERPRETER_SCRIPT = """
import kiln.frameeval as fe
for call in (lambda: fe.set_callback(None), fe.reset, fe.is_installed):
    try:
        call()
    except RuntimeError as error:
        assert "main interpreter" in str(error), error
    else:
        raise AssertionError("no RuntimeError")
"""


def test_refused_in_a_subinterpreter():
    pytest.importorskip("_testcapi", reason="CPython's test C API is not installed")
    # In a child process: running a subinterpreter leaves CPython's PyGILState bookkeeping
    # pointing at it, which later confuses C extensions in the same process (torch's
    # autograd engine refuses to run: "called while holding the GIL").
    script = (
        "import _testcapi, kiln.frameeval as fe\n"
        f"assert _testcapi.run_in_subinterp({SUBINTERPRETER_SCRIPT!r}) == 0\n"
        "assert fe.active_threads() == 0 and not fe.is_installed()\n"
        "print('ok')\n"
    )
    src = os.path.dirname(os.path.dirname(os.path.dirname(fe.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert (out.returncode, out.stdout.strip()) == (0, "ok"), out.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_forgets_callbacks_of_threads_it_does_not_have(recorder):
    ready, done = threading.Event(), threading.Event()

    def hold():
        with fe.callback_set(recorder):
            ready.set()
            done.wait()

    t = threading.Thread(target=hold)
    t.start()
    ready.wait()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
            pid = os.fork()
        if pid == 0:  # child: only this thread survives
            ok = fe.active_threads() == 0 and not fe.is_installed() and add(1, 2) == 3
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert fe.active_threads() == 1
    finally:
        done.set()
        t.join()


# ---------------------------------------------------------------- random operation sequences


def target(x):
    return ("original", x)


def target_r1(x):
    return ("r1", x)


def target_r2(x):
    return ("r2", x)


GUARDS = {
    "always": lambda L: True,
    "never": lambda L: False,
    "even": lambda L: L["x"] % 2 == 0,
    "raises": lambda L: 1 / 0,
}
MODES = [None, "run_only", "none", "skip", "r1", "raise"]


def mode_callback(mode):
    def callback(code, L, func):
        if code is not target.__code__:
            return None
        if mode == "skip":
            return fe.SKIP
        if mode == "r1":
            return target_r1.__code__
        if mode == "raise":
            raise KeyError("callback")
        return None

    return {None: None, "run_only": fe.RUN_ONLY}.get(mode, callback)


operations = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(sorted(GUARDS)), st.sampled_from(["r1", "r2"])),
    st.tuples(st.sampled_from(["clear", "reset", "mark_skip"])),
    st.tuples(st.just("mode"), st.sampled_from(MODES)),
    st.tuples(st.just("call"), st.integers(0, 9)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(operations, max_size=25))
def test_random_operation_sequences_match_a_model(ops):
    """A model of the documented semantics predicts every call's outcome."""
    fe.reset()
    entries, skipped, mode = [], False, None
    replacements = {"r1": target_r1, "r2": target_r2}
    try:
        for op in ops:
            if op[0] == "add":
                fe.add_cache_entry(target.__code__, GUARDS[op[1]], replacements[op[2]].__code__)
                entries.insert(0, op[1:])
            elif op[0] in ("clear", "reset"):
                fe.clear_cache(target.__code__) if op[0] == "clear" else fe.reset()
                entries, skipped = [], False
            elif op[0] == "mark_skip":
                fe.mark_skip(target.__code__)
                skipped = True
            elif op[0] == "mode":
                fe.set_callback(mode_callback(op[1]))
                mode = op[1]
            else:
                x = op[1]
                expected = ("original", x)
                if mode is not None and not skipped:
                    for guard, name in entries:
                        if guard == "raises":
                            expected = ZeroDivisionError
                            break
                        if guard == "always" or (guard == "even" and x % 2 == 0):
                            expected = (name, x)
                            break
                    else:
                        if mode == "r1":
                            expected = ("r1", x)
                        elif mode == "raise":
                            expected = KeyError
                        elif mode == "skip":
                            skipped = True
                try:
                    got = target(x)
                except (ZeroDivisionError, KeyError) as error:
                    got = type(error)
                assert got == expected, (op, entries, mode)
                assert fe.is_skipped(target.__code__) == skipped
    finally:
        fe.set_callback(None)
        fe.reset()


CHAIN_SCRIPT = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("chainhook", sys.argv[1])
chain = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chain)
import kiln.frameeval as fe

def f(x):
    return x

def r(x):
    return -x

seen = []
callback = lambda code, L, func: seen.append(code)
fe.set_callback(callback)      # kiln installed over the default evaluator
chain.install()                # a foreign hook over kiln's: it chains to kiln
assert f(1) == 1 and seen.count(f.__code__) == 1
fe.set_callback(None)          # kiln is not the current hook: it stays where it is
fe.set_callback(callback)      # kiln installed again, over the foreign hook: a cycle
assert fe.is_installed()
assert f(2) == 2               # no endless recursion between the two hooks
assert seen.count(f.__code__) == 2, seen.count(f.__code__)  # intercepted once, not twice
fe.add_cache_entry(f.__code__, lambda L: True, r.__code__)
assert f(3) == -3
assert chain.count() > 0
fe.set_callback(None)
chain.uninstall()
print("ok")
"""


def test_a_foreign_hook_chaining_back_to_kiln_does_not_loop(tmp_path):
    """Another PEP 523 user installs over kiln and chains to it, then kiln installs over it
    again: each hook's previous is the other; kiln must break the cycle."""
    source = Path(__file__).parent / "helpers" / "chainhook.c"
    library = tmp_path / ("chainhook" + sysconfig.get_config_var("EXT_SUFFIX"))
    include = sysconfig.get_paths()["include"]
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    build = [*cc, "-shared", "-fPIC", "-O1", f"-I{include}", str(source), "-o", str(library)]
    subprocess.run(build, check=True)
    run = [sys.executable, "-c", CHAIN_SCRIPT, str(library)]
    out = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip(), out.stderr) == (0, "ok", "")


# ---------------------------------------------------------------- frames the interpreter starts


def _collected_in_a_call(x):
    gc.collect()
    return x


def test_a_collection_in_another_thread_skips_only_that_threads_frames(make_recorder):
    # A finalizer that releases the GIL (here: waits for an event) lets other threads run
    # while the collection is still going on. Their frames are intercepted as usual; the
    # collecting thread's finalizer is not. (The interpreter's collecting flag is shared by
    # all threads: this thread's frames were skipped while another thread collected.)
    in_finalizer, finished = threading.Event(), threading.Event()
    collector_recorder, main_recorder = make_recorder(), make_recorder()

    class Blocking:
        def __del__(self):
            helper(0)
            in_finalizer.set()
            finished.wait(10)

    def collect():
        cycle = Blocking()
        cycle.self = cycle
        del cycle
        with fe.callback_set(collector_recorder):
            _collected_in_a_call(1)

    gc_was_enabled = gc.isenabled()
    gc.disable()  # only the collector thread's explicit collection runs
    thread = threading.Thread(target=collect)
    try:
        thread.start()
        assert in_finalizer.wait(10)
        with fe.callback_set(main_recorder):
            assert add(1, 2) == 3
    finally:
        finished.set()
        thread.join()
        if gc_was_enabled:
            gc.enable()
    assert add.__code__ in main_recorder.codes()
    assert _collected_in_a_call.__code__ in collector_recorder.codes()
    assert helper.__code__ not in collector_recorder.codes()
    assert Blocking.__del__.__code__ not in collector_recorder.codes()


def test_gc_phase_recorder_is_in_gc_callbacks():
    # put first at import; other libraries (hypothesis) may insert theirs before it later
    assert [cb for cb in gc.callbacks if getattr(cb, "__name__", "") == "kiln_frameeval_gc_phase"]


@pytest.mark.parametrize("install", [sys.settrace, sys.setprofile])
def test_trace_and_profile_functions_are_not_intercepted(recorder, install):
    def tracer(frame, event, arg):
        helper(1)  # a plain function called from inside the trace function
        return None

    install(tracer)
    try:
        with fe.callback_set(recorder):
            assert add(1, 2) == 3
    finally:
        install(None)
    seen = recorder.codes()
    assert add.__code__ in seen
    assert tracer.__code__ not in seen and helper.__code__ not in seen


def test_what_the_garbage_collector_runs_is_not_intercepted(recorder):
    ran = []

    def gc_callback(phase, info):
        ran.append(helper(phase == "start"))

    class Finalized:
        def __del__(self):
            ran.append(helper(0))

    def on_collect(ref):
        ran.append(helper(0))

    cycle = Finalized()
    cycle.self = cycle
    target = Finalized()
    target.self = target
    ref = weakref.ref(target, on_collect)
    del cycle, target
    gc.callbacks.append(gc_callback)
    try:
        with fe.callback_set(recorder):
            assert _collected_in_a_call(5) == 5
    finally:
        gc.callbacks.remove(gc_callback)
    assert ref() is None and len(ran) >= 5  # both phases, two finalizers, the weakref callback
    seen = recorder.codes()
    assert _collected_in_a_call.__code__ in seen
    for code in (gc_callback.__code__, Finalized.__del__.__code__, on_collect.__code__, helper.__code__):
        assert code not in seen, code.co_name
    # outside a collection the same functions are intercepted as usual
    with fe.callback_set(recorder):
        helper(1)
    assert helper.__code__ in recorder.codes()
