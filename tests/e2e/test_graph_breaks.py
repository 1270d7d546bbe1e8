"""Graph breaks: a frame whose tracing fails at a call or a branch runs as graph, the call (or
branch) for real, and a resume function compiled as a frame of its own. Each case is compared
with eager and counts graphs and breaks exactly."""

import logging
import warnings

import pytest
import torch
from e2e_support import assert_same, eager_item
from torch import nn

import kiln
import kiln.frameeval as fe


def breaks():
    """The graph breaks taken (and frames given up on) since the test's kiln.reset."""
    return kiln.session().stats.breaks


def resume_codes():
    """Code objects of the resume functions made so far."""
    return [fn.__code__ for fn in kiln.session().symexec.resume_functions.values()]


def test_item_in_the_middle(counting):
    def fn(x, y):
        a = x.sin() + y
        n = eager_item(a.sum())  # break: the graph before, the call, the resume after
        b = a * 2
        return b.cos(), n

    compiled = kiln.compile(fn, backend=counting)
    x, y = torch.randn(4), torch.randn(4)
    for _ in range(3):
        assert_same(compiled(x, y), fn(x, y))
    assert len(counting.graphs) == 2
    # A Python number passed to the resume function is guarded by value (kiln has no symbolic
    # scalars yet): another value recompiles the resume function, not the frame.
    x2 = torch.randn(4)
    assert_same(compiled(x2, y), fn(x2, y))
    assert len(counting.graphs) == 3
    assert breaks()[0].location.text == "n = eager_item(a.sum())  # break: the graph before, the call, the resume after"
    assert len(breaks()) == 1


def test_data_dependent_branch_resumes_in_either_branch(counting):
    def fn(x):
        y = x * 2
        if y.sum() > 0:
            z = y.cos()
        else:
            z = y.sin()
        return z + 1

    compiled = kiln.compile(fn, backend=counting)
    pos, neg = torch.ones(3), -torch.ones(3)
    for x in (pos, neg, pos, neg):
        assert_same(compiled(x), fn(x))
    # the graph before the branch, then each branch's resume once
    assert len(counting.graphs) == 3
    assert "depends on its data" in breaks()[0].reason
    assert [type(b).__name__ for b in breaks()] == ["Unsupported"]


def test_a_callee_that_breaks_breaks_its_caller_at_the_call(counting):
    def helper(x):
        return x * eager_item(x.sum())

    def fn(x):
        y = x + 1
        z = helper(y)
        return z - 1

    compiled = kiln.compile(fn, backend=counting)
    for _ in range(2):
        x = torch.ones(3)
        assert_same(compiled(x), fn(x))
    # fn before the call; helper as its own frame (before and after its eager_item); fn's resume
    assert len(counting.graphs) == 4
    assert [b.location.function for b in breaks()] == ["test_a_callee_that_breaks_breaks_its_caller_at_the_call.<locals>.helper"] * 2
    assert breaks()[0].stack[0].function.endswith("fn")  # the inlined caller is named


def test_values_below_the_call_on_the_stack_survive_the_break(counting):
    def helper(x):
        return eager_item(x.sum())

    def fn(x, scale):
        # when helper runs, the stack holds torch.add's NULL/callable, x, and scale * x
        return torch.add(x, scale * x, alpha=helper(x))

    compiled = kiln.compile(fn, backend=counting)
    x = torch.arange(3.0)
    assert_same(compiled(x, 2.0), fn(x, 2.0))
    # fn before the call (scale * x); helper's own frame (x.sum(), then eager_item breaks it);
    # fn's resume (the add)
    assert len(counting.graphs) == 3


def test_disabled_function_is_a_break_and_runs_eagerly(counting):
    calls = []

    @kiln.disable
    def log_it(t):
        calls.append(t.clone())
        return t

    def fn(x):
        y = x.relu()
        y = log_it(y)
        return y * 3

    compiled = kiln.compile(fn, backend=counting)
    x = torch.tensor([-1.0, 2.0])
    assert_same(compiled(x), fn(x))
    assert len(counting.graphs) == 2
    torch.testing.assert_close(calls[0], x.relu())


