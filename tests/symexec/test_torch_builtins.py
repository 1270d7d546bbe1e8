"""Builtin rules at capture level: eager's errors for calls of the wrong shape, builtins that
must not fold at trace time, and the frame namespace builtins."""

import inspect

import pytest
import torch

import kiln.symexec._opcodes  # noqa: F401  (the rules)
from kiln.symexec import Unsupported, capture
from kiln.symexec._unsupported import TracedException
from kiln.symexec.variables._builtins import call_shape_error
from kiln.symexec.variables._constant import ConstantVariable


def _frame(fn, *args):
    bound = inspect.signature(fn).bind(*args)
    return fn.__code__, dict(bound.arguments), fn.__globals__


def _run(cap, fn, *args):
    code = cap.replacement(cap.graph_module.forward)
    return type(fn)(code, fn.__globals__, None, None, fn.__closure__)(*args)


@pytest.mark.parametrize(("fn", "nargs", "kwargs"), [
    (isinstance, 2, ("invalid",)), (len, 0, ()), (len, 2, ()), (sorted, 0, ()), (getattr, 1, ()),
    (zip, 1, ("short",)), (iter, 3, ()), (range, 0, ()), (type, 2, ()), (enumerate, 1, ("begin",)),
])
def test_a_call_of_the_wrong_shape_raises_eagers_type_error(fn, nargs, kwargs):
    args = [ConstantVariable(1)] * nargs
    error = call_shape_error(fn, args, dict.fromkeys(kwargs, ConstantVariable(1)))
    with pytest.raises(TypeError) as eager:
        fn(*[1] * nargs, **dict.fromkeys(kwargs, 1))
    assert isinstance(error, TracedException) and error.exc_type is TypeError
    assert error.exc.args[0].as_constant() == str(eager.value)


@pytest.mark.parametrize(("fn", "nargs", "kwargs"), [
    (isinstance, 2, ()), (len, 1, ()), (sorted, 1, ("key", "reverse")), (enumerate, 0, ("iterable",)),
    (zip, 3, ("strict",)), (max, 1, ("default",)), (dict, 1, ("a", "b")), (print, 4, ("sep",)),
])
def test_a_well_formed_call_is_left_to_its_rule(fn, nargs, kwargs):
    assert call_shape_error(fn, [ConstantVariable(1)] * nargs, dict.fromkeys(kwargs, ConstantVariable(1))) is None


def test_builtins_that_read_the_calling_frame_are_not_folded():
    def f(x):
        return x + len(globals())

    with pytest.raises(Unsupported, match="globals"):
        capture(*_frame(f, torch.ones(2)))


def test_locals_is_the_traced_frames_namespace():
    def f(x, unused=3):
        y = x * 2
        names = sorted(locals())
        return y, names

    cap = capture(*_frame(f, torch.ones(2), 3))
    out = _run(cap, f, torch.ones(2), 3)
    assert out[1] == ["unused", "x", "y"]
    torch.testing.assert_close(out[0], torch.ones(2) * 2)
