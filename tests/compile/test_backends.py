"""Backends: a backend and whatever it returns run with capture off (only kiln's own graph code
is called directly), and a backend's exception reaches the user as BackendCompilerFailed."""

import operator
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import kiln
import kiln.frameeval as fe
from kiln._backends import backend_rules, compile_graph
from kiln.fxgraph import Graph, GraphModule
from kiln.fxgraph.torch_fx import to_torch_fx
from kiln.symexec._capture_result import may_start_user_frames


def _codes_compiled():
    """Every code object kiln captured so far (cache entries or given up on)."""
    return kiln.session().stats.code_guards.keys() | kiln.session().stats.eager_codes.keys()


@pytest.mark.slow  # inductor's compile: seconds warm, tens of seconds cold on 2 cores
def test_torch_inductor_compile_fx_as_a_callable_backend():
    # The reproduction: inductor's compile_fx behind to_torch_fx, called under
    # no_grad. Kiln's hook used to capture torch's AOT runtime wrapper and inductor's
    # generated `call` and run its kernels on fake tensors: the interpreter died. In a
    # subprocess, so that a crash is a failure of this test and not of the test run.
    script = textwrap.dedent("""
        import torch, kiln
        from torch import nn
        from kiln.fxgraph.torch_fx import to_torch_fx
        from torch._inductor.compile_fx import compile_fx

        seen = []
        def backend(gm, example_inputs):
            seen.append(gm)
            return compile_fx(to_torch_fx(gm), example_inputs)

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 256), nn.GELU())
        compiled = kiln.compile(model, backend=backend)
        x = torch.randn(8, 64)
        with torch.no_grad():
            for _ in range(3):
                torch.testing.assert_close(compiled(x), model(x))
        assert len(seen) == 1, len(seen)
        names = sorted(c.co_name for c in kiln.session().stats.code_guards)
        assert names == ["_call_impl"] or names == ["forward"], names
        print("OK")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-4000:])
    assert done.stdout.strip().endswith("OK")


def _aot_eager(gm, example_inputs):
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend("aot_eager")(to_torch_fx(gm), example_inputs)


@pytest.mark.parametrize("grad", [False, True])
def test_torch_aot_eager_as_a_callable_backend(grad):
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return _aot_eager(gm, example_inputs)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    compiled = kiln.compile(model, backend=backend)
    x = torch.randn(5, 16)
    with torch.set_grad_enabled(grad):
        for _ in range(3):
            out = compiled(x)
            torch.testing.assert_close(out, model(x))
    assert len(seen) == 1
    # only the module's own frame was captured: nothing of torch's AOT machinery
    assert {c.co_name for c in _codes_compiled()} <= {"forward", "_call_impl"}
    assert len(_codes_compiled()) == 1
    if grad:
        out.sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model(x).sum().backward()
        for got, want in zip(grads, [p.grad for p in model.parameters()], strict=True):
            torch.testing.assert_close(got, want)


def _scale(t):
    return t * 1.0


def _shift(t):
    return t + 0.0


def _check_inputs(example_inputs):
    return [_scale(t).shape for t in example_inputs]


def test_a_user_backend_closure_calling_helpers_is_never_captured():
    # The backend's own Python (at compile time) and the closure it returns with the helpers
    # that closure calls (at run time) run as they are: no captures, no cache entries.
    calls = []

    def backend(gm, example_inputs):
        calls.append(_check_inputs(example_inputs))

        def run(*args):
            return [_shift(r) for r in gm.forward(*[_scale(a) for a in args])]

        return run

    def fn(x, y):
        return torch.relu(x) * y, x - y

    compiled = kiln.compile(fn, backend=backend)
    x, y = torch.randn(4), torch.randn(4)
    for _ in range(3):
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    assert calls == [[torch.Size([4]), torch.Size([4])]]
    assert _codes_compiled() == {fn.__code__}
    for helper in (_scale, _shift, _check_inputs):
        assert not fe.get_cache_entries(helper.__code__)


def _replacement_callees(fn):
    (entry,) = fe.get_cache_entries(fn.__code__)
    return [c for c in entry.code.co_consts if callable(c) and not isinstance(c, type)]


def test_only_kiln_generated_graph_code_is_called_directly():
    def plain(x):
        return torch.relu(x * 2).sum(-1)

    def direct(backend):
        # whether the replacement calls what the backend returned, or a wrapper around it
        # that turns the callback off (a frame of kiln's own _backends module)
        kiln.reset()
        compiled = kiln.compile(plain, backend=backend)
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), plain(x))
        (callee,) = _replacement_callees(plain)
        target = type(callee).__call__ if isinstance(callee, GraphModule) else callee
        return target.__code__.co_filename != kiln._backends.__file__

    assert direct("eager")
    assert direct(lambda gm, example_inputs: gm.forward)  # the same generated code
    assert direct(lambda gm, example_inputs: gm)  # calling gm runs that code too
    # anything else the backend returns may run Python of its own: the callback is off
    assert not direct(lambda gm, example_inputs: lambda *a: gm.forward(*a))
    assert not direct(lambda gm, example_inputs: _aot_eager(gm, example_inputs))


def _graph_of(build):
    g = Graph()
    x = g.placeholder("x")
    g.output(build(g, x))
    return GraphModule({"sub": nn.ReLU()}, g)


def _user_function(t):
    return t + 1


@pytest.mark.parametrize("build, direct", [
    (lambda g, x: g.call_function(torch.relu, (x,)), True),
    (lambda g, x: g.call_method("sin", (x,)), True),
    (lambda g, x: g.call_function(operator.add, (x, 1)), True),
    (lambda g, x: g.call_module("sub", (x,)), False),  # a module's forward is Python
    (lambda g, x: g.call_function(_user_function, (x,)), False),
    (lambda g, x: g.call_function(torch.autograd.Function.apply, (x,)), False),
    (lambda g, x: g.call_function(torch.func.vmap, (_user_function,)), False),  # a callable argument
], ids=["torch", "method", "operator", "module", "user function", "apply", "callable argument"])
def test_the_graph_code_is_called_directly_only_when_it_starts_no_user_frame(build, direct):
    gm = _graph_of(build)
    compiled = compile_graph(backend_rules["eager"], gm, [torch.randn(2)],
                             may_start_user_frames=may_start_user_frames(gm.graph))  # symexec's answer
    assert (compiled is gm.forward) is direct


def test_without_symexecs_answer_or_after_a_backend_rewrote_the_graph_its_code_runs_with_capture_off():
    gm = _graph_of(lambda g, x: g.call_function(torch.relu, (x,)))
    eager = backend_rules["eager"]
    assert compile_graph(eager, gm, [torch.randn(2)], may_start_user_frames=False) is gm.forward
    assert compile_graph(eager, gm, [torch.randn(2)]) is not gm.forward  # default: may start some

    def rewriting(gm, example_inputs):
        # adds a call of a user function: the graph symexec described is gone
        (out,) = gm.graph.find_nodes("output")
        with gm.graph.inserting_before(out):
            out.args = (gm.graph.call_function(_user_function, (out.args[0],)),)
        gm.recompile()
        return gm.forward

    compiled = compile_graph(rewriting, gm, [torch.randn(2)], may_start_user_frames=False)
    assert compiled is not gm.forward
    x = torch.randn(2)
    torch.testing.assert_close(compiled(x), torch.relu(x) + 1)


def test_the_direct_call_starts_no_python_frame_but_torch_and_the_graph():
    # What the fast path skips (the callback switched off around the graph) is safe only if
    # the generated code starts no frame of user code: record every Python frame a cache hit
    # of the graph starts (operator, math, torch.nn.functional, Tensor methods, torch
    # functions written in Python).
    import math
    import operator

    import torch.nn.functional as F

    def fn(x, w):
        h = F.layer_norm(x, (x.shape[-1],)) @ w
        h = F.gelu(h) + operator.mul(h, math.pi)
        return torch.softmax(h, -1).transpose(0, 1).contiguous(), F.dropout(h, 0.0, False)

    compiled = kiln.compile(fn, backend="eager")
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    compiled(x, w)
    (graph,) = _replacement_callees(fn)
    assert graph.__code__.co_filename.startswith("<kiln.fxgraph ")
    started = []

    def profile(frame, event, arg):
        if event == "call":
            started.append(frame.f_code)

    sys.setprofile(profile)
    try:
        got = graph(x, w)
    finally:
        sys.setprofile(None)
    torch.testing.assert_close(got, fn(x, w))
    torch_dir = torch.__file__.rsplit("/", 1)[0] + "/"
    user = [c for c in started if c is not graph.__code__ and not c.co_filename.startswith(torch_dir)]
    assert user == []


def test_the_backend_itself_runs_with_capture_off():
    # A backend whose own code calls an nn.Module (a `forward`, which kiln would otherwise
    # take as a root) and user helpers: none of it is captured, the backend is called once.
    helper = nn.Linear(3, 3)
    calls = []

    def backend(gm, example_inputs):
        calls.append(1)
        helper(torch.randn(2, 3))
        _check_inputs(example_inputs)
        return gm.forward

    def fn(x):
        return x.sin() + 1

    compiled = kiln.compile(fn, backend=backend)
    x = torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), fn(x))
    assert calls == [1]
    assert _codes_compiled() == {fn.__code__}
    assert not fe.get_cache_entries(type(helper).forward.__code__)
    assert not fe.get_cache_entries(_check_inputs.__code__)


# -- errors ------------------------------------------------------------------------------------

class _BackendBug(Exception):
    pass


def _failing_backend(gm, example_inputs):
    raise _BackendBug("no kernel for this")


def test_suppress_errors_defaults_to_false_as_in_torch():
    assert kiln.config.suppress_errors is False
    assert torch._dynamo.config.suppress_errors is False


@pytest.mark.parametrize("fullgraph", [False, True])
def test_an_exception_in_a_callable_backend_reaches_the_user(fullgraph):
    def fn(x):
        return x * 2

    compiled = kiln.compile(fn, backend=_failing_backend, fullgraph=fullgraph)
    with pytest.raises(kiln.BackendCompilerFailed, match=r"(?s)_failing_backend.*no kernel for this") as info:
        compiled(torch.randn(3))
    assert isinstance(info.value.__cause__, _BackendBug)
    assert info.value.inner_exception is info.value.__cause__
    assert info.value.backend_name == "_failing_backend"
    # nothing was given up on: the next call tries again and raises again
    assert not kiln.session().stats.eager_codes
    with pytest.raises(kiln.BackendCompilerFailed):
        compiled(torch.randn(3))


def test_a_backend_returning_no_callable_is_a_backend_error():
    compiled = kiln.compile(lambda x: x + 1, backend=lambda gm, example_inputs: None)
    with pytest.raises(kiln.BackendCompilerFailed, match="must return a callable"):
        compiled(torch.randn(2))


def test_with_suppress_errors_a_backend_failure_runs_eagerly_with_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(kiln.config, "suppress_errors", True)

    def fn(x):
        return x * 2

    compiled = kiln.compile(fn, backend=_failing_backend)
    x = torch.randn(3)
    with caplog.at_level("WARNING", logger="kiln"):
        torch.testing.assert_close(compiled(x), fn(x))
        torch.testing.assert_close(compiled(x), fn(x))
    warned = [r for r in caplog.records if "running it eagerly" in r.getMessage()]
    assert len(warned) == 1 and "BackendCompilerFailed" in warned[0].getMessage()
    assert fn.__code__ in kiln.session().stats.eager_codes


class _UserError(Exception):
    pass


def test_what_the_compiled_callable_raises_at_run_time_passes_unchanged():
    error = _UserError("raised by the compiled code")

    def backend(gm, example_inputs):
        def run(*args):
            raise error

        return run

    compiled = kiln.compile(lambda x: x + 1, backend=backend)
    with pytest.raises(_UserError) as info:
        compiled(torch.randn(2))
    assert info.value is error


class _CountingAotEager:
    """torch's aot_eager behind to_torch_fx (it compiles for the example inputs' sizes and
    numbers), counting its calls."""

    def __init__(self, handles_dynamic_inputs=None):
        self.calls = []
        if handles_dynamic_inputs is not None:
            self.handles_dynamic_inputs = handles_dynamic_inputs

    def __call__(self, gm, example_inputs):
        self.calls.append([tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in example_inputs])
        return _aot_eager(gm, example_inputs)


def _scaled(x, s):
    return x * s


def test_a_number_input_is_not_baked_into_a_torch_backends_code():
    """The float becomes a graph input after it changed (automatic dynamic); aot_eager
    compiled the graph with the example 2.5 as a constant, and kiln ran that code for 3.5
    (it returned x * 2.5: a wrong answer). Now the backend is called again for each value."""
    backend = _CountingAotEager()
    compiled = kiln.compile(_scaled, backend=backend)
    x = torch.ones(2)
    for s in (1.5, 2.5, 3.5, 2.5, 4.5):
        torch.testing.assert_close(compiled(x, s), _scaled(x, s))
    assert backend.calls == [[(2,)], [(2,), 2.5], [(2,), 3.5], [(2,), 4.5]]


def _rows(x):
    return x.reshape(x.shape[0] * 2, -1).sum(0) + torch.ones(x.shape[0]).sum()


def test_a_symbolic_graph_given_to_a_torch_backend_is_compiled_per_size():
    backend = _CountingAotEager()
    compiled = kiln.compile(_rows, backend=backend, dynamic=True)
    for n in (2, 4, 3, 4):
        x = torch.randn(n, 6)
        torch.testing.assert_close(compiled(x), _rows(x))  # errors for 4 and 3 before
    assert backend.calls == [[(2, 6)], [(4, 6)], [(3, 6)]]


def test_past_the_recompile_limit_the_graphs_own_code_runs(monkeypatch):
    monkeypatch.setattr(kiln.config, "recompile_limit", 2)
    backend = _CountingAotEager()
    compiled = kiln.compile(_rows, backend=backend, dynamic=True)
    for n in (2, 4, 3, 5, 3):
        x = torch.randn(n, 6)
        torch.testing.assert_close(compiled(x), _rows(x))
    assert backend.calls == [[(2, 6)], [(4, 6)]]


def test_a_backend_that_handles_dynamic_inputs_is_called_once():
    def backend(gm, example_inputs):
        backend.calls += 1
        return lambda *args: gm.forward(*args)  # serves every size, and says so

    backend.calls = 0
    backend.handles_dynamic_inputs = True
    compiled = kiln.compile(_rows, backend=backend, dynamic=True)
    for n in (2, 4, 3):
        x = torch.randn(n, 6)
        torch.testing.assert_close(compiled(x), _rows(x))
    assert backend.calls == 1
