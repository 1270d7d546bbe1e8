"""In-place writes in kiln.inductor (``_inplace``): a stage storing into the memory of a buffer
that dies at its kernel. Where the rules allow it (softmax: the result takes the
exponentials' memory) the wrapper allocates one buffer fewer; where they do not (the dead
buffer is read at other elements, or after the stage) nothing is taken, and every value is
eager's either way."""

from __future__ import annotations

import re

import torch

import kiln


def _allocations(graph) -> int:
    return graph.wrapper_code.count("_empty(")


def _taken(graph) -> list[tuple[str, str]]:
    return re.findall(r"^\s+(buf\d+) = (buf\d+)$", graph.wrapper_code, re.M)


def test_softmax_divides_its_exponentials_in_place(graphs):
    x = torch.randn(64, 300) * 4
    with torch.no_grad():
        got = kiln.compile(lambda t: torch.softmax(t, -1))(x)
    torch.testing.assert_close(got, torch.softmax(x, -1))
    (graph,) = graphs
    assert graph.kernels == 1 and _allocations(graph) == 1 and len(_taken(graph)) == 1
    assert graph.cpp_code.count("= kiln_expf(") == 1  # each exponential computed once


def test_softmax_over_an_outer_dim_and_log_softmax_are_eagers(graphs):
    x = torch.randn(6, 40, 5)

    def fn(t):
        return torch.softmax(t, 1), torch.log_softmax(t, -1), torch.softmax(t, -1) * t

    with torch.no_grad():
        got = kiln.compile(fn)(x)
    for g, e in zip(got, fn(x), strict=True):
        torch.testing.assert_close(g, e)


def test_a_buffer_read_at_other_elements_is_not_written_in_place(graphs):
    x = torch.randn(33, 33)

    def fn(t):
        b = t.exp()  # a buffer: read by a reduction and by the sum with its transpose
        return b.sum(1), b + b.t() * 0.5

    with torch.no_grad():
        got = kiln.compile(fn)(x)
    for g, e in zip(got, fn(x), strict=True):
        torch.testing.assert_close(g, e)
    assert _taken(graphs[0]) == []


def test_a_buffer_still_read_by_a_later_kernel_is_not_taken(graphs):
    x = torch.randn(16, 64)

    def fn(t):
        e = (t - t.amax(-1, keepdim=True)).exp()
        s = e / e.sum(-1, keepdim=True)
        return s, e.mean(0)  # e is read again after the division (a reduction over rows)

    with torch.no_grad():
        got = kiln.compile(fn)(x)
    for g, e in zip(got, fn(x), strict=True):
        torch.testing.assert_close(g, e)


def test_attention_and_a_training_step_with_softmax_are_eagers(graphs):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(3))
    refs = [t.detach().clone().requires_grad_() for t in (q, k, v)]

    def fn(q, k, v):
        weights = torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, -1)
        return (weights @ v).square().sum()

    kiln.compile(fn)(q, k, v).backward()
    fn(*refs).backward()
    for t, r in zip((q, k, v), refs, strict=True):
        torch.testing.assert_close(t.grad, r.grad)


def test_a_matmul_result_dying_at_its_epilogue_is_written_over(graphs):
    # an ATen result in memory of its own (a matrix product's) takes the pointwise kernel after it
    x, w = torch.randn(32, 48), torch.randn(48, 64)
    with torch.no_grad():
        got = kiln.compile(lambda a, b: torch.relu(a @ b) * 2)(x, w)
    torch.testing.assert_close(got, torch.relu(x @ w) * 2)
    (graph,) = graphs
    result = re.search(r"(buf\d+) = _aten_mm", graph.wrapper_code).group(1)
    assert graph.kernels == 1 and _allocations(graph) == 0 and [t[1] for t in _taken(graph)] == [result]


def test_an_aten_result_an_aten_view_may_alias_is_not_written_over(graphs):
    def fn(a, b):
        y = a @ b
        v = y.unfold(0, 2, 1)  # an ATen call: its result is a view of y's memory, alive after y dies
        return torch.relu(y) * 2, v.sum((1, 2))

    x, w = torch.randn(16, 8), torch.randn(8, 16)
    with torch.no_grad():
        got = kiln.compile(fn)(x, w)
    for g, e in zip(got, fn(x, w), strict=True):
        torch.testing.assert_close(g, e)
    (graph,) = graphs
    result = re.search(r"(buf\d+) = _aten_mm", graph.wrapper_code).group(1)
    assert result not in [t[1] for t in _taken(graph)]


def test_an_aten_result_of_other_sizes_written_over_is_viewed_as_the_buffer(graphs):
    # the matmul's (34, 64) result, taken by the (2, 17, 64) buffer after it (the same memory):
    # the buffer, returned, has its own sizes
    x, w = torch.randn(34, 48), torch.randn(48, 64)

    def fn(a, b):
        return torch.relu((a @ b).view(2, 17, 64)) * 2

    with torch.no_grad():
        got = kiln.compile(fn)(x, w)
    torch.testing.assert_close(got, fn(x, w))
    (graph,) = graphs
    result = re.search(r"(buf\d+) = _aten_mm", graph.wrapper_code).group(1)
    assert re.search(rf"buf\d+ = _reinterpret\({result}, \(2, 17, 64\), \(1088, 64, 1\), 0\)", graph.wrapper_code)


def _tanh_of_x_abs_x_minus_y(x, y):
    return torch.tanh(x * x.abs()) - y


def _gradients(fn, x, y, w):
    x, y = x.clone().requires_grad_(), y.clone().requires_grad_()
    return torch.autograd.grad(fn(x, y), (x, y), w)


def test_an_aten_result_that_is_its_argument_is_neither_written_nor_reused(graphs, monkeypatch):
    """``conj_physical`` (in tanh's backward) is a CompositeImplicitAutograd op: its schema
    promises a new tensor, its kernel returns a real tensor itself. As an ATen call, its result
    is the memory of its argument: the wrapper once wrote x's gradient into it in place and
    handed the argument's memory to y's gradient, so x's gradient came back as y's (found by
    fuzzing). Composite ops may alias their arguments (``_mutation.returns_alias``), checked
    here with conj_physical kept an ATen call; lowered, it is a copy in the kernel."""
    from kiln.inductor import _lowering
    from kiln.inductor._mutation import returns_alias

    assert returns_alias(torch.ops.aten.conj_physical.default, unknown=False)
    assert returns_alias(torch.ops.aten.type_as.default, unknown=False)
    assert not returns_alias(torch.ops.aten.mm.default, unknown=False)
    g = torch.Generator().manual_seed(0)
    x, y, w = (torch.randn(4, 8, generator=g) for _ in range(3))
    expected = _gradients(_tanh_of_x_abs_x_minus_y, x, y, w)
    torch.testing.assert_close(_gradients(kiln.compile(_tanh_of_x_abs_x_minus_y), x, y, w), expected)
    assert not any("conj_physical" in op for g in graphs for op in g.fallbacks)  # lowered: a kernel's copy
    kiln.reset()
    monkeypatch.delitem(_lowering.lowering_rules, torch.ops.aten.conj_physical.default)
    torch.testing.assert_close(_gradients(kiln.compile(_tanh_of_x_abs_x_minus_y), x, y, w), expected)
    assert any("conj_physical" in op for op in graphs[-1].fallbacks)  # an ATen call, read as an alias
