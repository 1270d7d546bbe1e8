"""A size of 1 is a symbol too (``dynamic=True``, ``mark_dynamic``, automatic dynamic): a
batch of 1 shares the graph of other batch sizes wherever the program's meaning does not
depend on it. torch.compile specializes 0 and 1 (its "0/1 specialization"); kiln only 0.

The rules these tests pin down (``kiln.symshapes.ShapeEnvConfig.oblivious_one``):
- A dynamic size ranges over ``[1, inf)``; 0 is specialized (empty tensors take other paths).
- Questions torch's kernels ask with ``guard_or_false``/``guard_or_true`` or
  ``guard_size_oblivious`` (broadcasting against the initial shape, contiguity, the stride
  of a merged dim) are answered as for a size >= 2, without a guard: torch writes those so
  that the answer is valid for every size, checking what it relies on with ``torch._check``.
- When such an answer contradicts the example values and the kernel then fails (a
  ``torch._check`` on the example values: broadcasting a real 1 against a 3), the kernel
  runs again deciding by the example values, with guards: the graph is for a size of 1.
- Every other question (``squeeze`` of a dim, ``expand``, the user's own ``if``) is a guard
  on the example value, so a size of 1 gets its own graph exactly where it matters.
Outputs equal eager's on every call; graph counts are exact.
"""

import pytest
import torch
from e2e_support import CountingBackend, outcome

import kiln


def _run(fn, calls, **options):
    kiln.reset()
    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting, **options)
    for args in calls:
        got, got_error = outcome(compiled, *args)
        expected, error = outcome(fn, *args)
        assert got_error is error, (args, got_error, error)
        if error is None:
            torch.testing.assert_close(got, expected)
    return len(counting.graphs)


def _shapes(*shapes):
    torch.manual_seed(0)
    return [tuple(torch.randn(*s) for s in call) for call in shapes]


def _reduce(x):
    return x.sum(0) + x.mean(0, keepdim=True).squeeze(0) * x.size(0), x.softmax(0)


def test_reductions_and_softmax_over_a_dimension_of_1_share_the_graph():
    calls = _shapes([(1, 4)], [(3, 4)], [(1, 4)], [(6, 4)])
    assert _run(_reduce, calls, dynamic=True) == 1


def test_automatic_dynamic_admits_1_after_the_first_recompile():
    calls = _shapes([(2, 4)], [(3, 4)], [(1, 4)], [(7, 4)])
    assert _run(_reduce, calls) == 2  # torch.compile: 3


def _linear_stack(x, w):
    h = torch.relu(x @ w)
    return h.view(-1, h.size(-1)).sum(0), h.reshape(h.size(0), -1).mean(1)


def test_matmul_and_views_over_a_batch_of_1():
    torch.manual_seed(0)
    w = torch.randn(8, 5)
    calls = [(torch.randn(b, t, 8), w) for b, t in ((1, 3), (4, 3), (2, 7), (1, 9), (5, 2))]
    assert _run(_linear_stack, calls, dynamic=True) == 1
    # a length of 1 too: flattening a contiguous (b, t, 5) is a view for every b and t,
    # decided without a guard (kiln.symshapes.bridge._fast_meta; torch's reshape kernel
    # asks about b * t against b, which gave t == 1 graphs of its own)
    calls += [(torch.randn(b, 1, 8), w) for b in (1, 5, 3)]
    assert _run(_linear_stack, calls, dynamic=True) == 1


def _add(x, y):
    return x + y


def test_broadcasting_a_real_1_is_a_graph_of_its_own():
    """(1, 4) + (3, 4) broadcasts: the oblivious answer fails torch's check, the kernel runs
    again by the example values, and that graph is for a size of 1 (s0 == 1 guarded)."""
    calls = _shapes([(3, 4), (3, 4)], [(1, 4), (3, 4)], [(3, 4), (1, 4)], [(1, 4), (1, 4)],
                    [(5, 4), (5, 4)], [(1, 4), (6, 4)], [(2, 4), (3, 4)])
    # (n, n) -> graph 1 (s0 == s1); (1, n) -> graph 2; (n, 1) -> graph 3; (1, 1) -> graph 1;
    # (2, 3) fails as in eager
    assert _run(_add, calls, dynamic=True) == 3


