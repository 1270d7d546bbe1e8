"""Random ops inside compiled training graphs keep eager's numbers (the generator is eager's,
drawn in the same order) and compile at all: two ops whose ATen calls torch's C++ makes
with a defaulted argument left out (``bernoulli_(x, 0.5)`` of Dropout2d) or an argument named
like a Python keyword (``uniform_``'s ``from``) used to fail in aotgrad's functional graph."""

import torch
from torch import nn

import kiln


def test_dropout2d_in_training_gives_eagers_numbers_and_gradients():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Dropout2d(0.5))
    x = torch.randn(2, 3, 8, 8)
    torch.manual_seed(1)
    expected = model(x)
    expected.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    torch.manual_seed(1)
    got = kiln.compile(model)(x)
    got.sum().backward()
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close([p.grad for p in model.parameters()], grads)
    assert kiln.session().stats.breaks == [] and kiln.session().stats.unique_graphs == 1


def _noisy(x):
    return torch.empty(3).uniform_(-1.0, 1.0) + x


def test_uniform_with_its_from_argument_compiles():
    x = torch.zeros(3)
    torch.manual_seed(2)
    expected = _noisy(x)
    torch.manual_seed(2)
    got = kiln.compile(_noisy)(x)
    torch.testing.assert_close(got, expected)
    assert kiln.session().stats.breaks == [] and kiln.session().stats.unique_graphs == 1
