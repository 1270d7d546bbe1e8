"""Input mutation and aliasing through kiln.aotgrad: the graphs are functional, the runtime
writes the inputs the program wrote and gives back views where eager gives views."""

from __future__ import annotations

import pytest
import torch

import kiln
from kiln.aotgrad import aot_compile


class _Aot:
    """Compile with kiln.aotgrad, refusing (not falling back) where it cannot."""

    handles_dynamic_inputs = True

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return aot_compile(gm, example_inputs, kiln.compile_context())


def _run(fn, *make_args, dynamic=None, grad=False):
    """``fn`` compiled and eager on equal fresh copies of the arguments: equal results,
    equal arguments afterwards, the same aliasing between results and arguments."""
    kiln.reset()
    backend = _Aot()
    compiled = kiln.compile(fn, backend=backend, dynamic=dynamic)
    for make in make_args:
        torch.manual_seed(0)
        args = make()
        torch.manual_seed(0)
        ref_args = make()
        with torch.set_grad_enabled(grad):
            got = compiled(*args)
            expected = fn(*ref_args)
        got_t = got if isinstance(got, tuple) else (got,)
        exp_t = expected if isinstance(expected, tuple) else (expected,)
        for g, e in zip(got_t, exp_t, strict=True):
            torch.testing.assert_close(g, e)
        for a, r in zip(args, ref_args, strict=True):
            torch.testing.assert_close(a, r)
        assert _aliasing(got_t, args) == _aliasing(exp_t, ref_args)
        assert _aliasing(got_t, got_t) == _aliasing(exp_t, exp_t)
    return backend


def _aliasing(outs, ins):
    ptr = lambda t: t.untyped_storage().data_ptr() if isinstance(t, torch.Tensor) else None  # noqa: E731
    return [[ptr(o) is not None and ptr(o) == ptr(i) for i in ins] for o in outs]


def _x(*shape):
    return lambda: (torch.randn(*shape),)


def test_add_in_place_on_an_input():
    def f(x):
        x.add_(1)
        return x * 2
    _run(f, _x(3, 4))


def test_in_place_through_a_view_of_an_input():
    def f(x):
        x[0].mul_(2)
        return x.sum(0)
    _run(f, _x(3, 4))


def test_in_place_through_a_transposed_slice_of_an_input():
    def f(x):
        x.t()[1:3].add_(10)
        return x + 0
    _run(f, _x(4, 5))


def test_copy_into_an_input():
    def f(x, y):
        x.copy_(y * 3)
        return y + 1
    _run(f, lambda: (torch.zeros(2, 3), torch.randn(2, 3)))


def test_index_put_into_an_input():
    def f(x, i):
        x[i] = 0.0
        return x.sum()
    _run(f, lambda: (torch.randn(5, 2), torch.tensor([0, 3])))


def test_fill_and_zero_of_inputs():
    def f(x, y):
        x.fill_(2.0)
        y.zero_()
        return x + y
    _run(f, lambda: (torch.randn(3), torch.randn(3)))


def test_out_variant_writes_an_input():
    def f(a, b, c):
        torch.add(a, b, out=c)
        return c * 2
    _run(f, lambda: (torch.randn(3), torch.randn(3), torch.empty(3)))


def test_in_place_on_an_intermediate():
    def f(x):
        y = x * 2
        y.relu_()
        return y + 1
    _run(f, _x(4, 4))


def test_in_place_on_a_view_of_an_intermediate():
    def f(x):
        y = x.clone()
        y[:, 0].zero_()
        y[1:].mul_(3)
        return y
    _run(f, _x(3, 4))


def test_several_writes_in_sequence_read_back_in_between():
    def f(x):
        x.add_(1)
        a = x.sum()
        x[0].sub_(5)
        b = x.sum()
        x.mul_(2)
        return a, b
    _run(f, _x(2, 3))


def test_returning_an_input_unchanged():
    def f(x, y):
        return x, y + 1
    _run(f, lambda: (torch.randn(3), torch.randn(3)))


def test_returning_a_view_of_an_input():
    def f(x):
        return x.view(-1), x[1], x.t()
    backend = _run(f, _x(3, 4))
    assert len(backend.graphs) == 1


def test_a_returned_view_shares_writes_with_its_input():
    def f(x):
        return x[1:]
    kiln.reset()
    compiled = kiln.compile(f, backend=_Aot())
    x = torch.zeros(4)
    out = compiled(x)
    out.fill_(7.0)
    assert x.tolist() == [0.0, 7.0, 7.0, 7.0]


def test_returning_a_view_of_an_input_that_was_written():
    def f(x):
        x.add_(1)
        return x[1:], x.t()
    _run(f, _x(3, 3))


