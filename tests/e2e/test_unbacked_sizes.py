"""Data-dependent sizes and numbers stay in the graph (issue 14): ``.item()``/``.tolist()``
values, sizes of ``nonzero``, boolean-mask, ``unique``, ``repeat_interleave`` and
``bincount`` results are unbacked symbols the graph computes. One graph serves every data;
a decision the Python code takes on such a value is a graph break at that line (an error
naming it with fullgraph=True); assumptions the trace made are checked when the graph runs."""

from __future__ import annotations

import inspect

import pytest
import torch
from e2e_support import CountingBackend, assert_same

import kiln

_DATA = [torch.tensor([1.5, -2.0, 3.0, 0.5, -1.0, 2.5]), torch.tensor([-1.0, 2.0, -3.0, -0.5, 4.0, -2.5]),
         torch.tensor([0.5, 1.0, 2.0, 3.0, 4.0, 5.0]), -torch.arange(1.0, 7.0)]


def _one_graph_for_all(fn, data=_DATA, **options):
    """Compile ``fn`` once; every input gives eager's answer from one graph, no break."""
    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting, **options)
    for x in data:
        assert_same(compiled(x.clone()), fn(x.clone()))
    assert len(counting.graphs) == 1
    explained = kiln.explain(fn)(data[0].clone())
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    return counting.graphs[0]


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_the_issue_example_is_one_graph_for_any_data():
    def f(x):
        idx = x.nonzero()
        y = x[x > 0]
        n = int((x > 0).sum().item())
        z = torch.zeros(n)
        return idx.float().sum() + y.sum() + z.sum(), x.unique().sum(), n

    gm = _one_graph_for_all(f)
    assert "item()" in gm.code and "unique()" in gm.code  # computed when the graph runs


def test_an_item_used_as_a_size_serves_different_data_without_recompiling():
    def f(x):
        n = (x > 0).sum().item()
        return torch.zeros(n) + 1, torch.arange(n) * 2, torch.full((n, 2), 3.0), x.new_ones(n, 1).view(-1)

    _one_graph_for_all(f)


def test_sizes_of_masked_and_nonzero_results_are_read_in_the_graph():
    def f(x):
        y = x[x > 0]
        idx = torch.nonzero(x < 0)
        return torch.zeros(len(y)) + y, y.shape[0] + idx.size(0), y.numel() * 2, idx.new_zeros(idx.shape[0], 2) + idx

    _one_graph_for_all(f)


def test_an_empty_mask_gives_a_size_zero_result():
    def f(x):
        y = x[x > 100]
        n = (x > 100).sum().item()
        return y.sum(), y.shape[0], y * 2, torch.ones(n, 3).sum(0)

    _one_graph_for_all(f)
    compiled = kiln.compile(f, backend="eager")
    out = compiled(torch.randn(5))
    assert out[1] == 0 and out[2].shape == (0,) and out[3].tolist() == [0.0, 0.0, 0.0]


def test_float_and_int_items_in_python_arithmetic_and_tensor_ops():
    def f(x):
        s = x.sum().item()
        k = int(x.abs().max().item())  # float -> int stays in the graph (truncation)
        m = float((x > 0).sum().item())
        return x * s + s, s * 2 - 1, k + 1, torch.ones(k + 1) * m, m / 4

    _one_graph_for_all(f)


def test_unique_with_inverse_and_counts_and_unique_consecutive():
    def f(x):
        r = (x * 2).round()
        u, inverse, counts = torch.unique(r, return_inverse=True, return_counts=True)
        v, c = torch.unique_consecutive(r.sort().values, return_counts=True)
        return u, inverse, counts, u[inverse], v * c, torch.zeros(u.shape[0]) + counts

    _one_graph_for_all(f, data=[*_DATA, torch.tensor([1.0, 1.0, 1.0, 2.0, 2.0, 1.0])])


def test_repeat_interleave_with_a_tensor_of_repeats_and_bincount():
    def f(x):
        reps = (x.abs() * 2).long() % 3
        r = torch.repeat_interleave(reps)
        return r, torch.repeat_interleave(x, reps) * 2, torch.bincount(reps), \
            torch.bincount(reps, minlength=5), torch.bincount(reps, weights=x)

    _one_graph_for_all(f)


def test_tolist_of_a_static_length_tensor_is_numbers_the_graph_computes():
    def f(x):
        a, b, c = (x[:3].abs() * 2).long().tolist()
        rows = x[:4].view(2, 2).tolist()
        return torch.ones(a + 1) * b + c, rows, [v * 2 for v in rows[0]]

    _one_graph_for_all(f)


def test_a_branch_on_an_item_value_is_one_break_at_that_line():
    def f(x):
        n = (x > 0).sum().item()
        y = x * 2
        if n > 3:
            return y + n
        return y - n

    explained = kiln.explain(f)(_DATA[2].clone())
    assert (explained.graph_count, explained.graph_break_count) == (2, 1)
    (reason,) = explained.break_reasons
    assert reason.location.lineno == _line_of(f, "if n > 3:")
    assert "known only when the graph runs" in reason.reason
    kiln.reset()
    counting = CountingBackend()
    compiled = kiln.compile(f, backend=counting)
    for x in _DATA:
        assert_same(compiled(x.clone()), f(x.clone()))
    # the graph before the branch; a resume function per branch taken (n stays a number
    # its resume function receives: each value of n recompiles that resume function)
    before = [g for g in counting.graphs if "item()" in g.code]
    assert len(before) == 1


