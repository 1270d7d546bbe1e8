"""Tracing is invisible to the user's torch modes and saved-tensors hooks: a mode or hook
active around a compiled call sees what the compiled code runs, as it sees eager, on the
compiling call and on cache hits, and the stacks are exactly as they were after every call,
also when the compile fails (issue 11 item 16)."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import kiln
from kiln.symexec import Unsupported


class DispatchLog(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, tuple[str, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append((str(func), tuple(type(a).__name__ for a in args)))
        return func(*args, **(kwargs or {}))


class FunctionLog(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, tuple[str, ...]]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append((getattr(func, "__name__", str(func)), tuple(type(a).__name__ for a in args)))
        return func(*args, **(kwargs or {}))


class PackLog:
    """Default saved-tensors hooks recording the type of every tensor packed."""

    def __init__(self) -> None:
        self.packed: list[str] = []

    def hooks(self):
        def pack(t):
            self.packed.append(type(t).__name__)
            return t

        return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)


def _stacks():
    c = torch._C
    return (
        [c._get_function_stack_at(i) for i in range(c._len_torch_function_stack())],
        [c._get_dispatch_stack_at(i) for i in range(c._len_torch_dispatch_stack())],
        c._autograd._top_saved_tensors_default_hooks(True),
        str(c._dispatch_tls_local_include_set()),
        str(c._dispatch_tls_local_exclude_set()),
    )


def mlp(x, w1, w2):
    return (torch.tanh(x @ w1) @ w2).sigmoid().sum()


def _args():
    torch.manual_seed(0)
    return (torch.randn(3, 4, requires_grad=True), torch.randn(4, 6, requires_grad=True),
            torch.randn(6, 2, requires_grad=True))


@pytest.mark.parametrize("kind", ["dispatch", "function", "saved_tensors_hooks", "all_nested"])
def test_user_modes_and_hooks_see_what_eager_shows(kind, counting):
    args = _args()
    compiled = kiln.compile(mlp, backend=counting)

    # the same mode and hook objects every call (new hook functions would be new global
    # state for the guards, and a recompile each time)
    logs = {"dispatch": DispatchLog(), "function": FunctionLog(), "pack": PackLog(), "pack2": PackLog()}
    hooks = {"pack": logs["pack"].hooks(), "pack2": logs["pack2"].hooks()}

    def observed(fn):
        for log in logs.values():
            getattr(log, "seen", getattr(log, "packed", None)).clear()
        with hooks["pack"] if kind in ("saved_tensors_hooks", "all_nested") else _nothing():  # noqa: SIM117  (one line per layer)
            with logs["function"] if kind in ("function", "all_nested") else _nothing():
                with logs["dispatch"] if kind in ("dispatch", "all_nested") else _nothing():
                    with hooks["pack2"] if kind == "all_nested" else _nothing():
                        before = _stacks()
                        out = fn(*args)
                        assert _stacks() == before
                        out.backward()
        return out, {k: list(getattr(v, "seen", getattr(v, "packed", None))) for k, v in logs.items()}

    expected, eager_logs = observed(mlp)
    grads = [a.grad.clone() for a in args]
    for _ in range(3):  # the compiling call, then cache hits
        for a in args:
            a.grad = None
        got, kiln_logs = observed(compiled)
        torch.testing.assert_close(got, expected)
        for a, g in zip(args, grads, strict=True):
            torch.testing.assert_close(a.grad, g)
        assert kiln_logs == eager_logs
    # mlp compiled once: the modes and hooks cause no recompiles of it (the user's own mode
    # and hook methods are frames kiln may compile too; they are not counted here)
    assert sum("def forward(x, w1, w2)" in gm.code for gm in counting.graphs) == 1


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _breaks(x):
    y = x * 2
    if y.sum() > 0:
        return y.sin()
    return y.cos()


def test_graph_breaks_show_no_fake_ops():
    x = torch.randn(5, requires_grad=True)
    compiled = kiln.compile(_breaks, backend="eager")
    dispatch, function, packs = DispatchLog(), FunctionLog(), PackLog()
    with packs.hooks(), function, dispatch:
        before = _stacks()
        torch.testing.assert_close(compiled(x), _breaks(x))
        assert _stacks() == before
    seen = [types for _, types in dispatch.seen + function.seen]
    assert all("FakeTensor" not in types for types in seen)
    assert set(packs.packed) <= {"Tensor"}


def test_stacks_restored_when_the_compile_fails():
    x = torch.randn(5)
    strict = kiln.compile(_breaks, backend="eager", fullgraph=True)
    dispatch, function, packs = DispatchLog(), FunctionLog(), PackLog()
    with packs.hooks(), function, dispatch:
        before = _stacks()
        with pytest.raises(Unsupported):
            strict(x)
        assert _stacks() == before
        y = x * 2  # the modes still see new work
    assert y.shape == x.shape
    assert dispatch.seen[-1][0] == "aten.mul.Tensor" and "mul" in function.seen[-1][0]
    assert all("FakeTensor" not in types for _, types in dispatch.seen + function.seen)


def test_default_device_still_applies_in_the_trace():
    def make(n):
        return torch.zeros(n, 2) + 1

    compiled = kiln.compile(make, backend="eager")
    torch.set_default_device("meta")
    try:
        with FunctionLog() as log:
            got = compiled(3)
        assert got.device.type == "meta"
        assert all("FakeTensor" not in types for _, types in log.seen)
    finally:
        torch.set_default_device(None)
    assert compiled(3).device.type == "cpu"
