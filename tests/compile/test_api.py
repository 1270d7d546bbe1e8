"""The user API: forms of kiln.compile, backends, fullgraph errors, graph breaks and eager
fallback, explain."""

import copy
import logging

import pytest
import torch
from e2e_support import CountingBackend
from torch import nn

import kiln
import kiln.frameeval as fe


@kiln.disable
def eager_item(t):
    return t.item()  # .item() itself stays in the graph; a disabled call is a break


def uses_item(x):
    return x * eager_item(x.sum())


def simple(x, y=2):
    return x * y + 1


def test_decorator_forms():
    @kiln.compile(backend="eager")
    def f(x):
        return x.cos() + 1

    x = torch.randn(3)
    torch.testing.assert_close(f(x), x.cos() + 1)
    assert f.__name__ == "f"
    # the default backend is inductor: C++ kernels for CPU tensors
    @kiln.compile
    def g(x):
        return (x * 2).sin()

    torch.testing.assert_close(g(x), (x * 2).sin())


def test_module_form_shares_parameters_and_state():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    compiled = kiln.compile(model, backend="eager")
    assert isinstance(compiled, nn.Module)
    assert compiled.weight is model.weight
    assert list(compiled.parameters()) == list(model.parameters())
    x = torch.randn(4, 3)
    torch.testing.assert_close(compiled(x), model(x))
    with torch.no_grad():
        model.weight.add_(1.0)  # same tensor object: no recompile, new values used
    torch.testing.assert_close(compiled(x), model(x))


def test_backends():
    with pytest.raises(kiln.BackendUnavailable, match="unknown backend 'nope'"):
        kiln.compile(simple, backend="nope")
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, [tuple(t.shape) for t in example_inputs]))
        return gm

    compiled = kiln.compile(simple, backend=backend)
    torch.testing.assert_close(compiled(torch.ones(2)), simple(torch.ones(2)))
    (gm, shapes), = seen
    assert shapes == [(2,)]
    assert "mul = x * 2" in gm.code
    kiln.reset()
    torch.testing.assert_close(kiln.compile(simple, backend="inductor")(torch.ones(2)), simple(torch.ones(2)))


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match=r"function or nn\.Module"):
        kiln.compile(42)
    with pytest.raises(ValueError, match="unknown mode"):
        kiln.compile(simple, mode="fastest")
    with pytest.raises(TypeError, match="dynamic must be None, True or False"):
        kiln.compile(simple, dynamic="yes")
    assert kiln.compile(simple, disable=True) is simple


def test_fullgraph_error_names_the_reason_and_user_line():
    compiled = kiln.compile(uses_item, backend="eager", fullgraph=True)
    with pytest.raises(kiln.Unsupported) as info:
        compiled(torch.ones(2))
    err = info.value
    assert "eager_item is marked kiln.disable" in err.reason
    assert err.location.function == "uses_item"
    assert err.location.text == "return x * eager_item(x.sum())"
    assert "test_api.py" in str(err)


def uses_item_in_a_loop(x):
    for _ in range(1):
        x = x * eager_item(x.sum())
    return x


def test_without_fullgraph_an_item_call_is_a_graph_break_logged_once(caplog):
    backend = CountingBackend()
    compiled = kiln.compile(uses_item, backend=backend)
    with caplog.at_level(logging.INFO, logger="kiln.graph_breaks"):
        torch.testing.assert_close(compiled(torch.ones(2)), uses_item(torch.ones(2)))
        torch.testing.assert_close(compiled(torch.ones(2)), uses_item(torch.ones(2)))
    records = [r for r in caplog.records if r.name == "kiln.graph_breaks"]
    assert len(records) == 1 and "eager_item" in records[0].getMessage()
    # before the break: x.sum(); after it, in the resume function: x * <the float>
    assert len(backend.graphs) == 2
    assert "x.sum()" in backend.graphs[0].code and "* 2.0" in backend.graphs[1].code
    assert not fe.is_skipped(uses_item.__code__)


def test_without_fullgraph_a_failure_where_no_break_is_possible_falls_back_to_eager(caplog):
    backend = CountingBackend()
    compiled = kiln.compile(uses_item_in_a_loop, backend=backend)
    with caplog.at_level(logging.INFO, logger="kiln.graph_breaks"):
        for _ in range(3):
            torch.testing.assert_close(compiled(torch.ones(2)), uses_item_in_a_loop(torch.ones(2)))
    records = [r for r in caplog.records if r.name == "kiln.graph_breaks"]
    assert len(records) == 1 and "runs eagerly" in records[0].getMessage()
    assert "eager_item" in records[0].getMessage()
    assert backend.graphs == []
    assert fe.is_skipped(uses_item_in_a_loop.__code__)


