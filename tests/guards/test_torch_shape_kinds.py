"""ShapeRelation over real tensor sizes, next to the tensor matches that make them safe."""

import sympy
import torch

from kiln.guards import (
    GuardSet,
    LocalSource,
    ShapeRelation,
    TensorMatch,
    TensorSizeSource,
)

s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
X, Y = LocalSource("x"), LocalSource("y")


RELATION = sympy.And(sympy.Eq(s0, 2 * s1), sympy.Ge(s1, 2))


def guards():
    return GuardSet([
        ShapeRelation(RELATION,
                      {s0: TensorSizeSource(X, 0), s1: TensorSizeSource(Y, 0)}),
        TensorMatch.from_tensor(X, torch.randn(8, 3), dynamic_sizes=[0], dynamic_strides=[0]),
        TensorMatch.from_tensor(Y, torch.randn(4), dynamic_sizes=[0]),
    ])


def test_relation_over_tensor_sizes():
    gs = guards()
    check = gs.compile()
    for n, ok in ((2, True), (3, True), (1, False), (5, True)):
        frame = {"x": torch.randn(2 * n, 3), "y": torch.randn(n)}
        assert check(frame) is ok
        assert (gs.explain(frame) is None) is ok
    frame = {"x": torch.randn(6, 3), "y": torch.randn(4)}
    assert not check(frame)
    assert gs.explain(frame) == (
        f"shape relation {RELATION} (s0 = L['x'].size(0), s1 = L['y'].size(0)): "
        "expected True, got False with s0 = 6, s1 = 4")


def test_tensor_matches_come_before_size_reads():
    check = guards().compile()
    src = check.source
    assert src.index(".check(") < src.index(".size(0)")
    assert not check({"x": [1, 2], "y": torch.randn(2)})
