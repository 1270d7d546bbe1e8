"""backend="aot_eager": training steps through kiln.aotgrad's forward and backward graphs
match eager (losses, every gradient and parameter, BatchNorm's running statistics, dropout's
masks), inference runs one forward graph, inputs the program writes are written, views
of inputs stay views, and sizes that are symbols are served by one graph."""

from __future__ import annotations

import copy
import weakref

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import kiln


class _Counting:
    """A backend that counts graphs, each compiled by kiln.aotgrad (which refuses what it
    cannot take, rather than falling back as backend="aot_eager" does)."""

    handles_dynamic_inputs = True  # aotgrad's graphs serve every size the guards admit

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        from kiln.aotgrad import aot_compile

        self.graphs += 1
        return aot_compile(gm, example_inputs, kiln.compile_context())


def _train(model, inputs, *, steps=3, dynamic=None, loss=lambda out: out.square().mean()):
    """Compiled and eager copies of ``model`` take the same SGD steps; everything must match."""
    kiln.reset()
    torch.manual_seed(0)
    reference = copy.deepcopy(model)
    backend = _Counting()
    compiled = kiln.compile(model, backend=backend, dynamic=dynamic)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.05)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(steps):
        x = inputs(step)
        torch.manual_seed(100 + step)
        expected = loss(reference(x))
        expected.backward()
        torch.manual_seed(100 + step)
        got = loss(compiled(x))
        got.backward()
        torch.testing.assert_close(got, expected)
        for (name, p_ref), p in zip(reference.named_parameters(), model.parameters(), strict=True):
            torch.testing.assert_close(p.grad, p_ref.grad, msg=name)
        opt_ref.step()
        opt.step()
        opt_ref.zero_grad()
        opt.zero_grad()
    for (name, ref), value in zip(reference.state_dict().items(), model.state_dict().values(), strict=True):
        torch.testing.assert_close(value, ref, msg=name)
    return backend.graphs


def test_mlp_training_matches_eager():
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))
    assert _train(model, lambda s: torch.randn(8, 6)) == 1


def test_convnet_with_batchnorm_in_train_mode_updates_running_stats_like_eager():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(4 * 3 * 3, 2))
    assert _train(model, lambda s: torch.randn(2, 3, 8, 8)) == 1
    assert int(model[1].num_batches_tracked) == 3


def test_dropout_masks_match_eager_under_the_same_seed():
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 2))
    assert _train(model, lambda s: torch.randn(5, 8)) == 1