def test_inner_function_compiles_when_outer_cannot():
    def inner(x):
        return x.sin() * 2

    def outer(x):
        y = inner(x)
        value = 0.0
        for _ in range(2):  # a break inside a loop is not possible: outer runs eagerly
            value += y.sum().item()
        return inner(y) + value

    backend = CountingBackend()
    compiled = kiln.compile(outer, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), outer(x))
    assert len(backend.graphs) == 1  # inner, captured once, then a cache hit for the second call


def test_disable():
    calls = []

    @kiln.disable
    def helper(x):
        calls.append(x)
        return x + 1

    def f(x):
        return helper(x) * 2

    with pytest.raises(kiln.Unsupported, match=r"marked kiln\.disable"):
        kiln.compile(f, backend="eager", fullgraph=True)(torch.ones(2))
    kiln.reset()
    torch.testing.assert_close(kiln.compile(f, backend="eager")(torch.ones(2)), f(torch.ones(2)))
    assert len(calls) == 2  # the compiled call ran helper eagerly, like the plain call
    # fullgraph after a non-fullgraph compile broke the same code's graph: still an error
    with pytest.raises(kiln.Unsupported, match=r"marked kiln\.disable"):
        kiln.compile(f, backend="eager", fullgraph=True)(torch.ones(2))


def test_explain():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    out = kiln.explain(model)(torch.randn(3, 4))
    assert out.graph_count == 1 and out.graph_break_count == 0
    assert out.op_count == 3
    assert [op.split(".")[-1] for op in out.ops_per_graph[0]] == ["linear", "relu", "linear"]
    assert len(out.guards) > 5
    broken = kiln.explain(uses_item)(torch.ones(2))
    assert (broken.graph_count, broken.graph_break_count) == (2, 1)
    assert "eager_item" in broken.break_reasons[0].reason
    assert broken.break_reasons[0].location.lineno == uses_item.__code__.co_firstlineno + 1
    eager = kiln.explain(uses_item_in_a_loop)(torch.ones(2))
    assert (eager.graph_count, eager.graph_break_count) == (0, 1)
    assert "eager_item" in eager.break_reasons[0].reason


def test_reset_forgets_everything():
    backend = CountingBackend()
    compiled = kiln.compile(simple, backend=backend)
    compiled(torch.ones(2))
    assert fe.get_cache_entries(simple.__code__)
    kiln.reset()
    assert not fe.get_cache_entries(simple.__code__)
    compiled(torch.ones(2))
    assert len(backend.graphs) == 2


def test_logs_show_graph_guards_and_replacement(caplog):
    kiln.set_logs("graph_code", "guards", "bytecode")
    try:
        with caplog.at_level(logging.INFO, logger="kiln"):
            kiln.compile(simple, backend="eager")(torch.ones(2))
    finally:
        kiln.set_logs()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "mul = x * 2" in text                       # graph_code
    assert "tensor L['x']" in text                     # guards
    assert "__kiln_out = __kiln_graph(x)" in text      # bytecode: the replacement's source
    assert "RETURN_VALUE" in text                       # ... and its disassembly


def test_is_compiling_is_true_inside_the_trace_and_false_outside():
    # Library code asks torch.compiler.is_compiling() to pick its compile-friendly branch;
    # under kiln the captured code is what runs compiled, so it sees True (as under
    # torch.compile) and the eager call sees False.
    import library_code as lib

    def fn(x):
        return lib.compile_friendly(x)

    counting = CountingBackend()
    x = torch.arange(3.0)
    compiled = kiln.compile(fn, backend=counting, fullgraph=True)
    torch.testing.assert_close(compiled(x), x + 1)
    torch.testing.assert_close(fn(x), x - 1)
    assert len(counting.graphs) == 1


def test_explain_binds_the_arguments_of_a_wrapper_not_the_wrapped_function():
    import functools

    def inner(x, scale):
        return x * scale

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        return inner(*args, **kwargs) + 1

    report = kiln.explain(wrapper)(torch.ones(2), scale=3)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


class _MappedConfig:
    """Reads go through a Python __getattribute__ (like transformers' configs)."""

    attribute_map = {"layers": "n_layer"}

    def __init__(self):
        self.n_layer = [1, 2, 3]
        self.scale = 2.0

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


def test_a_getattribute_hook_compiled_as_its_own_frame_does_not_call_itself():
    # The outer function falls back to eager (.item()), so kiln compiles the frames it
    # calls: the config's __getattribute__ among them. Its replacement must read the
    # attribute the way object.__getattribute__ does, not through the hook it replaces.
    cfg = _MappedConfig()

    def fn(x):
        total = x.sum().item()
        return [v * total for v in cfg.layers], cfg.scale * x

    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting)
    x = torch.ones(2)
    for _ in range(3):
        out = compiled(x)
        assert out[0] == [2.0, 4.0, 6.0]
        torch.testing.assert_close(out[1], 2 * x)
    cfg.n_layer = [5]
    assert compiled(x)[0] == [10.0]


