"""Input mutations in kiln.inductor: a ``copy_`` of a whole graph input is a kernel stage that
stores into the input (no ATen call, no buffer of its own), a write that a later write
replaces before anything reads it is skipped, and every value that reads the input's old
elements still sees them: computed before the write, or in the same loop iteration before
the store, never from the new elements."""

from __future__ import annotations

import re

import torch
from torch import nn

import kiln


def _run(fn, *inputs, dynamic=None):
    """``fn`` eagerly on clones and compiled on ``inputs``: results and every input equal."""
    eager_inputs = [t.clone() for t in inputs]
    expected = fn(*eager_inputs)
    with torch.no_grad():
        got = kiln.compile(fn, dynamic=dynamic)(*inputs)
    torch.testing.assert_close(got, expected)
    for mine, theirs in zip(inputs, eager_inputs, strict=True):
        torch.testing.assert_close(mine, theirs)
    return got


def _stores(code: str, name: str) -> int:
    return len(re.findall(rf"\b{name}\[[^\]]*\] = ", code))


def _adam(p, g, m, v):
    m.mul_(0.9).add_(g, alpha=0.1)
    v.mul_(0.999).addcmul_(g, g, value=0.001)
    p.addcdiv_(m, (v / 0.5).sqrt().add_(1e-8), value=-0.01)


def test_in_place_adam_is_one_kernel_writing_each_input_once(graphs):
    tensors = [torch.randn(1000), torch.randn(1000), torch.randn(1000), torch.rand(1000)]
    _run(_adam, *tensors)
    (graph,) = graphs
    assert (graph.kernels, graph.externs) == (1, 0)
    assert "_empty(" not in graph.wrapper_code  # no buffer: every value goes to its input
    # m and v are each written by two in-place ops: the first write is never seen
    assert [_stores(graph.cpp_code, f"arg{k}") for k in range(4)] == [1, 0, 1, 1]


def test_a_value_reading_other_elements_of_the_input_is_computed_before_the_write(graphs):
    def fn(x):
        x.copy_(x.flip(0) * 2 + x)

    _run(fn, torch.randn(64, 8))

    def transpose(x):
        x.copy_(x + x.t())
        return x.sum()

    _run(transpose, torch.randn(48, 48))


def test_the_written_value_read_later_and_values_read_before(graphs):
    def fn(x, y):
        before = x * 3
        z = x * 2 + y
        x.copy_(z)
        return z.sum(), before * x, z + 1

    _run(fn, torch.randn(16, 32), torch.randn(32))


def test_a_row_reduction_then_the_row_written_in_one_kernel(graphs):
    # large enough to run on several threads: each row is reduced, then written, by one thread
    def fn(x):
        s = x.sum(1, keepdim=True)
        x.sub_(s / x.shape[1])
        return s

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _run(fn, torch.randn(512, 1024))
    finally:
        torch.set_num_threads(threads)
    (graph,) = graphs
    assert (graph.kernels, graph.externs) == (1, 0)


def test_broadcast_converted_and_non_contiguous_writes(graphs):
    def broadcast(x, v):
        x.copy_(v)

    _run(broadcast, torch.randn(6, 5), torch.randn(5))

    def convert(x, y):
        x.copy_(y * 2)  # float32 values into a float64 input
        return x + 1

    _run(convert, torch.randn(7, 3, dtype=torch.float64), torch.randn(7, 3))

    def scale(x):
        x.mul_(2).add_(1)
        return x.sum(0)

    base = torch.randn(9, 4)
    x = base.t()  # a transposed input: written with its own strides
    expected = base.clone().t().mul_(2).add_(1)
    got = kiln.compile(scale)(x)
    torch.testing.assert_close(x, expected)
    torch.testing.assert_close(got, expected.sum(0))
    assert all(g.externs == 0 for g in graphs)


def test_a_partial_write_stays_an_aten_call(graphs):
    def fn(x, y):
        x[1:3].mul_(y)
        return x * 2

    _run(fn, torch.randn(5, 4), torch.randn(4))


def test_writes_with_dynamic_sizes(graphs):
    def fn(p, g):
        p.mul_(0.5).add_(g)
        return p.sum()

    compiled = kiln.compile(fn, dynamic=True)
    for n in (10, 37):
        p, g = torch.randn(n, 3), torch.randn(n, 3)
        p_eager = p.clone()
        expected = fn(p_eager, g)
        with torch.no_grad():
            got = compiled(p, g)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(p, p_eager)
    assert len(graphs) == 1 and graphs[0].externs == 0


