"""ModuleStructureMatch and friends on real nn.Modules, as a tracer would guard them."""

import torch

from kiln.guards import (
    AttrSource,
    EqualsMatch,
    GuardSet,
    ItemSource,
    LocalSource,
    ModuleStructureMatch,
    TensorMatch,
    evaluate,
)

SELF = LocalSource("self")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        self.head = torch.nn.Linear(4, 2)
        self.register_buffer("scale", torch.ones(2))
        self.flag = True


def net_guards(net):
    gs = GuardSet([ModuleStructureMatch.from_module(SELF, net),
                   EqualsMatch(AttrSource(SELF, "flag"), net.flag)])
    mods = AttrSource(SELF, "_modules")
    for name, mod in net._modules.items():
        src = ItemSource(mods, name)
        gs.add(ModuleStructureMatch.from_module(src, mod))
    head = ItemSource(mods, "head")
    for name, p in net.head._parameters.items():
        gs.add(TensorMatch.from_tensor(ItemSource(AttrSource(head, "_parameters"), name), p))
    gs.add(TensorMatch.from_tensor(ItemSource(AttrSource(SELF, "_buffers"), "scale"), net.scale))
    return gs


def test_holds_on_the_traced_module_and_an_identical_one():
    net = Net()
    gs = net_guards(net)
    check = gs.compile()
    assert check({"self": net})
    assert check({"self": Net()})
    assert gs.explain({"self": net}) is None


def test_structure_fields():
    net = Net()
    guard = ModuleStructureMatch.from_module(SELF, net)
    assert guard.module_type is Net and guard.training is True
    assert guard.modules == ("body", "head") and guard.parameters == () and guard.buffers == ("scale",)


def test_each_change_is_caught_and_explained():
    def eval_mode(n):
        n.eval()

    def new_param(n):
        n.extra = torch.nn.Parameter(torch.ones(1))

    def new_module(n):
        n.tail = torch.nn.Identity()

    def swap_head(n):
        n.head = torch.nn.Linear(4, 3)

    def replace_weight(n):
        n.head.weight = torch.nn.Parameter(torch.randn(2, 4).t().contiguous().t())

    def grow_buffer(n):
        n.scale = torch.ones(3)

    def flip_flag(n):
        n.flag = False

    def body_train_only(n):
        n.body.eval()

    cases = [
        (eval_mode, "module L['self'] training: expected True, got False"),
        (new_param, "module L['self'] parameters names: expected [], got ['extra']"),
        (new_module, "module L['self'] modules names: expected ['body', 'head'], got ['body', 'head', 'tail']"),
        (swap_head, "tensor L['self']._modules['head']._parameters['weight'] size(0): expected 2, got 3"),
        (replace_weight, "tensor L['self']._modules['head']._parameters['weight'] stride(0): expected 4, got 1"),
        (grow_buffer, "tensor L['self']._buffers['scale'] size(0): expected 2, got 3"),
        (flip_flag, "L['self'].flag == True: expected True, got False"),
        (body_train_only, "module L['self']._modules['body'] training: expected True, got False"),
    ]
    for change, text in cases:
        net = Net()
        gs = net_guards(net)
        check, py_check = gs.compile(), gs.compile(native=False)
        change(net)
        assert check({"self": net}) is False, text
        assert py_check({"self": net}) is False, text
        assert gs.explain({"self": net}) == text


def test_subclass_module_fails_type():
    class Sub(Net):
        pass

    gs = net_guards(Net())
    assert not gs.compile()({"self": Sub()})
    assert gs.explain({"self": Sub()}).startswith("module L['self'] type: expected ")


def test_reading_structure_runs_no_user_getattr():
    class Noisy(torch.nn.Module):
        calls = 0

        def __getattr__(self, name):
            type(self).calls += 1
            return super().__getattr__(name)

    m = Noisy()
    check = GuardSet([ModuleStructureMatch.from_module(SELF, m)]).compile()
    Noisy.calls = 0
    assert check({"self": m})
    assert Noisy.calls == 0
    assert evaluate(ModuleStructureMatch.from_module(SELF, m), {"self": m}) is None


def test_no_module_hooks_fails_on_any_hook_and_explains():
    import torch

    from kiln.guards import GuardSet, LocalSource, ModuleStructureMatch, NoModuleHooks

    m = torch.nn.Linear(2, 2)
    src = LocalSource("m")
    gs = GuardSet([ModuleStructureMatch.from_module(src, m), NoModuleHooks(src)])
    for native in (True, False):
        check = gs.compile({}, native=native)
        assert check({"m": m})
        for register in (m.register_forward_hook, m.register_forward_pre_hook,
                         m.register_full_backward_hook):
            handle = register(lambda *a: None)
            try:
                assert not check({"m": m})
                assert "hooks: expected none" in gs.explain({"m": m})
            finally:
                handle.remove()
            assert check({"m": m})
