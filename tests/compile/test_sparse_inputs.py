"""Sparse tensors (no strides, no storage) are not traced: a frame given one runs eagerly
with the reason logged (or, under fullgraph, raises kiln.Unsupported naming the input),
never an internal error."""

from __future__ import annotations

import pytest
import torch

import kiln


def test_a_sparse_input_runs_eagerly():
    def f(s, d):
        return torch.sparse.mm(s, d) + 1

    s = torch.eye(4).to_sparse()
    d = torch.randn(4, 3)
    torch.testing.assert_close(kiln.compile(f)(s, d), f(s, d))
    assert kiln.session().stats.unique_graphs == 0


def test_a_sparse_input_under_fullgraph_names_the_input():
    s = torch.eye(3).to_sparse_csr()
    with pytest.raises(kiln.Unsupported, match="sparse_csr tensor"):
        kiln.compile(lambda s: s.to_dense() * 2, fullgraph=True)(s)