def test_batch_norm_running_statistics_are_written_by_kernels(graphs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU())
    eager = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU())
    eager.load_state_dict(model.state_dict())
    x = torch.randn(32, 8)
    compiled = kiln.compile(model)
    for _ in range(2):
        compiled(x).sum().backward()
        eager(x).sum().backward()
    for (name, mine), theirs in zip(model.state_dict().items(), eager.state_dict().values(), strict=True):
        torch.testing.assert_close(mine, theirs, msg=name)
    for mine, theirs in zip(model.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad)
    forward = graphs[0]
    assert "copy_" not in forward.wrapper_code


# ---------------------------------------------------------------- memory planning
def test_a_dead_buffer_is_handed_to_the_next_buffer_of_its_layout(graphs):
    def fn(x, w):
        # kernel buffers of layout (64, 64), each dead after the next matmul (transposed reads: not
        # written over the matmul's result, _inplace)
        a = torch.relu((x @ w).t())
        b = torch.relu((a @ w).t() + 1)
        c = torch.relu((b @ w).t() - 1)
        return c @ w

    _run(fn, torch.randn(64, 64), torch.randn(64, 64) / 8)
    (graph,) = graphs
    assert len(re.findall(r"buf\d+ = buf\d+; del buf\d+", graph.wrapper_code)) == 2
    assert graph.wrapper_code.count("_empty((64, 64)") == 1


def test_a_buffer_an_aten_view_may_alias_is_never_reused(graphs):
    def fn(x):
        a = (x * 2).sin().sum(0, keepdim=True) + x  # a kernel buffer (16, 16)
        v = a.unfold(0, 2, 1)  # an ATen call: its result is a view of a's memory
        b = (x + 1).cos().sum(0, keepdim=True) + x  # the same layout as a, while v is alive
        return v.sum((1, 2)) + b.sum(1)[:15]

    _run(fn, torch.randn(16, 16))
    (graph,) = graphs
    unfolded = re.search(r"= _aten_unfold_default\d*\((buf\d+)", graph.wrapper_code).group(1)
    assert f"= {unfolded}; del" not in graph.wrapper_code


def test_a_value_two_aten_calls_read_is_computed_once(graphs):
    def fn(q, k, v, bias):
        mask = (bias * 2).tanh()  # not in memory until an ATen call needs it
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        b = torch.nn.functional.scaled_dot_product_attention(a, k, v, attn_mask=mask)
        return b

    _run(fn, torch.randn(2, 4, 16, 8), torch.randn(2, 4, 16, 8), torch.randn(2, 4, 16, 8), torch.randn(16, 16))
    (graph,) = graphs
    assert graph.cpp_code.count("std::tanh") == 1


def test_a_write_read_through_an_item_of_a_split_view_is_not_skipped():
    # x.split(2)[0] read between two writes of x sees the first write: that write is not
    # dead (getitem has no schema; its result is a view of x all the same)
    import operator

    from kiln.fxgraph import Graph
    from kiln.inductor._mutation import overwritten_copies

    aten = torch.ops.aten
    graph = Graph()
    x = graph.placeholder("x")
    parts = graph.call_function(aten.split.Tensor, (x, 2))
    first = graph.call_function(operator.getitem, (parts, 0))
    doubled = graph.call_function(aten.mul.Tensor, (x, 2))
    write1 = graph.call_function(aten.copy_.default, (x, doubled))
    read = graph.call_function(aten.add.Tensor, (first, 1))
    tripled = graph.call_function(aten.mul.Tensor, (doubled, 3))
    graph.call_function(aten.copy_.default, (x, tripled))
    graph.output((read,))
    assert write1 not in overwritten_copies(graph)
    # without the read through the view, the first write is overwritten unseen
    graph2 = Graph()
    x2 = graph2.placeholder("x")
    d2 = graph2.call_function(aten.mul.Tensor, (x2, 2))
    w2 = graph2.call_function(aten.copy_.default, (x2, d2))
    graph2.call_function(aten.copy_.default, (x2, graph2.call_function(aten.mul.Tensor, (d2, 3))))
    graph2.output(())
    assert overwritten_copies(graph2) == {w2}