_log = logging.getLogger("kiln.tests.traced_code")


def test_log_calls_in_traced_code_are_replayed_on_every_call(caplog):
    def fn(x):
        _log.warning("scaling %s by %d", "x", 2)
        return x * 2

    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting, fullgraph=True)
    with caplog.at_level(logging.WARNING, logger="kiln.tests.traced_code"):
        for _ in range(2):
            torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 2.0))
    messages = [r.getMessage() for r in caplog.records if r.name == "kiln.tests.traced_code"]
    assert messages == ["scaling x by 2"] * 2
    assert len(counting.graphs) == 1


def test_print_and_warn_in_traced_code_are_replayed_after_the_graph(capsys):
    import warnings

    def fn(x):
        y = x * 2
        print("step", 3, y.shape, y)
        warnings.warn("scaled by 2", stacklevel=1)
        return y + 1

    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting, fullgraph=True)
    x = torch.arange(2.0)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.testing.assert_close(compiled(x), x * 2 + 1)
        assert [str(w.message) for w in caught] == ["scaled by 2"]
        assert capsys.readouterr().out == f"step 3 torch.Size([2]) {x * 2}\n"
    assert len(counting.graphs) == 1


def test_print_of_a_tensor_changed_later_is_not_replayed_with_the_new_values(capsys):
    def fn(x):
        y = x * 2
        print(y)
        y.add_(1)
        return y

    x = torch.arange(2.0)
    with pytest.raises(kiln.Unsupported, match=r"changed in place later .*add_"):
        kiln.compile(fn, backend="eager", fullgraph=True)(x)
    capsys.readouterr()
    torch.testing.assert_close(kiln.compile(fn, backend="eager")(x), x * 2 + 1)  # falls back
    assert capsys.readouterr().out == f"{x * 2}\n"


def test_frozen_stdlib_frames_are_never_compiled():
    import importlib._bootstrap_external as bootstrap

    from kiln._policy import never_root

    assert bootstrap.FileLoader.__init__.__code__.co_filename.startswith("<frozen ")
    assert never_root(bootstrap.FileLoader.__init__.__code__, bootstrap.__dict__)


def test_code_inside_kiln_is_a_root_only_when_its_module_says_it_is_user_code():
    import kiln._api as api
    import kiln.demo._model as model
    from kiln._policy import never_root

    assert not never_root(model.GPT.forward.__code__, model.__dict__)  # __kiln_user_code__ = True
    assert never_root(model.GPT.forward.__code__, {})  # where it lives does not make it user code
    assert never_root(api.compile.__code__, api.__dict__)


def test_library_code_and_code_made_in_a_librarys_namespace_are_never_roots():
    # reached when a compiled call imports or calls into them (a torch API importing sympy,
    # dataclasses of torch's building their __init__ with exec); a user's dataclass is a root
    import dataclasses

    import numpy.testing
    import sympy
    import torch.fx.passes.shape_prop as shape_prop

    from kiln._policy import never_root

    @dataclasses.dataclass
    class Mine:
        a: int = 1

    meta = shape_prop.TensorMetadata.__new__  # a namedtuple's generated __new__
    assert never_root(numpy.testing.assert_equal.__code__, numpy.testing.assert_equal.__globals__)
    assert never_root(sympy.Symbol.__new__.__code__, sympy.Symbol.__new__.__globals__)
    assert Mine.__init__.__code__.co_filename.startswith("<")
    assert not never_root(Mine.__init__.__code__, Mine.__init__.__globals__)
    assert never_root(Mine.__init__.__code__, {"__name__": "torch._inductor.ir"})
    assert never_root(Mine.__init__.__code__, {"__name__": "sympy.core.basic"})
    assert never_root(meta.__code__, meta.__globals__)


class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def test_frames_the_graph_calls_at_run_time_are_not_compiled():
    # The graph calls the autograd.Function's apply; its Python forward runs inside the
    # graph, as it is (torch.compile likewise disables itself around its graphs).
    def fn(x):
        return _Twice.apply(x).sin()

    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    x = torch.randn(3, requires_grad=True)
    for _ in range(2):
        out = compiled(x)
        torch.testing.assert_close(out, fn(x))
    assert len(backend.graphs) == 1
    assert not fe.get_cache_entries(_Twice.forward.__code__)
    out.sum().backward()
    torch.testing.assert_close(x.grad, 2 * torch.cos(2 * x))