def test_side_effects_before_the_break_happen_before_it(counting, capsys):
    seen = []

    def observe(xs):
        seen.append(list(xs))  # what the real call finds in the list
        return len(xs)

    def fn(x, xs):
        xs.append(1)
        print("before", x.shape)
        n = kiln.disable(observe)(xs)
        xs.append(n)
        return x + n

    compiled = kiln.compile(fn, backend=counting)
    xs_c, xs_e = [], []
    assert_same(compiled(torch.ones(2), xs_c), fn(torch.ones(2), xs_e))
    assert xs_c == xs_e == [1, 1]
    assert seen == [[1], [1]]
    assert capsys.readouterr().out == "before torch.Size([2])\n" * 2


def test_locals_keep_their_identity_across_the_break(counting):
    def fn(x):
        a = []
        b = a
        a.append(x * 2)
        k = eager_item(x.sum())
        a.append(k)
        return a is b, len(b), a[0] + k

    compiled = kiln.compile(fn, backend=counting)
    x = torch.ones(2)
    assert_same(compiled(x), fn(x))
    assert compiled(x)[0] is True


def test_no_break_inside_autocast_or_a_loop_the_frame_runs_eagerly(counting, caplog):
    def in_with(x):
        with torch.autocast("cpu", enabled=False):
            n = eager_item(x.sum())
        return x * n

    def in_loop(x):
        for _ in range(2):
            x = x * eager_item(x.sum())
        return x

    with caplog.at_level(logging.INFO, logger="kiln.graph_breaks"):
        for fn in (in_with, in_loop):
            x = torch.full((2,), 0.5)
            assert_same(kiln.compile(fn, backend=counting)(x), fn(x))
            assert fe.is_skipped(fn.__code__)
    assert counting.graphs == []
    assert sum("runs eagerly" in r.getMessage() for r in caplog.records) == 2


def test_fullgraph_is_still_an_error():
    def fn(x):
        return x * eager_item(x.sum())

    with pytest.raises(kiln.Unsupported, match=r"eager_item"):
        kiln.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))


def test_module_with_a_break_in_forward(counting):
    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)

        def forward(self, x):
            h = self.a(x).relu()
            if h.mean() > 0.1:  # data-dependent
                return self.b(h)
            return h

    torch.manual_seed(0)
    model = Gate()
    compiled = kiln.compile(model, backend=counting)
    with torch.no_grad():
        for scale in (1.0, -1.0, 1.0):
            x = torch.randn(2, 4) * scale
            assert_same(compiled(x), model(x))
    report = kiln.explain(model)(torch.randn(2, 4))
    assert report.graph_break_count == 1
    assert report.break_reasons[0].location.text == "if h.mean() > 0.1:  # data-dependent"


def test_recompiling_the_frame_reuses_its_resume_function(counting):
    def fn(x):
        n = eager_item(x.sum())
        return x * 2, n

    compiled = kiln.compile(fn, backend=counting)
    compiled(torch.ones(2))
    first = resume_codes()
    compiled(torch.ones(2, dtype=torch.float64))  # fn's guards fail: recompiled
    assert len(fe.get_cache_entries(fn.__code__)) == 2
    assert resume_codes() == first and len(first) == 1
    assert len(fe.get_cache_entries(first[0])) == 2  # its own recompile for float64


def test_explain_counts_graphs_and_breaks_over_resume_functions():
    def fn(x):
        y = x * 2
        n = eager_item(y.sum())
        if n > 0:
            y = y + n
        z = y.relu()
        if z.max() > 1:
            return z.cos()
        return z

    report = kiln.explain(fn)(torch.ones(3))
    assert report.graph_count == 3
    assert report.graph_break_count == 2
    assert [r.location.lineno - fn.__code__.co_firstlineno for r in report.break_reasons] == [2, 6]
    assert "graph breaks: 2" in str(report)


def test_a_warning_in_a_resumed_frame_points_at_the_users_line():
    def fn(x):
        n = eager_item(x.sum())
        warnings.warn("careful", stacklevel=1)
        return x * n

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(kiln.compile(fn, backend="eager")(torch.ones(2)), torch.ones(2) * 2)
    assert [str(w.message) for w in caught] == ["careful"]


