"""Reads through loaded indices in kiln.inductor (embedding, index_select, gather, advanced
indexing with integer tensors): fused into kernels, values as eager's, and an index out of
range raises eager's error (never a read out of bounds, never a write eager would not make)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import kiln


def _check(fn, *args, dynamic=None):
    with torch.no_grad():
        expected = fn(*args)
        got = kiln.compile(fn, dynamic=dynamic)(*args)
    torch.testing.assert_close(got, expected)


def test_embeddings_sum_and_layer_norm_are_one_kernel(graphs):
    torch.manual_seed(0)
    tokens, positions, norm = nn.Embedding(100, 32), nn.Embedding(16, 32), nn.LayerNorm(32)

    def fn(ids):
        return norm(tokens(ids) + positions(torch.arange(ids.shape[1])))

    _check(fn, torch.randint(0, 100, (4, 16)))
    (graph,) = graphs
    assert (graph.kernels, graph.externs) == (1, 0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_index_select_gather_and_advanced_indexing(graphs, dtype):
    torch.manual_seed(0)
    x = torch.randn(6, 9, 5)
    i = torch.randint(-6, 6, (4,), dtype=dtype)  # negative indices count from the end in x[i]
    j = torch.randint(0, 9, (3, 1), dtype=dtype)
    k = torch.randint(0, 5, (3, 1), dtype=dtype)
    g = torch.randint(0, 9, (6, 4, 5), dtype=dtype)
    h = torch.randint(0, 5, (6, 4, 2), dtype=dtype)

    def fn(x, i, j, k, g, h):
        return (x[i] * 2, x[:, j.squeeze(1)], x[i.abs()[:3, None], j], x[i.abs()[:3, None], :, k],
                torch.index_select(x, 2, k[:, 0]), torch.gather(x, 1, g), torch.gather(x, -1, h))

    _check(fn, x, i, j, k, g, h)
    assert all(g.externs == 0 for g in graphs)


def test_dynamic_batch_of_indices(graphs):
    table = torch.randn(50, 8)

    def fn(ids):
        return table[ids].relu().sum(-1)

    compiled = kiln.compile(fn, dynamic=True)
    for n in (3, 11):
        ids = torch.randint(0, 50, (n, 5))
        with torch.no_grad():
            torch.testing.assert_close(compiled(ids), fn(ids))
    assert len(graphs) == 1 and graphs[0].externs == 0


@pytest.mark.parametrize("case", ["embedding", "index", "negative", "gather", "index_select", "second_dim"])
def test_an_index_out_of_range_raises_eagers_error(graphs, case):
    table, x = torch.randn(10, 4), torch.randn(5, 10)
    ids = torch.tensor([[1, 2], [3, 10]])
    fns = {
        "embedding": lambda: (lambda t, i: nn.functional.embedding(i, t) + 1, (table, ids)),
        "index": lambda: (lambda t, i: t[i] * 2, (table, ids)),
        "negative": lambda: (lambda t, i: t[i] * 2, (table, -ids - 1)),
        "gather": lambda: (lambda t, i: torch.gather(t, 1, i) + 1, (x, ids)),
        "index_select": lambda: (lambda t, i: torch.index_select(t, 0, i.flatten()) + 1, (table, ids)),
        # eager numbers the index tensor by its place among the index tensors: "dimension 0"
        "second_dim": lambda: (lambda t, i: t[:, i] * 2, (x.t(), ids)),
    }
    fn, args = fns[case]()
    with pytest.raises((IndexError, RuntimeError)) as eager:
        fn(*args)
    with pytest.raises(eager.type, match=_escaped(str(eager.value))):
        kiln.compile(fn)(*args)
    assert graphs and graphs[0].kernels >= 1


def _escaped(message: str) -> str:
    import re

    return re.escape(message)


def test_an_input_is_not_written_when_an_index_is_out_of_range(graphs):
    def fn(x, table, ids):
        x.add_(table[ids])
        return x * 2

    x, table = torch.zeros(2, 3), torch.ones(4, 3)
    with pytest.raises(IndexError):
        kiln.compile(fn)(x, table, torch.tensor([1, 7]))
    assert torch.equal(x, torch.zeros(2, 3))  # eager raises before writing, so must kiln
    got = kiln.compile(fn)(x, table, torch.tensor([1, 3]))
    torch.testing.assert_close(got, torch.full((2, 3), 2.0))


def test_boolean_masks_run_as_aten_calls(graphs):
    def fn(x, mask):
        return x[mask] * 2

    x = torch.randn(8, 3)
    mask = x[:, 0] > 0
    with torch.no_grad():
        torch.testing.assert_close(kiln.compile(fn)(x, mask), fn(x, mask))


def test_training_through_embedding_gather_and_cross_entropy(graphs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(30, 16), nn.Flatten(), nn.Linear(16 * 5, 30))
    eager = nn.Sequential(nn.Embedding(30, 16), nn.Flatten(), nn.Linear(16 * 5, 30))
    eager.load_state_dict(model.state_dict())
    ids, target = torch.randint(0, 30, (8, 5)), torch.randint(0, 30, (8,))

    def loss(m, ids, target):
        logits = m(ids)
        picked = torch.gather(logits.log_softmax(-1), 1, target[:, None])
        return nn.functional.cross_entropy(logits, target) - picked.mean()

    compiled = kiln.compile(loss)
    got = compiled(model, ids, target)
    expected = loss(eager, ids, target)
    got.backward()
    expected.backward()
    torch.testing.assert_close(got, expected)
    for mine, theirs in zip(model.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad)


def test_an_embedding_read_by_several_nodes_is_gathered_once(graphs):
    torch.manual_seed(0)
    table, norm = nn.Embedding(100, 32), nn.RMSNorm(32)

    def fn(ids, w):
        h = table(ids)
        a = norm(h) @ w  # the matmul splits the kernels: h is read before and after it
        return h + a

    _check(fn, torch.randint(0, 100, (4, 16)), torch.randn(32, 32))
    (graph,) = graphs
    assert graph.cpp_code.count("kiln_index_error(kiln_error") == 1


def test_an_embedding_bag_sum_reduces_blocks_of_columns_with_the_index_loaded_once(graphs):
    table = torch.randn(1000, 40)

    def bags(ids):
        return table[ids].sum(1)

    _check(bags, torch.randint(0, 1000, (8, 12)))
    (graph,) = graphs
    assert "outputs at a time" in graph.cpp_code  # the sum over the bag runs outside the block of columns
    body = graph.cpp_code.split("#pragma omp simd")[-1]
    assert "kiln_index_error" not in body  # checked once per index, not once per column
    bad = torch.randint(0, 1000, (8, 12))
    bad[3, 5] = 1000
    with pytest.raises(IndexError, match="index 1000 is out of bounds for dimension 0 with size 1000"):
        kiln.compile(bags)(bad)


def test_an_index_read_before_an_input_write_is_checked_before_it(graphs):
    # y is read only after the write of x: its gather must still be checked first, as
    # eager raises at table[ids] before x.add_ runs
    def fn(x, table, ids):
        y = table[ids]
        x.add_(1)
        return y * 2 + x

    x, table = torch.zeros(2, 3), torch.ones(4, 3)
    with pytest.raises(IndexError):
        kiln.compile(fn)(x, table, torch.tensor([1, 9]))
    assert torch.equal(x, torch.zeros(2, 3))
    torch.testing.assert_close(kiln.compile(fn)(x, table, torch.tensor([1, 3])), torch.full((2, 3), 3.0))