def test_a_comparison_the_value_ranges_settle_needs_no_break():
    def f(x):
        y = x[x > 0]
        n = y.shape[0]
        big = n <= x.shape[0]  # a nonzero/mask size never exceeds the input's numel
        nonneg = n >= 0
        return y * 2, big, nonneg

    _one_graph_for_all(f)


def test_fullgraph_raises_unsupported_naming_the_line():
    def f(x):
        n = (x > 0).sum().item()
        for _ in range(n):
            x = x + 1
        return x

    compiled = kiln.compile(f, backend="eager", fullgraph=True)
    with pytest.raises(kiln.Unsupported) as info:
        compiled(torch.randn(6))
    err = info.value
    assert err.location.lineno == _line_of(f, "for _ in range(n):")
    assert err.location.text == "for _ in range(n):"
    assert "known only when the graph runs" in err.reason


def test_range_of_an_item_breaks_at_the_call_and_matches_eager():
    def f(x):
        n = (x > 0).sum().item()
        y = x * 2
        total = sum(range(n))
        return y + total

    explained = kiln.explain(f)(_DATA[0].clone())
    assert explained.graph_break_count == 1
    assert explained.break_reasons[0].location.lineno == _line_of(f, "total = sum(range(n))")
    kiln.reset()
    compiled = kiln.compile(f, backend="eager")
    for x in _DATA:
        assert_same(compiled(x.clone()), f(x.clone()))


def test_torch_check_is_checked_when_the_graph_runs():
    def f(x):
        n = (x > 0).sum().item()
        torch._check(n <= 4)
        torch._check_is_size(n)
        return torch.zeros(n) + x[:4].sum()

    counting = CountingBackend()
    compiled = kiln.compile(f, backend=counting)
    for x in _DATA[:2] + _DATA[3:]:  # at most 4 positive values
        assert_same(compiled(x.clone()), f(x.clone()))
    with pytest.raises(RuntimeError):
        f(_DATA[2].clone())  # 6 positive values: eager's torch._check fails
    with pytest.raises(RuntimeError, match=r"breaks an assumption of the compiled code: u0 <= 4"):
        compiled(_DATA[2].clone())
    assert len(counting.graphs) == 1
    assert "check_assumption" in counting.graphs[0].code


def test_an_assumption_of_a_meta_kernel_is_checked_not_trusted():
    # broadcasting a masked result against 5 elements assumes it has 5 (torch.compile does
    # too): with 1 element eager broadcasts, the compiled graph raises instead of going on
    # with a wrong size in its Python decisions
    def f(x):
        y = x[x > 0]
        z = y + torch.ones(5)
        return z, y.shape[0] == 5

    compiled = kiln.compile(f, backend="eager")
    five = torch.tensor([1.0, -1.0, 2.0, 3.0, 4.0, 5.0])
    assert_same(compiled(five), f(five))
    one = torch.tensor([1.0, -1.0, -2.0])
    assert f(one)[1] is False
    with pytest.raises(RuntimeError, match="data-dependent value breaks an assumption"):
        compiled(one)


def test_dynamic_inputs_with_data_dependent_sizes_are_one_graph():
    def f(x):
        y = x[x > 0]
        n = (x < 0).sum().item()
        return y.sum() + x.shape[0], y.shape[0] + x.shape[0], torch.ones(n) * x.shape[0]

    data = [torch.randn(8), torch.randn(11), torch.randn(5), -torch.rand(9)]
    _one_graph_for_all(f, data=data, dynamic=True)


def _grouped(x, w, offs):
    out = x.new_zeros(x.shape[0], w.shape[2])
    start = 0
    for i, end in enumerate(offs.tolist()):
        out[start:end] = x[start:end] @ w[i]
        start = end
    return out.relu()


def test_tolist_values_where_no_break_is_possible_trace_again_breaking_at_tolist():
    """Slice bounds from ``.tolist()`` in a loop: the meta kernel needs ``u0 < 0`` and a
    subscript is no graph break point, so the frame is traced again with ``.tolist()``
    breaking the graph (torch.compile's default): the loop runs in the resume function on
    the real ints, compiled, instead of the whole frame running eagerly."""
    torch.manual_seed(0)
    x, w = torch.randn(64, 8), torch.randn(3, 8, 8)
    offs = torch.tensor([16, 40, 64])
    e = kiln.explain(_grouped)(x, w, offs)
    assert (e.graph_count, e.graph_break_count) == (2, 1)
    assert "tolist() needs the tensor's data" in str(e.break_reasons[0])
    compiled = kiln.compile(_grouped, backend="eager")
    torch.testing.assert_close(compiled(x, w, offs), _grouped(x, w, offs))
