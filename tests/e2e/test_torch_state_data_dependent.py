"""Ops whose output size depends on tensor data: a compiled call equals eager for every
data, whether kiln keeps the op in the graph or breaks before a data-dependent size would
become a constant of the graph (issue 11 item 17)."""

from __future__ import annotations

import pytest
import torch

import kiln


def arange_expand_other(a, b):
    n = b.max().to(torch.int32)
    r = torch.arange(0, n)
    return r.expand(2, r.size(0)) + a.size(0)


def arange_expand_issue(a, b):
    n = b.max().to(torch.int32)
    return torch.arange(0, n).expand(2, a.size(0))


def arange_shape_view(a, b):
    r = torch.arange(0, b.max().to(torch.int32))
    return r.view(1, -1).expand(a.size(0), r.shape[0])


def mask_index_size(a, b):
    r = a[b > 2]
    return r.expand(2, r.size(0)) * 2


def nonzero_new_zeros(a, b):
    r = torch.nonzero(b > 2)
    return r.new_zeros(r.shape[0], 2) + r


def masked_select_numel(a, b):
    r = torch.masked_select(a, b > 1)
    return r * r.numel()


def unique_len(a, b):
    u = torch.unique(b.round())
    return torch.zeros(len(u), 2) + u.size(0)


def repeat_interleave_stride(a, b):
    r = torch.repeat_interleave(a, b.long() % 3)
    return r.view(-1, 1).expand(r.shape[0], 3).contiguous().stride(0) * r


def item_sizes(a, b):
    k = int(b.max())
    return torch.ones(k, 2).sum(0) + torch.full((k,), 2.0).sum() + torch.linspace(0, 1, k).sum()


def factories_from_tensor_sizes(a, b):
    n = b.max().long()
    return torch.zeros(n).expand(3, n).sum(0) + torch.arange(n) + torch.empty(n).fill_(1.0)


def data_dependent_only_in_graph(a, b):
    return (a[a > 0] * 2).sum() + torch.nonzero(b > 1).float().sum()


def len_of_masked(a, b):
    r = a[b > 2]
    return torch.zeros_like(r) + len(r)


def fill_view_of_item_sized(a, b):
    n = b.max().to(torch.int32)
    return torch.empty(n).fill_(1.0).view(-1, 1).expand(-1, 2) + a.sum()


def where_and_unique_counts(a, b):
    u, c = torch.unique(b.round(), return_counts=True)
    return torch.where(b > 2)[0] * 2, u * c, torch.argwhere(b > 2).sum(1)


def size_in_python_arithmetic(a, b):
    r = torch.nonzero(b > 1)
    half = r.shape[0] // 2
    return a[:half] if r.numel() > 2 else a


def size_in_returned_value(a, b):
    r = a[b > 1]
    return r * 2, r.shape, r.numel()


def data_dependent_branch_on_size(a, b):
    r = a[b > 2]
    if r.size(0) > 1:
        return r.sum()
    return r.mean()


CASES = [arange_expand_other, arange_expand_issue, arange_shape_view, mask_index_size, nonzero_new_zeros,
         masked_select_numel, unique_len, repeat_interleave_stride, item_sizes,
         factories_from_tensor_sizes, data_dependent_only_in_graph, len_of_masked, fill_view_of_item_sized,
         where_and_unique_counts, size_in_python_arithmetic, size_in_returned_value,
         data_dependent_branch_on_size]


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # eager raising is an answer too: kiln must raise the same
        return type(e)


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_data_dependent_sizes_match_eager(fn):
    compiled = kiln.compile(fn, backend="eager")
    for n in (4, 5, 6, 4, 7):
        a = torch.randn(n)
        b = torch.arange(n, dtype=torch.float32)
        expected = _outcome(fn, a, b)
        got = _outcome(compiled, a, b)
        if isinstance(expected, type):
            assert got is expected, (n, got)
        else:
            assert type(got) is type(expected), (n, got)
            torch.testing.assert_close(got, expected)


def test_a_data_dependent_size_read_stays_in_the_graph():
    explained = kiln.explain(arange_expand_other)(torch.randn(4), torch.arange(4, dtype=torch.float32))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def test_a_decision_on_a_data_dependent_size_breaks_the_graph():
    explained = kiln.explain(data_dependent_branch_on_size)(torch.randn(4), torch.arange(4, dtype=torch.float32))
    assert explained.graph_break_count == 1
    assert "known only when the graph runs" in explained.break_reasons[0].reason
