"""User torch modes and saved-tensors hooks never see fake ops, and come back exactly."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from kiln.symshapes import ShapeEnv
from kiln.symshapes.bridge import FakeTensor, FakeTensorMode, from_real, hide_user_state


class RecordingDispatch(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


class RecordingFunction(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def _stacks():
    c = torch._C
    return (
        [c._get_function_stack_at(i) for i in range(c._len_torch_function_stack())],
        [c._get_dispatch_stack_at(i) for i in range(c._len_torch_dispatch_stack())],
        c._autograd._top_saved_tensors_default_hooks(True),
        str(c._dispatch_tls_local_include_set()),
        str(c._dispatch_tls_local_exclude_set()),
    )


def _fake_work(mode: FakeTensorMode, x_real: torch.Tensor, w_real: torch.Tensor) -> FakeTensor:
    x = from_real(mode, x_real, dynamic_dims=(0,), name="x")
    w = from_real(mode, w_real, name="w")
    with mode:
        y = (x @ w).relu().sum()  # autograd saves tensors: pack hooks would run
        torch.autograd.grad(y, (x, w))
    return y


def test_fake_ops_are_invisible_to_user_modes_and_hooks():
    packed = []
    dispatch_a, dispatch_b, function = RecordingDispatch(), RecordingDispatch(), RecordingFunction()

    def pack(t):
        packed.append(type(t))
        return t

    x_real, w_real = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), function, dispatch_a, \
            torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), dispatch_b:
        before = _stacks()
        y = _fake_work(FakeTensorMode(ShapeEnv()), x_real, w_real)
        assert _stacks() == before
        assert isinstance(y, FakeTensor)
        assert function.seen == dispatch_a.seen == dispatch_b.seen == packed == []
        real = (x_real * x_real).sum()  # the modes and hooks still work after
    assert real.requires_grad
    assert "aten.mul.Tensor" in dispatch_b.seen and "aten.mul.Tensor" in dispatch_a.seen
    assert function.seen and packed


def test_user_state_comes_back_after_errors_and_nesting():
    dispatch, function = RecordingDispatch(), RecordingFunction()
    mode = FakeTensorMode(ShapeEnv())
    x = from_real(mode, torch.randn(3, 4))
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t), dispatch, function:
        before = _stacks()
        with pytest.raises((RuntimeError, ValueError)), mode, mode:
            x @ x
        assert _stacks() == before
        with hide_user_state():
            assert torch._C._len_torch_function_stack() == 0
            assert torch._C._len_torch_dispatch_stack() == 0
            assert torch._C._autograd._top_saved_tensors_default_hooks(True) is None
            with mode:
                x + 1
            with pytest.raises(ZeroDivisionError), hide_user_state():
                _ = 1 / 0
        assert _stacks() == before
        with hide_user_state(dispatch_modes=False):
            assert torch._C._len_torch_dispatch_stack() == 1
            assert torch._C._len_torch_function_stack() == 0
        assert _stacks() == before
    assert dispatch.seen == [] and function.seen == []


def test_default_device_mode_stays_for_fake_factories():
    function = RecordingFunction()
    mode = FakeTensorMode()
    torch.set_default_device("meta")
    try:
        with function:
            with mode:
                made = torch.empty(2, 3)
            assert function.seen == []
    finally:
        torch.set_default_device(None)
    assert made.device.type == "meta"