def test_outputs_that_alias_each_other():
    def f(x):
        y = x + 1
        return y, y.view(-1), y[0]
    _run(f, _x(2, 3))


def test_a_mutated_buffer_and_a_parameter_in_training():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 3))
            self.register_buffer("calls", torch.zeros(()))

        def forward(self, x):
            self.calls.add_(1)
            return x @ self.w

    kiln.reset()
    m, ref = M(), M()
    ref.load_state_dict(m.state_dict())
    compiled = kiln.compile(m, backend=_Aot())
    x = torch.randn(2, 3)
    for _ in range(2):
        compiled(x).sum().backward()
        ref(x).sum().backward()
    torch.testing.assert_close(m.w.grad, ref.w.grad)
    assert float(m.calls) == float(ref.calls) == 2.0


def test_mutation_under_no_grad_inside_a_training_graph():
    def f(x, w, stat):
        y = (x * w).sum()
        with torch.no_grad():
            stat.mul_(0.5).add_(y.detach())
        return y

    kiln.reset()
    compiled = kiln.compile(f, backend=_Aot())
    torch.manual_seed(0)
    x, w, stat = torch.randn(4), torch.randn(4, requires_grad=True), torch.ones(())
    w_ref, stat_ref = w.detach().clone().requires_grad_(True), stat.clone()
    compiled(x, w, stat).backward()
    f(x, w_ref, stat_ref).backward()
    torch.testing.assert_close(w.grad, w_ref.grad)
    torch.testing.assert_close(stat, stat_ref)


def test_gradient_flows_through_a_returned_view_of_an_input():
    def f(x, w):
        return x[0], (x * w).sum()

    kiln.reset()
    compiled = kiln.compile(f, backend=_Aot())
    x = torch.randn(3, 2, requires_grad=True)
    w = torch.randn(3, 2, requires_grad=True)
    a, b = compiled(x, w)
    (a.sum() * 2 + b).backward()
    x_ref, w_ref = x.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    a_ref, b_ref = f(x_ref, w_ref)
    (a_ref.sum() * 2 + b_ref).backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    torch.testing.assert_close(w.grad, w_ref.grad)


def test_writes_with_symbolic_sizes():
    def f(x):
        x[:, 1:].mul_(2)
        return x.sum(1)
    _run(f, _x(3, 4), _x(5, 4), _x(1, 4), dynamic=True)


def test_in_place_metadata_change_of_an_input_is_refused_and_aot_eager_falls_back(caplog):
    def f(x):
        x.t_()
        return x + 1

    kiln.reset()
    with pytest.raises(kiln.BackendCompilerFailed, match="changes the sizes or strides of a graph input"):
        kiln.compile(f, backend=_Aot())(torch.randn(2, 3))
    kiln.reset()
    x, ref = torch.randn(2, 3), None
    ref = x.clone()
    with caplog.at_level("WARNING", logger="kiln"):
        out = kiln.compile(f, backend="aot_eager")(x)
    torch.testing.assert_close(out, f(ref))
    assert x.shape == ref.shape
    assert any("kiln.aotgrad cannot take this graph" in r.message for r in caplog.records)


def test_graphs_hold_no_in_place_ops():
    def f(x):
        y = x.clone()
        y.add_(1)
        y[0].mul_(2)
        x.sub_(1)
        return y

    kiln.reset()
    backend = _Aot()
    kiln.compile(f, backend=backend)(torch.randn(3, 3))
    from kiln.aotgrad import partition, trace
    from kiln.aotgrad._api import _fresh_fakes

    gm = backend.graphs[0]
    result, _ = trace(gm, _fresh_fakes([torch.randn(3, 3)], None), backward=False)
    in_place = [n for n in result.graph.nodes if n.op == "call_function" and str(n.target).startswith("aten.")
                and str(n.target).split(".")[-2].endswith("_")]
    # the one write left is the program's write to its input x, where it was made
    assert [str(n.target) for n in in_place] == ["aten.copy_.default"]
    assert in_place[0].args[0].op == "placeholder"
    assert [i for i, _ in result.mutated] == [0]
    assert partition(result).backward is None


def test_a_backward_that_fails_in_eager_fails_at_backward_time():
    """x is written after ``x * w`` saved it: eager's backward raises; aotgrad cannot build a
    backward either, so aot_eager runs the graph as captured and the error comes, as in
    eager, from backward()."""
    def f(x, w):
        y = (x * w).sum()
        x.add_(1)
        return y

    kiln.reset()
    compiled = kiln.compile(f, backend="aot_eager")
    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    y = compiled(x, w)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    with pytest.raises(kiln.BackendCompilerFailed, match="the backward fails on the traced values"):
        kiln.reset()
        kiln.compile(f, backend=_Aot())(torch.randn(3), torch.randn(3, requires_grad=True))


