"""What a symbolic capture skips on a dispatch-cache hit: the meta tensor of a replayed
output is made only when a meta kernel needs it (with exactly the fake's metadata), a
replayed symbolic output reuses the first output's SymInts, and a symbolic operation on the
same operands gives the node it gave before."""

from __future__ import annotations

import torch

from kiln.symshapes import ShapeEnv, ShapeEnvConfig
from kiln.symshapes.bridge import FakeTensorMode, from_torch


def _mode():
    env = ShapeEnv(ShapeEnvConfig(duck_shape=False, oblivious_one=True))
    return env, FakeTensorMode(env, cache=True)


def test_a_replayed_output_makes_its_meta_tensor_when_first_needed():
    _, mode = _mode()
    x = mode.from_real(torch.randn(3, 8), dynamic_dims=(0,))
    with mode:
        first = x[1:].t()
        again = x[1:].t()  # both ops served from the cache
    assert mode.cache.hits >= 2
    assert again._meta is None
    assert (again.shape, again.stride(), again.storage_offset()) == \
        (first.shape, first.stride(), first.storage_offset())
    meta = again.meta  # made now, from the fake's own metadata
    assert (meta.shape, meta.stride(), meta.storage_offset()) == \
        (again.shape, again.stride(), again.storage_offset())
    assert again.fake_storage is x.fake_storage  # still a view of x
    with mode:
        y = again.contiguous() * 2  # a meta kernel runs on it
    assert from_torch(y.shape[1]).expr == from_torch(x.shape[0]).expr - 1


def test_a_replayed_symbolic_output_reuses_the_first_outputs_sizes():
    _, mode = _mode()
    x = mode.from_real(torch.randn(3, 8), dynamic_dims=(0,))
    with mode:
        a, b = x.sum(1), x.sum(1)
    assert a.shape[0].node is b.shape[0].node


def test_the_same_symbolic_operation_gives_the_same_node():
    _, mode = _mode()
    x = mode.from_real(torch.randn(3, 8), dynamic_dims=(0, 1))
    s0, s1 = x.shape
    assert (s0 * s1).node is (s0 * s1).node
    assert ((s0 + 1) * 2).node.hint == 8