def test_out_argument_writes_into_an_input_are_kept(counting):
    # found through a break (transformers' grouped-mm fallback): an op whose only effect
    # is the write into ``out=`` (a view of an input) was removed as dead code
    def fn(x, w, out):
        torch.mm(x, w, out=out[0:2])
        return out

    x, w = torch.randn(2, 3), torch.randn(3, 4)
    out_c, out_e = torch.zeros(4, 4), torch.zeros(4, 4)
    assert_same(kiln.compile(fn, backend=counting, fullgraph=True)(x, w, out_c), fn(x, w, out_e))
    torch.testing.assert_close(out_c, out_e)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x).tanh()
        if h.sum() > 0:  # a break in every block
            h = h * 2
        return x + h


class _Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(_Block() for _ in range(3))
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        x = x * 0.5
        for block in self.blocks:  # the break is in the loop: this frame runs eagerly
            x = block(x)
        return self.head(x)


def test_a_break_inside_a_loop_over_layers_compiles_each_layer(counting):
    torch.manual_seed(0)
    model = _Stack()
    compiled = kiln.compile(model, backend=counting)
    x = torch.randn(4, 8)
    with torch.no_grad():
        assert_same(compiled(x), model(x))
    assert fe.is_skipped(_Stack.forward.__code__)
    # the blocks share one forward code: its graph before the branch, and the resume of the
    # branch taken; one entry serves all three blocks (their parameters are graph inputs)
    assert len(fe.get_cache_entries(_Block.forward.__code__)) == 1
    outcomes = set()
    with torch.no_grad():
        h = x * 0.5
        for block in model.blocks:
            outcomes.add(bool(block.fc(h).tanh().sum() > 0))
            h = block(h)
    # Block.forward before the branch, one resume per branch taken, the head (Linear.forward)
    assert len(counting.graphs) == 1 + len(outcomes) + 1


def test_training_through_a_break_gives_eager_gradients(counting):
    torch.manual_seed(0)
    model = _Block()
    reference = _Block()
    reference.load_state_dict(model.state_dict())
    compiled = kiln.compile(model, backend=counting)
    x = torch.randn(4, 8, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    compiled(x).pow(2).sum().backward()
    reference(x_ref).pow(2).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)
    assert len(counting.graphs) == 2


def test_a_break_inside_grad_mode_blocks_resumes_inside_them(counting):
    def fn(x):
        y = x * 2
        with torch.no_grad():
            z = y + 1
            with torch.enable_grad():
                n = eager_item(z.sum())  # break inside both blocks
                w = y * n
            v = z * n
        return w, v, y * 3

    x = torch.ones(2, requires_grad=True)
    compiled = kiln.compile(fn, backend=counting)
    for _ in range(2):
        got, want = compiled(x), fn(x)
        assert_same(got, want)  # requires_grad of each output included
        assert torch.is_grad_enabled()
    assert len(counting.graphs) == 2
    assert len(breaks()) == 1


def test_an_exception_at_a_break_inside_a_grad_mode_block_restores_grad_mode(counting):
    @kiln.disable
    def fails(t):
        raise ValueError("no")

    def fn(x):
        with torch.no_grad():
            y = x * 2
            fails(y)
        return y

    compiled = kiln.compile(fn, backend=counting)
    with pytest.raises(ValueError, match="no"):
        compiled(torch.ones(2))
    assert torch.is_grad_enabled()
    assert len(counting.graphs) == 1 and len(breaks()) == 1