def test_a_varying_float_input_is_a_symbol_of_the_aten_graph():
    """After the float changed once it is a graph input (automatic dynamic): the ATen graph
    must take it as an input too, not bake in the example value."""
    def f(x, s):
        return x * s + s
    backend = _run(f, *[(lambda v=v: (torch.ones(3), v)) for v in (2.5, 3.5, 4.5, -1.0)])
    assert len(backend.graphs) == 2


def test_the_grad_mode_the_graph_leaves_set_is_set_after_the_call():
    def f(x):
        y = x * 2
        torch.set_grad_enabled(False)
        return y + 1

    kiln.reset()
    compiled = kiln.compile(f, backend=_Aot())
    x = torch.randn(3, requires_grad=True)
    try:
        out = compiled(x)
        assert not torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        expected = f(x)
        assert not torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        torch.testing.assert_close(out, expected)
        assert out.requires_grad == expected.requires_grad
    finally:
        torch.set_grad_enabled(True)


@pytest.mark.parametrize("write", ["overlap", "expanded"])
def test_writes_eager_refuses_or_orders_freely_are_refused_and_aot_eager_matches_eager(write):
    def overlap(x):
        x[0:2].copy_(x[1:3])
        return x + 0

    def expanded(x):
        y = x[:1].expand(3, 2)
        y.add_(1)
        return x + 0

    fn = {"overlap": overlap, "expanded": expanded}[write]
    kiln.reset()
    with pytest.raises(kiln.BackendCompilerFailed, match="memory"):
        kiln.compile(fn, backend=_Aot())(torch.randn(3, 2))
    kiln.reset()
    compiled = kiln.compile(fn, backend="aot_eager")
    x = torch.randn(3, 2)
    ref = x.clone()
    got, got_error = _outcome(compiled, x)
    expected, error = _outcome(fn, ref)
    assert type(got_error) is type(error)
    if error is None:
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(x, ref)


def _outcome(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:  # compared with eager's
        return None, e


def test_an_output_leaf_that_requires_grad_is_refused_and_aot_eager_matches_eager():
    def f(x):
        return x + 1, torch.ones(3, requires_grad=True)

    kiln.reset()
    with pytest.raises(kiln.BackendCompilerFailed, match="requires grad"):
        kiln.compile(f, backend=_Aot())(torch.randn(3))
    kiln.reset()
    a, b = kiln.compile(f, backend="aot_eager")(torch.randn(3))
    assert b.is_leaf and b.requires_grad and not a.requires_grad


def test_write_through_a_view_of_an_intermediate_that_is_returned_with_it():
    def f(x):
        y = x * 1
        v = y[0]
        v.add_(1)
        return y, v
    _run(f, _x(3, 2))


def test_slice_assignment_into_an_input():
    def f(x, y):
        x[1:3] = y
        return x.sum(0)
    _run(f, lambda: (torch.zeros(4, 2), torch.randn(2, 2)))


def test_masked_fill_in_place_on_an_input():
    def f(x, m):
        x.masked_fill_(m, -1.0)
        return x * 2
    _run(f, lambda: (torch.randn(3, 3), torch.rand(3, 3) > 0.5))


def test_augmented_assignment_on_an_input():
    def f(x, y):
        x += y
        x *= 2
        return x - y
    _run(f, lambda: (torch.randn(4), torch.randn(4)))


def test_writes_in_an_unrolled_loop():
    def f(x):
        for i in range(3):
            x[i] += i
        return x.sum()
    _run(f, _x(4, 2))


def test_a_buffer_written_with_a_symbolic_batch_while_training():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)
            self.register_buffer("seen", torch.zeros(()))

        def forward(self, x):
            self.seen.add_(x.shape[0])
            return self.lin(x)

    kiln.reset()
    torch.manual_seed(0)
    m = M()
    ref = M()
    ref.load_state_dict(m.state_dict())
    backend = _Aot()
    compiled = kiln.compile(m, backend=backend, dynamic=True)
    for batch in (4, 1, 6):
        x = torch.randn(batch, 3)
        compiled(x).sum().backward()
        ref(x).sum().backward()
    torch.testing.assert_close(m.lin.weight.grad, ref.lin.weight.grad)
    assert float(m.seen) == float(ref.seen) == 11.0
    assert len(backend.graphs) == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_views_of_another_dtype_keep_their_dtype_and_alias_the_input(backend):
    kiln.reset()

    def fn(x):
        return torch.view_as_complex(x), x.view(torch.int32)

    x = torch.randn(5, 2)
    got = kiln.compile(fn, backend=backend)(x)
    expected = fn(x)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g, e)
    x[0, 0] = 7.0  # still views of the input, as in eager
    assert got[0][0].real == 7.0 and got[1][0, 0] == expected[1][0, 0]
