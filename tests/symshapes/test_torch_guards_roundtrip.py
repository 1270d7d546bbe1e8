"""Fake-tensor tracing -> produce_guards() -> kiln.guards: the checker accepts the traced
tensors and rejects tensors whose sizes violate a relation the trace relied on."""

from __future__ import annotations

import torch

from kiln.guards import GuardSet, LocalSource, ShapeRelation, TensorSizeSource
from kiln.symshapes import DimSource, ShapeEnv
from kiln.symshapes.bridge import FakeTensorMode, from_real


def _to_guard_source(src: DimSource):
    assert src.kind == "size"
    return TensorSizeSource(LocalSource(src.name), src.dim)


def _trace(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
    env = ShapeEnv()
    mode = FakeTensorMode(env)
    fx, fy = (from_real(mode, t, dynamic_dims=range(t.dim()), name=n) for t, n in [(x, "x"), (y, "y")])
    fw = from_real(mode, w, dynamic_dims=(0,), name="w")
    with mode:
        h = torch.cat([fx, fy], dim=0) @ fw.t()  # x.size(1) == y.size(1) == w.size(1)
        if h.shape[0] > 10:
            h = h[:10]
        h.view(-1, 2)  # divisibility of the flattened size
    produced = env.produce_guards()
    relations = [
        ShapeRelation(g, {s: _to_guard_source(produced.sources[s]) for s in g.free_symbols}) for g in produced.guards
    ]
    return GuardSet(relations).compile({})


def test_roundtrip_through_fake_tracing():
    x, y, w = torch.randn(7, 6), torch.randn(5, 6), torch.randn(4, 6)
    check = _trace(x, y, w)
    assert check({"x": x, "y": y, "w": w})
    assert check({"x": torch.randn(9, 6), "y": torch.randn(3, 6), "w": torch.randn(8, 6)})
    assert not check({"x": torch.randn(7, 5), "y": y, "w": w})  # inner dims must agree
    assert not check({"x": torch.randn(2, 6), "y": torch.randn(3, 6), "w": w})  # 5 > 10 flips the branch
    assert not check({"x": x, "y": torch.randn(1, 6), "w": w})  # size 1 was assumed away


def test_caller_sources_go_straight_to_kiln_guards():
    env = ShapeEnv()
    mode = FakeTensorMode(env)
    x = torch.randn(6, 8)
    fx = from_real(mode, x, dynamic_dims=(0, 1), size_source=lambda d: TensorSizeSource(LocalSource("x"), d))
    with mode:
        fx.view(-1, 4)  # needs 6 * 8 % 4 == 0
        if fx.shape[0] < fx.shape[1]:
            fx = fx.t()
    produced = env.produce_guards()
    assert all(isinstance(src, TensorSizeSource) for src in produced.sources.values())
    check = GuardSet([ShapeRelation(g, {s: produced.sources[s] for s in g.free_symbols}) for g in produced.guards]).compile({})
    # torch's reshape picks its algorithm from the element count: 48 elements keep the path.
    assert check({"x": x}) and check({"x": torch.randn(4, 12)})
    assert not check({"x": torch.randn(8, 6)})  # 8 < 6 flips the branch
    assert not check({"x": torch.randn(3, 5)})  # 15 is not a multiple of 4
