"""Tracing with torch's core ATen decompositions: composite ops (silu, hardswish, their
backwards, mse_loss, layer norm's backward) become the core ops they are made of; the
graphs still train like eager; ops a backend keeps stay whole."""

from __future__ import annotations

import copy

import torch
from torch import nn

import kiln
from kiln.aotgrad import aot_compile, core_aten_decompositions, partition, trace
from kiln.aotgrad._api import _fresh_fakes


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.norm = nn.Linear(6, 8), nn.Linear(8, 4), nn.LayerNorm(8)

    def forward(self, x, target):
        h = nn.functional.silu(self.a(x))
        h = nn.functional.hardswish(self.norm(h))
        return nn.functional.mse_loss(self.b(h), target)


def _captured(model, *args):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append((gm, example_inputs, kiln.compile_context()))
        return gm.forward

    kiln.reset()
    kiln.compile(model, backend=backend)(*args)
    return graphs[0]


def _op(name):
    packet, overload = name.split(".")[1:]
    return getattr(getattr(torch.ops.aten, packet), overload)


def _ops(graph):
    return {str(n.target) for n in graph.nodes if n.op == "call_function" and str(n.target).startswith("aten.")}


def test_composite_ops_become_core_aten_ops_and_train_like_eager():
    torch.manual_seed(0)
    model = _Net()
    x, target = torch.randn(5, 6), torch.randn(5, 4)
    gm, example_inputs, context = _captured(model, x, target)
    table = core_aten_decompositions()
    result, _ = trace(gm, _fresh_fakes(example_inputs, context), backward=True, decompositions=table)
    ops = _ops(result.graph)
    for composite in ("aten.silu.default", "aten.hardswish.default", "aten.mse_loss.default",
                      "aten.silu_backward.default", "aten.native_layer_norm_backward.default"):
        assert composite not in ops
    # torch's decompositions convert dtypes with ``to``, which stays (not tagged core)
    not_core = {op for op in ops if torch.Tag.core not in _op(op).tags}
    assert not_core <= {"aten.to.dtype"}, not_core

    reference = copy.deepcopy(model)

    def backend(gm, example_inputs):
        return aot_compile(gm, example_inputs, kiln.compile_context(), decompositions=table)

    kiln.reset()
    compiled = kiln.compile(model, backend=backend)
    for _ in range(2):
        compiled(x, target).backward()
        reference(x, target).backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad = q.grad = None


def test_ops_a_backend_keeps_stay_whole():
    model = _Net()
    x, target = torch.randn(5, 6), torch.randn(5, 4)
    gm, example_inputs, context = _captured(model, x, target)
    table = core_aten_decompositions(keep=[torch.ops.aten.silu, torch.ops.aten.silu_backward.default])
    result, _ = trace(gm, _fresh_fakes(example_inputs, context), backward=True, decompositions=table)
    ops = _ops(result.graph)
    assert {"aten.silu.default", "aten.silu_backward.default"} <= ops
    assert "aten.hardswish.default" not in ops
    assert partition(result).backward is not None
