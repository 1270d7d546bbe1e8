"""In-place ops, ``inplace=`` flags and ``out=`` tensors: every mutation lands on the right
tensor (intermediates, inputs, views of inputs), the caller sees a changed input after the
call, and an in-place op gives back the very object it changed."""

import copy

import pytest
import torch
import torch.nn.functional as F
from e2e_support import CountingBackend
from torch import nn

import kiln


def _compare(fn, *args):
    """Run eager and compiled on copies of ``args``: same results, same mutated inputs."""
    eager_args, kiln_args = copy.deepcopy(args), copy.deepcopy(args)
    backend = CountingBackend()
    expected = fn(*eager_args)
    got = kiln.compile(fn, backend=backend)(*kiln_args)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(kiln_args, eager_args)  # inputs changed in place alike
    return got, backend


def _x():
    return torch.tensor([-1.5, 0.5, 2.0, -3.0, 7.0])


INPLACE_FLAG = {
    "relu": lambda a: F.relu(a, inplace=True),
    "relu_positional": lambda a: F.relu(a, True),
    "relu6": lambda a: F.relu6(a, inplace=True),
    "leaky_relu": lambda a: F.leaky_relu(a, 0.2, inplace=True),
    "elu": lambda a: F.elu(a, inplace=True),
    "selu": lambda a: F.selu(a, inplace=True),
    "celu": lambda a: F.celu(a, inplace=True),
    "hardtanh": lambda a: F.hardtanh(a, -1.0, 1.0, inplace=True),
    "hardsigmoid": lambda a: F.hardsigmoid(a, inplace=True),
    "hardswish": lambda a: F.hardswish(a, inplace=True),
    "silu": lambda a: F.silu(a, inplace=True),
    "mish": lambda a: F.mish(a, inplace=True),
    "threshold": lambda a: F.threshold(a, 0.6, 9.0, inplace=True),
    "rrelu_eval": lambda a: F.rrelu(a, training=False, inplace=True),
    "dropout": lambda a: F.dropout(a, 1.0, True, inplace=True),
    "dropout_eval": lambda a: F.dropout(a, 0.5, False, inplace=True),
    "alpha_dropout": lambda a: F.alpha_dropout(a, 1.0, True, inplace=True),
    "feature_alpha_dropout": lambda a: F.feature_alpha_dropout(a[None, :, None], 1.0, True, inplace=True),
    "dropout1d": lambda a: F.dropout1d(a[None, :, None], 1.0, True, inplace=True),
    "torch.relu_": torch.relu_,
    "F.relu_": F.relu_,
    "F.elu_": F.elu_,
    "F.leaky_relu_": F.leaky_relu_,
    "F.hardtanh_": F.hardtanh_,
    "Tensor.relu_": torch.Tensor.relu_,
    "method": lambda a: a.sigmoid_(),
}


@pytest.mark.parametrize("act", INPLACE_FLAG.values(), ids=INPLACE_FLAG.keys())
def test_inplace_flag_changes_an_intermediate(act):
    def f(x):
        a = x * 2
        act(a)
        return a

    _compare(f, _x())


@pytest.mark.parametrize("act", INPLACE_FLAG.values(), ids=INPLACE_FLAG.keys())
def test_inplace_flag_changes_an_input_the_caller_sees(act):
    def f(x):
        act(x)
        return x + 0

    _compare(f, _x())


@pytest.mark.parametrize("act", INPLACE_FLAG.values(), ids=INPLACE_FLAG.keys())
def test_inplace_flag_on_a_view_of_an_input(act):
    def f(x):
        act(x[1:])
        return x * 1

    _compare(f, _x())


@pytest.mark.parametrize("act", INPLACE_FLAG.values(), ids=INPLACE_FLAG.keys())
def test_a_view_taken_before_sees_the_change(act):
    def f(x):
        v = x.view(5)
        _ = (x * 1)[2:]
        act(x)
        return v + 0

    _compare(f, _x())


@pytest.mark.parametrize("act", INPLACE_FLAG.values(), ids=INPLACE_FLAG.keys())
def test_inplace_flag_returns_its_argument(act):
    def f(x):
        a = x * 2
        return act(a) is a or act(a)._base is a

    got, _ = _compare(f, _x())
    assert got is True


