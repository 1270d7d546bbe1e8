"""NNModuleVariable on real frames: which guards a module read or call installs, and that
they fail exactly when eager would take another path (capture-level; whole-pipeline cases
are in tests/e2e/test_module_semantics.py)."""

import inspect
import types

import pytest
import torch
from torch import nn

import kiln.symexec._opcodes  # noqa: F401  (the rules)
from kiln.guards import DictKeysMatch, KeyAbsent, NoModuleHooks
from kiln.symexec import Unsupported, capture


def _frame(fn, *args):
    bound = inspect.signature(fn).bind(*args)
    L = dict(bound.arguments)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        L[name] = cell.cell_contents
    return fn.__code__, L, fn.__globals__


def _run(cap, fn, *args):
    code = cap.replacement(cap.graph_module.forward)
    return types.FunctionType(code, fn.__globals__, None, None, fn.__closure__)(*args)


class Child(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def helper(self, x):
        return x * 2

    def forward(self, x):
        return self.helper(self.fc(x))


def call_child(m, x):
    return m(x)


def _described(cap):
    return {g.describe() for g in cap.guards}


def test_a_call_guards_forward_and_each_method_absent_from_the_instance_dict():
    m, x = Child(), torch.randn(2)
    cap = capture(*_frame(call_child, m, x))
    text = _described(cap)
    assert "'forward' not in L['m'].__dict__" in text
    assert "'helper' not in L['m'].__dict__" in text
    assert "'fc' not in L['m'].__dict__" in text  # a member, found after the instance dict
    assert "L['m'] has no module hooks" in text
    check = cap.guards.compile(call_child.__globals__)
    assert check({"m": m, "x": x})
    m.forward = types.MethodType(lambda self, x: x, m)
    assert not check({"m": m, "x": x})
    del m.forward
    m.__dict__["helper"] = torch.neg
    assert not check({"m": m, "x": x})
    del m.__dict__["helper"]
    assert check({"m": m, "x": x})


def test_a_module_with_hooks_guards_each_of_its_hook_tables_by_keys():
    m, x = Child(), torch.randn(2)
    m.register_forward_hook(lambda mod, args, out: out + 1)
    cap = capture(*_frame(call_child, m, x))
    keyed = {str(g.source) for g in cap.guards if isinstance(g, DictKeysMatch)}
    assert {f"L['m'].{n}" for n in ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks",
                                    "_backward_hooks")} <= keyed
    assert not any(isinstance(g, NoModuleHooks) and str(g.source) == "L['m']" for g in cap.guards)
    torch.testing.assert_close(_run(cap, call_child, m, x), m(x))
    check = cap.guards.compile(call_child.__globals__)
    handle = m.register_forward_pre_hook(lambda mod, args: None)
    assert not check({"m": m, "x": x})
    handle.remove()
    assert check({"m": m, "x": x})


def test_backward_hooks_are_unsupported_not_skipped():
    m, x = Child(), torch.randn(2)
    m.register_full_backward_hook(lambda mod, gin, gout: None)
    with pytest.raises(Unsupported, match="backward hooks"):
        capture(*_frame(call_child, m, x))


def test_members_are_reached_through_their_dicts_after_the_instance_dict():
    m, x = Child(), torch.randn(2)
    cap = capture(*_frame(call_child, m, x))
    assert "L['m']._modules['fc']._parameters['weight']" in {str(s) for s in cap.input_sources}
    assert not any(isinstance(g, KeyAbsent) and "_compiled_call_impl" in g.describe() for g in cap.guards)


def test_torch_container_methods_are_modelled_and_overrides_inlined():
    class Backwards(nn.ModuleList):
        def __iter__(self):
            return iter(reversed(list(self._modules.values())))

    def run_all(layers, x):
        for layer in layers:
            x = layer(x) * 2
        return x + len(layers)

    plain = nn.ModuleList([nn.Linear(2, 2), nn.Tanh()])
    backwards = Backwards([nn.Linear(2, 2), nn.Tanh()])
    x = torch.randn(2)
    for layers in (plain, backwards):
        cap = capture(*_frame(run_all, layers, x))
        torch.testing.assert_close(_run(cap, run_all, layers, x), run_all(layers, x))


def test_nn_module_getattr_reached_through_super_is_the_modelled_lookup():
    class Fallback(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(2))

        def __getattr__(self, name):
            if name == "alias":
                return self.w * 3
            return super().__getattr__(name)

    def f(m, x):
        return x + m.alias + m.w + getattr(m, "missing", 1.0)

    m, x = Fallback(), torch.ones(2)
    cap = capture(*_frame(f, m, x))
    torch.testing.assert_close(_run(cap, f, m, x), f(m, x))
    assert "L['m']._parameters['w']" in {str(s) for s in cap.input_sources}
