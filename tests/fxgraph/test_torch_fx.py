"""torch.fx interop: round trips on graphs traced from real modules, torch impurity rules."""

import copy
import operator
import pickle

import pytest
import torch
import torch.fx
from torch import nn

from kiln.fxgraph import (
    Graph,
    GraphModule,
    Interpreter,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    is_impure,
)
from kiln.fxgraph.torch_fx import from_torch_fx, to_torch_fx


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
        self.norm = nn.LayerNorm(8)
        self.register_buffer("shift", torch.linspace(-1, 1, 8))

    def forward(self, x):
        h = self.layers(x)
        h = self.norm(h) + self.shift
        return torch.softmax(h.view(-1, 8) * 2.0, dim=-1), h.sum(dim=0, keepdim=True)


def _round_trip(module, *inputs, concrete_args=None):
    module.eval()
    traced = torch.fx.symbolic_trace(module, concrete_args=concrete_args)
    ours = from_torch_fx(traced)
    ours.graph.lint(ours)
    back = to_torch_fx(ours)
    back.graph.lint()
    with torch.no_grad():
        expected = module(*inputs)
        torch.testing.assert_close(ours(*inputs), expected)
        torch.testing.assert_close(Interpreter(ours).run(*inputs), expected)
        torch.testing.assert_close(back(*inputs), expected)
    assert [n.name for n in back.graph.nodes] == [n.name for n in traced.graph.nodes]
    assert [n.op for n in ours.graph.nodes] == [n.op for n in traced.graph.nodes]
    return traced, ours, back


def test_mlp_round_trip():
    torch.manual_seed(0)
    _traced, ours, back = _round_trip(MLP(), torch.randn(4, 16))
    assert "getattr(self.layers, '0')(x)" in ours.code
    # parameters stay parameters and buffers stay buffers
    assert dict(back.named_parameters()).keys() >= {"layers.0.weight", "norm.weight"}
    assert "shift" in dict(back.named_buffers())


def test_transformer_encoder_layer_round_trip():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True
    )
    # The fused fast path's eligibility checks branch on tensor properties, which
    # symbolic tracing cannot follow; torch offers a switch to turn it off.
    fixed = {"src_mask": None, "src_key_padding_mask": None, "is_causal": False}
    saved = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        traced, ours, _back = _round_trip(layer, torch.randn(2, 5, 32), concrete_args=fixed)
    finally:
        torch.backends.mha.set_fastpath_enabled(saved)
    assert len(ours.graph.nodes) == len(traced.graph.nodes) > 20
    # the asserts guarding the concrete arguments are effects: DCE keeps them
    asserts = [n for n in ours.graph.nodes if "assert" in getattr(n.target, "__name__", "")]
    assert len(asserts) == 3
    eliminate_dead_code(ours.graph)
    assert all(n.graph is ours.graph and not n._erased for n in asserts)


def test_graph_built_here_runs_in_torch_fx():
    g = Graph()
    x = g.placeholder("x")
    w = g.get_attr("proj.weight")
    y = g.call_function(torch.nn.functional.linear, (x, w))
    z = g.call_method("relu", (y,))
    idx = g.call_function(operator.getitem, (z, (slice(None), slice(0, 2))))
    g.output({"out": idx, "dtype": torch.float32})
    ours = GraphModule({"proj.weight": torch.randn(3, 4)}, g)
    assert "torch._C._nn.linear(x, proj_weight)" in ours.code
    assert "'dtype': torch.float32" in ours.code
    back = to_torch_fx(ours)
    x_val = torch.randn(2, 4)
    torch.testing.assert_close(back(x_val)["out"], ours(x_val)["out"])
    assert back(x_val)["dtype"] is torch.float32


def test_meta_survives_both_directions():
    traced = torch.fx.symbolic_trace(MLP())
    for n in traced.graph.nodes:
        n.meta["tag"] = n.name
    ours = from_torch_fx(traced)
    assert all(n.meta["tag"] == n.name for n in ours.graph.nodes)
    back = to_torch_fx(ours)
    assert all(n.meta["tag"] == n.name for n in back.graph.nodes)


def test_aten_graph_code_and_pickle():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.ops.aten.add.Tensor, (x, x))
    m = g.call_function(torch.ops.aten.mul.Scalar, (a, 3))
    g.output(m)
    gm = GraphModule({}, g)
    assert "torch.ops.aten.add.Tensor(x, x)" in gm.code
    t = torch.randn(5)
    torch.testing.assert_close(gm(t), (t + t) * 3)
    torch.testing.assert_close(pickle.loads(pickle.dumps(gm))(t), (t + t) * 3)
    torch.testing.assert_close(copy.deepcopy(gm)(t), (t + t) * 3)


def test_random_and_mutating_torch_ops_are_impure():
    g = Graph()
    x = g.placeholder("x")
    r1 = g.call_function(torch.randn, (3,))
    r2 = g.call_function(torch.randn, (3,))
    d = g.call_function(torch.nn.functional.dropout, (x,), {"p": 0.5})
    aten_random = g.call_function(torch.ops.aten.bernoulli.default, (x,))
    aten_mut = g.call_function(torch.ops.aten.add_.Tensor, (x, x))
    aten_pure = g.call_function(torch.ops.aten.add.Tensor, (x, x))
    relu = g.call_function(torch.relu, (x,))
    g.output(x)
    assert all(is_impure(n) for n in (r1, r2, d, aten_random, aten_mut))
    assert not is_impure(aten_pure) and not is_impure(relu)
    assert eliminate_common_subexpressions(g) == 0
    assert eliminate_dead_code(g) == 2  # only the pure aten add and relu go


def test_variadic_placeholder_is_refused():
    def f(*args):
        return args[0]

    graph = torch.fx.Graph()
    p = graph.placeholder("*args")
    graph.output(p)
    torch_gm = torch.fx.GraphModule(nn.Module(), graph)
    with pytest.raises(ValueError, match="variadic inputs are not supported"):
        from_torch_fx(torch_gm)


def test_torch_rules_apply_to_the_first_node_asked_about():
    # The first is_impure call in a process loads torch's rules; it must already see them.
    import subprocess
    import sys

    script = (
        "import torch\n"
        "from kiln.fxgraph import Graph, is_impure\n"
        "g = Graph()\n"
        "n = g.call_function(torch._C._set_grad_enabled, (False,))\n"
        "print(is_impure(n))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.stdout.strip() == "True", out.stderr