def test_a_trace_stopped_inside_an_autocast_block_leaves_autocast_as_it_was():
    # tracing enters autocast for real (fakes get its dtypes); a trace that stops inside the
    # block (no break possible there: the frame runs eagerly) must leave it as it found it
    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            n = eager_item(x.sum())
        return x * n

    state = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
    nesting = torch.autocast_increment_nesting()
    torch.autocast_decrement_nesting()
    assert_same(kiln.compile(fn, backend="eager")(torch.ones(2)), fn(torch.ones(2)))
    assert fe.is_skipped(fn.__code__)
    assert (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")) == state  # was left on
    assert torch.autocast_increment_nesting() == nesting  # no block left entered
    torch.autocast_decrement_nesting()


def test_iterators_made_in_the_trace_stay_iterators(counting):
    # iter() in traced code made a tuple: returned, or handed to a resume function, the
    # caller got a tuple where it expected an iterator
    def fn(x):
        it = iter([x, x * 2, x * 3])
        first = next(it)
        missing = next(iter(()), None)
        return first + 1, it, missing

    compiled = kiln.compile(fn, backend=counting, fullgraph=True)
    x = torch.ones(2)
    first, it, missing = compiled(x)
    torch.testing.assert_close(first, x + 1)
    assert missing is None
    assert iter(it) is it and [t.tolist() for t in it] == [[2.0, 2.0], [3.0, 3.0]]

    def drains(x):
        it = iter([x])
        next(it)
        try:
            next(it)
        except StopIteration:
            return x - 1
        return x

    torch.testing.assert_close(kiln.compile(drains, backend=counting, fullgraph=True)(x), x - 1)


@kiln.disable
def _risky(t, fail):
    if fail == "value":
        raise ValueError("boom")
    if fail == "key":
        raise KeyError("boom")
    return t.sum().item()


def test_a_break_inside_a_try_block_resumes_at_its_handler_when_the_call_raises(counting):
    def fn(x, fail):
        y = x * 2
        try:
            n = _risky(y, fail)
        except ValueError:
            n = -1.0
        return y + n

    compiled = kiln.compile(fn, backend=counting)
    for fail in (None, "value", "value", None):
        x = torch.ones(2)
        torch.testing.assert_close(compiled(x, fail), fn(x, fail))
    with pytest.raises(KeyError, match="boom"):  # not caught by the handler: goes on
        compiled(torch.ones(2), "key")


def test_finally_and_grad_blocks_inside_a_try_run_on_both_paths(counting):
    log = []

    def fn(x, fail):
        try:
            with torch.no_grad():
                y = x * 2
                n = _risky(y, fail)
        except ValueError:
            n = 0.5
        finally:
            log.append("finally")
        return y * n, x * 3

    x = torch.ones(2, requires_grad=True)
    compiled = kiln.compile(fn, backend=counting)
    for fail in (None, "value"):
        log.clear()
        got, want = compiled(x, fail), fn(x, fail)
        assert_same(got, want)  # requires_grad of each output too: grad mode was restored
        assert log == ["finally", "finally"] and torch.is_grad_enabled()


class _Base:
    def scale(self, x):
        return x * 2


class _Child(_Base):
    def scale(self, x):
        return x * 3


def test_a_super_object_the_trace_made_is_rebuilt_in_two_argument_form(counting):
    # A super object on the stack at a break (3.12's `super().name(...)` call) or returned
    # from the frame is rebuilt as super(cls, obj): no __class__ cell is needed for it.
    def fn(obj, x):
        return super(_Child, obj), x + 1

    compiled = kiln.compile(fn, backend=counting)
    obj, x = _Child(), torch.randn(3)
    s, y = compiled(obj, x)
    expected_s, expected_y = fn(obj, x)
    assert type(s) is super and s.__thisclass__ is _Child and s.__self__ is obj
    torch.testing.assert_close(s.scale(x), expected_s.scale(x))
    torch.testing.assert_close(y, expected_y)
    assert len(counting.graphs) == 1
    assert breaks() == []


_TABLE = [("neg", torch.neg), ("tanh", torch.tanh)]


def test_a_function_from_a_table_of_tuples_is_traced_not_broken(counting):
    """``_TABLE[k][1](x)``: a global list of (name, function) tuples indexed by a Python int.
    The tuple's item keeps its tracker (and source), so the call is traced in one graph and
    guarded by identity: another function in the table recompiles. (Before, the tuple's item was
    folded into a value made at trace time, which cannot be tracked: a graph break, where
    torch.compile traces it.)"""

    def fn(x, k, steps):
        for name, j in steps:
            x = _TABLE[j][1](x) if name == "u" else x * 2
        return _TABLE[k][1](x)

    compiled = kiln.compile(fn, backend=counting, fullgraph=True)
    x = torch.randn(5)
    steps = [("u", 1), ("m", 0), ("u", 0)]
    assert_same(compiled(x, 1, steps), fn(x, 1, steps))
    assert_same(compiled(x, 1, steps), fn(x, 1, steps))
    assert len(counting.graphs) == 1 and breaks() == []
    old = _TABLE[1]
    _TABLE[1] = ("sin", torch.sin)
    try:
        assert_same(compiled(x, 1, steps), fn(x, 1, steps))
    finally:
        _TABLE[1] = old
    assert len(counting.graphs) == 2