def test_only_graphs_that_can_start_user_frames_turn_the_callback_off():
    # The plain graph's replacement calls the compiled graph directly (no wrapper frame on
    # every call); a graph calling an autograd.Function's apply goes through the wrapper.
    def plain(x):
        return torch.relu(x * 2).sum(-1)

    def custom(x):
        return _Twice.apply(x).sin()

    def called(fn):
        compiled = kiln.compile(fn, backend="eager")
        compiled(torch.randn(3))
        (entry,) = fe.get_cache_entries(fn.__code__)
        return [c.__name__ for c in entry.code.co_consts if callable(c) and hasattr(c, "__name__")]

    assert called(plain) == ["forward"]
    assert called(custom) == ["run_graph"]


# -- the compiled module forwards its state to the original (as torch's OptimizedModule) -------

class _Stepper(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.step = 1
        self.register_buffer("offset", torch.zeros(3))

    def forward(self, x):
        y = self.lin(x) * self.step + self.offset
        if self.training:
            y = y * 2
        if hasattr(self, "extra"):
            y = y + self.extra(x)
        return y


def _same_as_original(compiled, model, x):
    torch.testing.assert_close(compiled(x), model(x))


def test_setattr_on_the_compiled_module_reaches_the_original():
    model = _Stepper()
    compiled = kiln.compile(model, backend="eager")
    x = torch.randn(2, 3)
    _same_as_original(compiled, model, x)
    compiled.step += 1  # a plain attribute
    assert model.step == 2 and "step" not in compiled.__dict__
    _same_as_original(compiled, model, x)
    compiled.step = 5
    assert model.step == 5
    _same_as_original(compiled, model, x)
    compiled.offset = torch.ones(3)  # a buffer stays a buffer of the original
    assert model._buffers["offset"] is compiled.offset
    _same_as_original(compiled, model, x)
    compiled.lin.weight = nn.Parameter(torch.ones(3, 3))
    compiled.bias = nn.Parameter(torch.ones(3))  # a new parameter
    assert "bias" in model._parameters and "bias" not in compiled._parameters
    _same_as_original(compiled, model, x)
    compiled.extra = nn.Linear(3, 3)  # a new submodule
    assert "extra" in model._modules and list(compiled._modules) == ["_orig_mod"]
    _same_as_original(compiled, model, x)


def test_delattr_on_the_compiled_module_reaches_the_original():
    model = _Stepper()
    model.extra = nn.Linear(3, 3)
    compiled = kiln.compile(model, backend="eager")
    x = torch.randn(2, 3)
    _same_as_original(compiled, model, x)
    del compiled.extra
    assert not hasattr(model, "extra") and not hasattr(compiled, "extra")
    _same_as_original(compiled, model, x)
    del compiled.step
    assert not hasattr(model, "step")
    with pytest.raises(AttributeError):
        compiled(x)
    with pytest.raises(AttributeError):
        del compiled.nothing_here


def test_training_mode_is_the_originals():
    model = _Stepper()
    compiled = kiln.compile(model, backend="eager")
    x = torch.randn(2, 3)
    assert compiled.training and model.training
    compiled.eval()
    assert not model.training and not compiled.training and not model.lin.training
    _same_as_original(compiled, model, x)
    compiled.train()
    assert model.training and compiled.training
    _same_as_original(compiled, model, x)
    compiled.training = False
    assert not model.training
    _same_as_original(compiled, model, x)
    model.train()  # and the other way round
    assert compiled.training
    _same_as_original(compiled, model, x)
    # compiling a module in eval mode keeps it there
    assert not kiln.compile(_Stepper().eval(), backend="eager").training


def test_state_dict_and_copies_as_torch_compile():
    model = _Stepper()
    compiled = kiln.compile(model, backend="eager")
    theirs = torch.compile(model, backend="eager")
    assert list(compiled.state_dict()) == list(theirs.state_dict())
    assert list(compiled.state_dict()) == ["_orig_mod.offset", "_orig_mod.lin.weight", "_orig_mod.lin.bias"]
    other = _Stepper()
    kiln.compile(other, backend="eager").load_state_dict(compiled.state_dict())
    torch.testing.assert_close(other.lin.weight, model.lin.weight)
    assert "step" in dir(compiled) and "forward" in dir(compiled)
    copied = copy.deepcopy(compiled)  # wraps a copy of the original, not the original
    assert isinstance(copied, kiln.CompiledModule) and copied._orig_mod is not model
    with torch.no_grad():
        copied.lin.weight.add_(1.0)
    x = torch.randn(2, 3)
    torch.testing.assert_close(copied(x), copied._orig_mod(x))
    _same_as_original(compiled, model, x)
