"""Calls that act on the autograd engine's state of a tensor object (``backward``,
``torch.autograd.backward``, ``retain_grad``, ``register_hook``) inside a compiled function: each
is a graph break and runs eagerly, as under torch.compile. Recorded as a graph op they acted
on the trace's own tensor (or were dropped as dead code), and ``.grad`` stayed None: a wrong
answer."""

import torch
from torch import nn

import kiln

W = torch.ones(3, requires_grad=True)


def _breaks():
    return [str(b).splitlines()[0] for b in kiln.session().stats.breaks]


def _train_step(model, x):
    loss = model(x).pow(2).mean()
    loss.backward()
    return loss


def test_backward_inside_a_compiled_function_accumulates_into_grad():
    torch.manual_seed(0)
    model, x = nn.Linear(8, 8), torch.randn(4, 8)
    expected = _train_step(model, x)
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()  # .grad None again
    got = kiln.compile(_train_step)(model, x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close([p.grad for p in model.parameters()], grads)
    assert _breaks() == ["tensor %mean.backward() acts on the autograd engine's state: it runs eagerly"]
    # a second call accumulates, as eager does
    kiln.compile(_train_step)(model, x)
    torch.testing.assert_close([p.grad for p in model.parameters()], [2 * g for g in grads])


def _engine_backward(x):
    loss = (x * W).sum()
    torch.autograd.backward(loss)
    return loss


def test_torch_autograd_backward_breaks():
    W.grad = None
    got = kiln.compile(_engine_backward)(torch.full((3,), 2.0))
    assert got.item() == 6.0
    torch.testing.assert_close(W.grad, torch.full((3,), 2.0))
    assert len(_breaks()) == 1 and "runs the autograd engine" in _breaks()[0]
    W.grad = None


def _retained(x):
    y = x * W
    y.retain_grad()
    y.sum().backward()
    return y.grad


def test_retain_grad_then_backward_gives_the_intermediate_grad():
    W.grad = None
    got = kiln.compile(_retained)(torch.ones(3))
    torch.testing.assert_close(got, torch.ones(3))
    torch.testing.assert_close(W.grad, torch.ones(3))
    assert [b.split(".")[1].split("(")[0] for b in _breaks()[:2]] == ["retain_grad", "backward"]
    W.grad = None


def _double(grad):
    return grad * 2


def _hooked(x):
    y = x * W
    y.register_hook(_double)
    return y * 3


def test_a_hook_registered_inside_runs_on_the_backward():
    W.grad = None
    out = kiln.compile(_hooked)(torch.ones(3))
    out.sum().backward()
    torch.testing.assert_close(W.grad, torch.full((3,), 6.0))  # 3, doubled by the hook
    assert len(_breaks()) == 1 and "register_hook" in _breaks()[0]
    W.grad = None