def test_broadcasting_against_a_static_1_is_one_graph():
    torch.manual_seed(0)
    bias = torch.randn(1, 4)
    kiln.mark_static(bias, 0)
    calls = [(torch.randn(n, 4), bias) for n in (1, 3, 1, 8)]
    assert _run(_add, calls, dynamic=True) == 1


def _squeeze(x):
    return x.squeeze(0) * 2


def test_squeeze_of_a_size_1_dimension_is_guarded():
    calls = _shapes([(3, 4)], [(1, 4)], [(5, 4)], [(1, 4)])
    assert _run(_squeeze, calls, dynamic=True) == 2


def _expand(x):
    return x.expand(4, -1) + 1


def test_expand_needs_a_1_or_the_target_size():
    calls = _shapes([(1, 3)], [(4, 3)], [(1, 3)], [(2, 3)])
    assert _run(_expand, calls, dynamic=True) == 2  # (2, 3) raises as in eager


def _flat_t(x):
    return x.t().view(-1) * 2


def test_a_view_that_is_valid_only_for_a_size_of_1():
    """(5, n).t() has strides (1, n): viewable as one dim only when n == 1. The oblivious
    answer says no view exists; the kernel runs again by the example values (n == 1)."""
    calls = _shapes([(5, 1)], [(5, 1)], [(5, 3)])
    assert _run(_flat_t, calls, dynamic=True) == 2  # n == 3 raises as in eager


def _user_branch(x):
    if x.size(0) == 1:
        return x * 10
    return x.sum(0)


def test_the_users_own_test_of_1_is_a_guard():
    calls = _shapes([(1, 4)], [(3, 4)], [(1, 4)], [(6, 4)])
    assert _run(_user_branch, calls, dynamic=True) == 2


def _empty_ok(x):
    return x.sum(0), x.shape[0] * 2, torch.cat([x, x]).size(0)


def test_empty_tensors_are_specialized_and_correct():
    calls = _shapes([(0, 3)], [(2, 3)], [(0, 3)], [(1, 3)], [(4, 3)])
    assert _run(_empty_ok, calls, dynamic=True) == 2  # 0, then every other size


def _max0(x):
    return x.max(0).values


def test_an_empty_reduction_raises_as_in_eager():
    calls = _shapes([(3, 2)], [(0, 2)], [(1, 2)])
    _run(_max0, calls, dynamic=True)


def _index_first(x, y):
    return x[0] + y[-1], x[: y.size(0)].sum()


def test_indexing_and_slicing_with_a_batch_of_1():
    calls = _shapes([(1, 4), (1, 4)], [(3, 4), (2, 4)], [(5, 4), (1, 4)], [(2, 4), (2, 4)])
    assert _run(_index_first, calls, dynamic=True) == 1  # guarded: y.size(0) <= x.size(0)
    calls = _shapes([(2, 4), (1, 4)], [(2, 4), (5, 4)])  # a slice past the end clamps
    assert _run(_index_first, calls, dynamic=True) == 2


def test_mark_dynamic_on_a_size_of_1_is_a_symbol():
    counting = CountingBackend()
    compiled = kiln.compile(_reduce, backend=counting)
    for n in (1, 2, 9):
        x = torch.randn(n, 4)
        kiln.mark_dynamic(x, 0)
        got, expected = compiled(x), _reduce(x)
        torch.testing.assert_close(got, expected)
    assert len(counting.graphs) == 1