MODULES = [nn.ReLU(inplace=True), nn.ReLU6(inplace=True), nn.LeakyReLU(0.1, inplace=True),
           nn.ELU(inplace=True), nn.SELU(inplace=True), nn.CELU(inplace=True), nn.Hardtanh(inplace=True),
           nn.Hardsigmoid(inplace=True), nn.Hardswish(inplace=True), nn.SiLU(inplace=True), nn.Mish(inplace=True),
           nn.Threshold(0.1, 5.0, inplace=True), nn.Dropout(1.0, inplace=True), nn.AlphaDropout(1.0, inplace=True)]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: type(m).__name__)
def test_modules_built_with_inplace_change_the_input(module):
    def f(x):
        y = module(x)
        return x + 0, y is x

    _, backend = _compare(f, _x())  # ``y is x`` as eager says (AlphaDropout(1.0) gives a new tensor)
    assert len(backend.graphs) == 1


def test_inplace_modules_inside_a_model_change_intermediates_and_input():
    model = nn.Sequential(nn.Linear(5, 5), nn.ReLU(inplace=True), nn.Linear(5, 5), nn.Hardtanh(inplace=True))

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.ReLU(inplace=True)
            self.model = model

        def forward(self, x):
            self.act(x)
            return self.model(x)

    w = Wrap()
    x = torch.randn(3, 5)
    expected_x = x.clone()
    expected = w(expected_x)
    got = kiln.compile(w, backend="eager")(x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x, expected_x)


# -- out= -------------------------------------------------------------------------------------

def test_out_on_an_intermediate():
    def f(a):
        o = torch.empty(5)
        r = torch.add(a, 1, out=o)
        return o, r is o

    got, _ = _compare(f, _x())
    assert got[1] is True


def test_out_on_an_input_is_the_input():
    def f(a, o):
        return torch.mul(a, 3, out=o) is o

    got, _ = _compare(f, _x(), torch.empty(5))
    assert got is True


def test_out_on_a_view_of_an_input():
    def f(a, o):
        torch.sub(a, 1, out=o[2:4])
        return o * 1

    _compare(f, torch.randn(2), torch.zeros(5))


@pytest.mark.parametrize("op", ["mm", "sum", "cat", "max", "sort", "clamp"])
def test_out_forms_write_the_given_tensors(op):
    def f(a, b, o, i):
        if op == "mm":
            r = torch.mm(a, b, out=o)
        elif op == "sum":
            r = torch.sum(a, 1, out=o[:, 0])
        elif op == "cat":
            r = torch.cat([a[:, :1], b[:3, :1]], 1, out=o)
        elif op == "max":
            r = torch.max(a, 1, out=(o[:, 1], i))
            return r[0] is not None, r[1] is i, o + 0
        elif op == "sort":
            r = torch.sort(a[:, 0], out=(o[:, 0], i))
            return r[1] is i, o + 0
        else:
            r = torch.clamp(a[:, :2], -0.5, 0.5, out=o)
        return r is o or r._base is o, o.sum()

    a, b = torch.randn(3, 4), torch.randn(4, 2)
    _compare(f, a, b, torch.zeros(3, 2), torch.zeros(3, dtype=torch.long))


def test_print_before_an_inplace_flag_shows_the_old_values(capsys):
    def f(x):
        print(x)
        F.relu(x, inplace=True)
        return x

    x = torch.tensor([-1.0, 1.0])
    kiln.compile(f, backend="eager")(x)
    assert "-1." in capsys.readouterr().out
    torch.testing.assert_close(x, torch.tensor([0.0, 1.0]))


@pytest.mark.parametrize("case", ["foreach_add_", "foreach_mul_list", "init_constant_", "init_zeros_view",
                                  "setitem_and_slice_iadd"])
def test_other_inplace_spellings_change_their_tensors(case):
    def f(x, y):
        if case == "foreach_add_":
            torch._foreach_add_([x, y], 1.0)
        elif case == "foreach_mul_list":
            torch._foreach_mul_([x, y], [2.0, 3.0])
        elif case == "init_constant_":
            torch.nn.init.constant_(x, 3.0)
        elif case == "init_zeros_view":
            torch.nn.init.zeros_(x[0:1])
        else:
            x[0] = 5.0
            y[1:] += 1
        return x + 0, y * 1

    _compare(f, torch.ones(3), torch.ones(3))