class _Block(nn.Module):
    """A transformer block with dropout in attention and MLP."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.1, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


def test_transformer_block_with_dropout_matches_eager():
    assert _train(_Block(), lambda s: torch.randn(2, 5, 16)) == 1


class _Cell(nn.Module):
    """A hand-written LSTM-style cell unrolled over a short sequence."""

    def __init__(self, d=6, h=8):
        super().__init__()
        self.ih, self.hh = nn.Linear(d, 4 * h), nn.Linear(h, 4 * h)
        self.h = h

    def forward(self, xs):
        h = xs.new_zeros(xs.shape[0], self.h)
        c = torch.zeros_like(h)
        for t in range(xs.shape[1]):
            i, f, g, o = (self.ih(xs[:, t]) + self.hh(h)).chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return h


def test_lstm_style_cell_matches_eager():
    assert _train(_Cell(), lambda s: torch.randn(3, 4, 6)) == 1


def test_symbolic_batch_serves_every_size_including_1():
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 2))
    sizes = [5, 3, 1, 7]
    assert _train(model, lambda s: torch.randn(sizes[s], 4), steps=4, dynamic=True) == 1


def test_bias_gradient_of_a_symbolic_batch_needs_no_guard():
    """autograd sums a linear's bias gradient over the batch; for a batch that may be 1 that
    is decided without a guard (input_metadata.cpp is an oblivious site), so the graph is
    not refused and a batch of 1 reuses it."""
    model = nn.Linear(4, 3)
    assert _train(model, lambda s: torch.randn([6, 1, 2][s], 4), dynamic=True) == 1


def test_a_size_the_shape_env_renamed_after_a_dead_input():
    """``x + y`` makes ``y``'s sizes ``x``'s symbols in the shape env; the sum is dead, so ``x``
    is no input of the graph, and the product names ``x``'s symbol: it is ``y``'s size
    (aotgrad refused the graph: "the size s1 comes from no input of the graph")."""
    kiln.reset()
    backend = _Counting()

    def f(x, y):
        unused = x + y  # noqa: F841
        return y * y.shape[-1]

    compiled = kiln.compile(f, backend=backend, dynamic=True, fullgraph=True)
    for rows, cols in [(5, 8), (7, 3)]:
        x = torch.randn(rows, cols, requires_grad=True)
        y = torch.randn(rows, cols, requires_grad=True)
        y_ref = y.detach().clone().requires_grad_()
        out, expected = compiled(x, y), f(x, y_ref)
        torch.testing.assert_close(out, expected)
        out.backward(torch.ones_like(out))
        expected.backward(torch.ones_like(expected))
        torch.testing.assert_close(y.grad, y_ref.grad)
        assert x.grad is None
    assert backend.graphs == 1


def test_inference_under_no_grad_runs_one_forward_graph():
    kiln.reset()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8))
    reference = copy.deepcopy(model)
    compiled = kiln.compile(model, backend="aot_eager")
    x = torch.randn(6, 4)
    with torch.no_grad():
        out = compiled(x)
        expected = reference(x)
    torch.testing.assert_close(out, expected)
    assert not out.requires_grad
    torch.testing.assert_close(model[2].running_mean, reference[2].running_mean)


def test_named_backend_runs_aotgrad_and_trains():
    kiln.reset()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.Sigmoid(), nn.Linear(5, 1))
    reference = copy.deepcopy(model)
    compiled = kiln.compile(model, backend="aot_eager")
    x = torch.randn(4, 3)
    compiled(x).sum().backward()
    reference(x).sum().backward()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)
    out = compiled(x)
    assert out.grad_fn is not None and type(out.grad_fn).__name__ == "CompiledFunctionBackward"


def test_double_backward_is_refused_clearly():
    kiln.reset()
    model = nn.Linear(3, 1)
    compiled = kiln.compile(model, backend="aot_eager")
    x = torch.randn(2, 3)
    (g,) = torch.autograd.grad(compiled(x).tanh().sum(), [model.weight], create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice a function that was marked with @once_differentiable"):
        g.sum().backward()


def test_kiln_logs_aot_graphs_shows_the_joint_forward_and_backward_graphs(caplog):
    kiln.reset()
    compiled = kiln.compile(nn.Linear(3, 2), backend="aot_eager")
    kiln.set_logs("aot_graphs")
    try:
        with caplog.at_level("INFO", logger="kiln.aot_graphs"):
            compiled(torch.randn(4, 3)).sum().backward()
    finally:
        kiln.set_logs()
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "kiln.aot_graphs")
    for part in ("joint graph:", "forward graph:", "backward graph:", "torch.ops.aten.addmm.default",
                 "tangents_1"):
        assert part in text


def test_training_under_autocast_matches_eager():
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4))

    def loss(out):
        return out.float().square().mean()

    def inputs(step):
        return torch.randn(4, 8)

    kiln.reset()
    torch.manual_seed(0)
    reference = copy.deepcopy(model)
    compiled = kiln.compile(model, backend=_Counting())
    for _ in range(2):
        x = inputs(0)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            expected = reference(x)
            got = compiled(x)
        assert got.dtype == expected.dtype == torch.bfloat16
        torch.testing.assert_close(got, expected)
        loss(expected).backward()
        loss(got).backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad = q.grad = None


def test_retain_graph_lets_backward_run_twice_like_eager():
    kiln.reset()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
    reference = copy.deepcopy(model)
    compiled = kiln.compile(model, backend=_Counting())
    x = torch.randn(2, 3)
    out, ref = compiled(x).sum(), reference(x).sum()
    out.backward(retain_graph=True)
    out.backward()
    ref.backward(retain_graph=True)
    ref.backward()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()  # the saved tensors were freed, as in eager


def test_inference_mode_gives_inference_tensors():
    kiln.reset()
    model = nn.Linear(3, 2)
    compiled = kiln.compile(model, backend="aot_eager")
    x = torch.randn(4, 3)
    with torch.inference_mode():
        out, expected = compiled(x), model(x)
    torch.testing.assert_close(out, expected)
    assert out.is_inference() and not out.requires_grad


def test_integer_outputs_are_not_differentiable():
    def f(x, w):
        y = x @ w
        return y, y.argmax(-1)

    kiln.reset()
    compiled = kiln.compile(f, backend=_Counting())
    x, w = torch.randn(3, 4), torch.randn(4, 5, requires_grad=True)
    y, idx = compiled(x, w)
    assert y.requires_grad and not idx.requires_grad and idx.dtype == torch.int64
    y.sum().backward()
    torch.testing.assert_close(w.grad, x.t() @ torch.ones(3, 5))


def test_backward_frees_each_saved_activation_after_its_last_use():
    # The backward graph gets the only references to what the forward saved and frees each
    # after its last use (as eager's autograd frees a node's saved tensors once it ran), not
    # all of them when the whole backward returns: the peak memory of a training step.
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [nn.Linear(32, 32), nn.GELU()]
    model = nn.Sequential(*layers)
    x = torch.randn(8, 32)
    kiln.reset()
    compiled = kiln.compile(model, backend="aot_eager")
    compiled(x).sum().backward()
    model.zero_grad()

    ops, deaths, saved = [0], [], []

    class CountOps(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ops[0] += 1
            return func(*args, **(kwargs or {}))

    alive_anyway = {p.untyped_storage().data_ptr() for p in (x, *model.parameters())}

    def pack(t):
        if t.untyped_storage().data_ptr() not in alive_anyway:  # activations, not parameters
            saved.append(1)
            weakref.finalize(t, lambda: deaths.append(ops[0]))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = compiled(x)
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    loss = out.sum()
    del out
    with CountOps():
        loss.backward()
    total = ops[0]
    assert len(saved) >= 6 and len(deaths) == len(saved), (len(saved), deaths, total)
    # each dies at its own point of the backward (before: all at its end); the last layer's,
    # used first, in the first half of it
    assert len(set(deaths)) == len(deaths) and min(deaths) < total // 2, (deaths, total)
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for got, expected in zip(grads, (p.grad for p in model.parameters()), strict=True):
        torch.testing.assert_close(got, expected)



def test_saved_tuples_are_freed_after_the_backward_while_the_loss_lives():
    # A saved value the backward takes whole as a tuple (LayerNorm's output, mean and rstd)
    # goes through save_for_backward as every saved tensor does: freed once the backward ran,
    # not kept on ctx for as long as the caller holds the loss.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 4))
    x = torch.randn(5, 16)
    kiln.reset()
    compiled = kiln.compile(model, backend="aot_eager")
    shapes, alive = [], []
    alive_anyway = {p.untyped_storage().data_ptr() for p in (x, *model.parameters())}

    def pack(t):
        if t.untyped_storage().data_ptr() not in alive_anyway:  # activations, not parameters
            shapes.append(tuple(t.shape))
            alive.append(weakref.ref(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = compiled(x).square().sum()
    assert (5, 1) in shapes, shapes  # LayerNorm's mean and rstd
    loss.backward()
    assert [ref() for ref in alive if ref() is not None] == []
    reference = copy.deepcopy(model)
    reference.zero_grad()
    reference(x).square().sum().backward()
    for got, expected in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got.grad, expected.grad)