@pytest.mark.parametrize("dynamic", [True, None])
def test_layer_norm_attention_block_with_batch_1(dynamic):
    torch.manual_seed(0)
    attn = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    norm = torch.nn.LayerNorm(16)

    def block(x):
        h = norm(x)
        return x + attn(h, h, h, need_weights=False)[0]

    calls = [(torch.randn(b, t, 16),) for b, t in ((2, 5), (3, 6), (1, 6), (1, 9), (4, 2))]
    with torch.no_grad():
        assert _run(block, calls, dynamic=dynamic) == (1 if dynamic else 2)


def _contiguous_paths(x):
    y = x.contiguous()  # x itself when x is contiguous
    y.add_(1)  # so this changes x exactly then
    return x.is_contiguous(), y is x, x.sum()


def test_contiguity_of_a_size_1_dimension_with_any_stride_is_eagers():
    """(4, n).t() has strides (1, 1) for n == 1: contiguous (a size-1 dim's stride does not
    count), so contiguous() returns it and the in-place add changes it; for n == 3 a copy."""
    for n in (1, 3, 1):
        kiln.reset()
        counting = CountingBackend()
        compiled = kiln.compile(_contiguous_paths, backend=counting, dynamic=True)
        base = torch.randn(4, n)
        x, x_eager = base.clone().t(), base.clone().t()
        got, expected = compiled(x), _contiguous_paths(x_eager)
        assert got[:2] == expected[:2], n
        torch.testing.assert_close(got[2], expected[2])
        torch.testing.assert_close(x, x_eager)


def _heads_back(x):
    # attention's output (b, heads, t, d) laid out as (b, t, heads, d): reshaped to its own
    # sizes (transformers' sdpa_attention_forward does this); a view for every b, t
    y = x.transpose(1, 2)
    return y.reshape(y.shape[0], -1, y.shape[2], y.shape[3]) * 2


def test_a_reshape_that_is_a_view_for_every_size_needs_no_guard_on_1():
    """torch's reshape kernel asks whether each size is 1 (computeStride); where the view
    exists for every size, kiln traces the reshape as that view: a batch of 1 shares the
    graph."""
    torch.manual_seed(0)
    calls = [(torch.randn(b, t, 4, 8),) for b, t in ((2, 5), (1, 7), (3, 1), (1, 1))]
    assert _run(_heads_back, calls, dynamic=True) == 1


def _flatten_transposed(x):
    return x.t().reshape(-1)


def test_a_reshape_that_copies_unless_a_size_is_1_keeps_its_guard():
    """(n, 1).t() reshaped to one dim is a view only for n == 1: decided by the example value."""
    calls = _shapes([(5, 1)], [(3, 1)], [(1, 1)])
    assert _run(_flatten_transposed, calls, dynamic=True) == 2


def _repeat_kv(x):
    # Llama's grouped-query attention: (b, kv, t, d) -> (b, kv * 2, t, d) through an expand;
    # a copy for every b and t (the expanded dim cannot merge), so no guard on b or t being 1
    b, kv, t, d = x.shape
    y = x[:, :, None, :, :].expand(b, kv, 2, t, d).reshape(b, kv * 2, t, d)
    y.add_(1)  # a copy: the input is not written
    return y


def _marked(x, *dims):
    for d in dims:
        kiln.mark_dynamic(x, d)
    return x


def test_a_reshape_that_copies_for_every_size_needs_no_guard_on_1():
    """Batch and length dynamic, heads and head size static (as in Llama): one graph. (With
    a dynamic number of heads the reshape would be a view for 1 head: that one guards.)"""
    torch.manual_seed(0)
    calls = [(_marked(torch.randn(b, 2, t, 4), 0, 2),) for b, t in ((2, 5), (1, 7), (3, 1), (1, 1))]
    assert _run(_repeat_kv, calls) == 1
    calls = [(torch.randn(2, kv, 5, 4),) for kv in (2, 1, 3)]
    assert _run(_repeat_kv, calls, dynamic=True) == 2
