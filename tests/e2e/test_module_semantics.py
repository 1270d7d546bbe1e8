"""nn.Module semantics under kiln: attribute lookup order, ``forward`` reassigned after a
compile, ``__call__`` overrides and module hooks (issue 11, items 11-13).

Every case runs the same model eagerly and compiled and compares results; the number of
graphs, breaks and cache entries (recompiles) is asserted where it says something. Models are
called as submodules of a traced frame (the path kiln models itself) and, where it differs,
as the top-level module given to kiln.compile.
"""

import functools
import types

import pytest
import torch
from e2e_support import CountingBackend, assert_same
from torch import nn

import kiln
import kiln.frameeval as fe


class Holder(nn.Module):
    """Calls its child once: the child's call is traced inside Holder.forward."""

    def __init__(self, child):
        super().__init__()
        self.child = child

    def forward(self, x):
        return self.child(x) + 0


def entries(module_or_fn):
    """Cache entries of a module class's forward (or a function): one per compile."""
    code = module_or_fn.forward.__code__ if isinstance(module_or_fn, type) else module_or_fn.__code__
    return len(fe.get_cache_entries(code))


def run_both(model, *args, fullgraph=True, backend=None):
    """Eager and compiled results of one call (compiled first: eager may not change state)."""
    compiled = kiln.compile(model, backend=backend or CountingBackend(), fullgraph=fullgraph)
    got = compiled(*args)
    return compiled, got, model(*args)


# -- item 11: attribute lookup order -------------------------------------------------------------

class MethodAndSubmodule(nn.Module):
    """A method and a submodule (in ``_modules``) of the same name: eager calls the method."""

    def __init__(self):
        super().__init__()
        self.activation = nn.ReLU()  # stored in _modules; the class method still wins

    def activation(self, x):
        return x * 2 + 1

    def forward(self, x):
        return self.activation(x)


@pytest.mark.parametrize("nest", [False, True], ids=["top", "submodule"])
def test_class_method_wins_over_a_submodule_of_the_same_name(nest):
    model = MethodAndSubmodule()
    assert "activation" in model._modules
    model = Holder(model) if nest else model
    x = torch.linspace(-2, 2, 5)
    _, got, expected = run_both(model, x)
    assert_same(got, expected)
    assert_same(got, x * 2 + 1 + 0 * nest)


class PropertyAndMembers(nn.Module):
    """Properties named like a submodule, a parameter and a buffer: properties win."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)  # Module.__setattr__ stores it in _modules anyway
        self._parameters["scale"] = nn.Parameter(torch.full((3,), 5.0))
        self._buffers["shift"] = torch.full((3,), 7.0)
        self.real_scale = nn.Parameter(torch.full((3,), 2.0))

    @property
    def proj(self):
        return torch.neg

    @proj.setter
    def proj(self, value):
        raise AssertionError("not called: Module.__setattr__ registers modules directly")

    @property
    def scale(self):
        return self.real_scale

    @property
    def shift(self):
        return 1.0

    def forward(self, x):
        return self.proj(x) * self.scale + self.shift


@pytest.mark.parametrize("nest", [False, True], ids=["top", "submodule"])
def test_properties_win_over_parameters_buffers_and_submodules(nest):
    model = PropertyAndMembers()
    model = Holder(model) if nest else model
    x = torch.arange(3.0)
    _, got, expected = run_both(model, x)
    assert_same(got, expected)
    torch.testing.assert_close(got.detach(), -x * 2 + 1)


class ClassAttributes(nn.Module):
    """Plain class attributes (an int, a tensor, a function) over members of the same name."""

    factor = 3
    offset = torch.tensor([10.0, 20.0])

    def __init__(self):
        super().__init__()
        self._buffers["factor"] = torch.tensor(100.0)
        self._parameters["offset"] = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return x * self.factor + self.offset


@pytest.mark.parametrize("nest", [False, True], ids=["top", "submodule"])
def test_class_attributes_win_over_module_members(nest):
    model = Holder(ClassAttributes()) if nest else ClassAttributes()
    x = torch.ones(2)
    _, got, expected = run_both(model, x)
    assert_same(got, expected)
    assert_same(got, torch.tensor([13.0, 23.0]))


class DictShadows(nn.Module):
    """Values put in the instance ``__dict__`` next to members of the same names."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.w = nn.Parameter(torch.ones(2))
        self.register_buffer("b", torch.ones(2))
        self.__dict__["fc"] = nn.Identity()
        self.__dict__["w"] = torch.full((2,), 3.0)
        self.__dict__["b"] = 4.0

    def forward(self, x):
        return self.fc(x) * self.w + self.b


@pytest.mark.parametrize("nest", [False, True], ids=["top", "submodule"])
def test_instance_dict_entries_win_over_module_members(nest):
    model = Holder(DictShadows()) if nest else DictShadows()
    x = torch.tensor([1.0, 2.0])
    compiled, got, expected = run_both(model, x)
    assert_same(got, expected)
    assert_same(got, torch.tensor([7.0, 10.0]))
    # taking the shadow away again: the member answers, through a recompile
    inner = model.child if nest else model
    del inner.__dict__["w"]
    assert_same(compiled(x), model(x))
    del inner.__dict__["fc"]
    assert_same(compiled(x), model(x))


class Slotted(nn.Module):
    """A slot named like a submodule: unset, the submodule answers (via __getattr__); set,
    the slot does."""

    __slots__ = ("gate",)

    def __init__(self):
        super().__init__()
        self.gate = nn.Sigmoid()  # registered in _modules; the slot stays unset

    def forward(self, x):
        return self.gate(x)


def test_slots_on_a_module_class_come_before_members():
    # an unset slot next to nn.Module.__getattr__ is not traced (a break): still eager's answer
    model = Holder(Slotted())
    x = torch.linspace(-1, 1, 4)
    compiled, got, expected = run_both(model, x, fullgraph=False)
    assert_same(got, expected)
    assert_same(got, torch.sigmoid(x))
    object.__setattr__(model.child, "gate", torch.tanh)  # the slot is set now: it wins
    got = compiled(x)
    assert_same(got, model(x))
    assert_same(got, torch.tanh(x))


class ForwardingGetattr(nn.Module):
    """A user ``__getattr__``: names it does not hold itself come from ``inner``."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(2, 2)
        self.bias2 = nn.Parameter(torch.ones(2))

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.inner, name)

    def forward(self, x):
        return x @ self.weight.t() + self.bias2 + self.bias


class RenamingGetattribute(nn.Module):
    """A user ``__getattribute__`` that answers ``act`` itself and defers the rest."""

    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def __getattribute__(self, name):
        if name == "act":
            return torch.tanh
        return super().__getattribute__(name)

    def forward(self, x):
        return self.act(x)


@pytest.mark.parametrize("cls", [ForwardingGetattr, RenamingGetattribute])
@pytest.mark.parametrize("nest", [False, True], ids=["top", "submodule"])
def test_user_getattr_and_getattribute_on_a_module(cls, nest):
    torch.manual_seed(0)
    model = Holder(cls()) if nest else cls()
    x = torch.randn(3, 2)
    _, got, expected = run_both(model, x)
    assert_same(got, expected)


class Config:
    scale = 2.0

    def __init__(self):
        self.shift = 1.0

    def apply(self, x):
        return x * self.scale + self.shift


class Slots:
    __slots__ = ("k",)
    k_default = 5.0

    def __init__(self):
        self.k = 3.0


class LazySlot:
    __slots__ = ("cache",)


def test_an_unset_slot_of_a_plain_object_is_guarded_unset():
    holder = LazySlot()

    def fn(x):
        if hasattr(holder, "cache"):
            return x + holder.cache
        return x - 1

    compiled = kiln.compile(fn, backend=CountingBackend(), fullgraph=True)
    x = torch.ones(2)
    assert_same(compiled(x), fn(x))
    holder.cache = 5.0
    assert_same(compiled(x), fn(x))
    assert_same(compiled(x), x + 5)


def test_plain_objects_follow_the_same_order_and_shadowing_is_guarded():
    cfg, sl = Config(), Slots()

    def fn(x):
        return cfg.apply(x) + cfg.scale + sl.k + sl.k_default

    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting)
    x = torch.ones(2)
    assert_same(compiled(x), fn(x))
    cfg.scale = 10.0  # an instance attribute now shadows the class attribute
    assert_same(compiled(x), fn(x))
    cfg.apply = lambda t: t * 100  # an instance attribute shadows the method
    assert_same(compiled(x), fn(x))
    del cfg.apply, cfg.scale  # back to the class's: the first entry serves again
    assert_same(compiled(x), fn(x))
    assert entries(fn) == 3
    sl.k = 4.0
    assert_same(compiled(x), fn(x))


# -- item 12: forward reassigned after compiling -------------------------------------------------

class AddOne(nn.Module):
    def forward(self, x):
        return x + 1


def _replacements(module):
    return [
        ("method", types.MethodType(lambda self, x: x * 10, module)),
        ("function", lambda x: x * 20),
        ("partial", functools.partial(torch.mul, other=30.0)),
        ("other module's forward", nn.Identity().forward),
    ]


@pytest.mark.parametrize("which", range(4))
def test_reassigned_submodule_forward_is_guarded(which):
    model = Holder(AddOne())
    counting = CountingBackend()
    compiled = kiln.compile(model, backend=counting)
    x = torch.ones(2)
    assert_same(compiled(x), model(x))
    _, replacement = _replacements(model.child)[which]
    model.child.forward = replacement
    got = compiled(x)
    assert_same(got, model(x))
    assert not torch.equal(got, x + 1)
    assert entries(Holder) == 2
    del model.child.forward  # reassigning back: the first entry serves again
    assert_same(compiled(x), x + 1)
    assert entries(Holder) == 2


@pytest.mark.parametrize("which", range(4))
def test_reassigned_top_level_forward(which):
    model = AddOne()
    compiled = kiln.compile(model, backend=CountingBackend())
    x = torch.ones(2)
    assert_same(compiled(x), x + 1)
    _, replacement = _replacements(model)[which]
    model.forward = replacement
    assert_same(compiled(x), model(x))
    del model.forward
    assert_same(compiled(x), x + 1)


def test_instance_attribute_shadowing_a_helper_method_is_guarded():
    class WithHelper(nn.Module):
        def helper(self, x):
            return x - 1

        def forward(self, x):
            return self.helper(x) * 2

    model = Holder(WithHelper())
    compiled = kiln.compile(model, backend=CountingBackend())
    x = torch.ones(2)
    assert_same(compiled(x), model(x))
    model.child.helper = torch.exp
    assert_same(compiled(x), model(x))


# -- item 13: __call__ overrides and hooks -------------------------------------------------------

class TimesFive(nn.Module):
    def __call__(self, x):
        return super().__call__(x) * 5

    def forward(self, x):
        return x + 2


class NoForwardCall(nn.Module):
    def __call__(self, x, scale=3):
        return x * scale

    def forward(self, x):
        return x + 100


class CallsCallImpl(nn.Module):
    def __call__(self, x):
        return nn.Module._call_impl(self, x) - 1

    def forward(self, x):
        return x * 4


@pytest.mark.parametrize("cls", [TimesFive, NoForwardCall, CallsCallImpl])
@pytest.mark.parametrize("nest", [False, True], ids=["top", "submodule"])
def test_overridden_call_is_followed(cls, nest):
    model = Holder(cls()) if nest else cls()
    x = torch.ones(1)
    _, got, expected = run_both(model, x)
    assert_same(got, expected)


def test_overridden_call_still_runs_hooks_through_super_call():
    model = Holder(TimesFive())
    model.child.register_forward_hook(lambda m, args, out: out + 1)
    model.child.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    x = torch.ones(1)
    _, got, expected = run_both(model, x)
    assert_same(got, expected)
    assert_same(got, torch.tensor([25.0]))


def _order_hooks(module, log):
    handles = [
        nn.modules.module.register_module_forward_pre_hook(lambda m, a: log.append("global pre")),
        nn.modules.module.register_module_forward_hook(lambda m, a, o: log.append("global post")),
        module.register_forward_pre_hook(lambda m, a: log.append("pre")),
        module.register_forward_pre_hook(lambda m, a, k: (a, {**k, "shift": 1.0}), with_kwargs=True),
        module.register_forward_hook(lambda m, a, o: o * 3),
        module.register_forward_hook(lambda m, a, k, o: o + k["shift"], with_kwargs=True),
        module.register_forward_hook(lambda m, a, o: log.append("post")),
    ]
    return handles


class Shifted(nn.Module):
    def forward(self, x, shift=0.0):
        return x + shift


class CallsShifted(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = Shifted()

    def forward(self, x):
        return self.child(x)


def test_module_and_global_hooks_run_in_eager_order():
    model = CallsShifted()
    log = []
    handles = _order_hooks(model.child, log)
    try:
        # a function calling the model: the model's own call is traced too (a compiled
        # module's wrapper would be one more module that global hooks see, as in torch)
        compiled = kiln.compile(lambda x: model(x), backend=CountingBackend(), fullgraph=True)
        got = compiled(torch.ones(2))
        compiled_log, log[:] = list(log), []
        expected = model(torch.ones(2))
    finally:
        for h in handles:
            h.remove()
    assert_same(got, expected)
    assert_same(got, torch.full((2,), 7.0))
    # the log appends are side effects replayed or run: order and count as in eager
    assert compiled_log == log == ["global pre", "global pre", "pre", "global post", "post", "global post"]


@pytest.mark.parametrize("kind", ["pre", "post", "global pre", "global post", "kwargs pre"])
def test_hooks_added_after_compiling_are_guarded(kind):
    model = CallsShifted()

    def call(x):
        return model(x)

    compiled = kiln.compile(call, backend=CountingBackend())
    x = torch.ones(2)
    assert_same(compiled(x), x)
    child = model.child
    register = {
        "pre": lambda: child.register_forward_pre_hook(lambda m, a: (a[0] * 2,)),
        "post": lambda: child.register_forward_hook(lambda m, a, o: o * 3),
        "global pre": lambda: nn.modules.module.register_module_forward_pre_hook(lambda m, a: (a[0] - 5,)),
        "global post": lambda: nn.modules.module.register_module_forward_hook(lambda m, a, o: o + 9),
        "kwargs pre": lambda: child.register_forward_pre_hook(
            lambda m, a, k: (a, {"shift": 2.0}), with_kwargs=True),
    }[kind]
    handle = register()
    try:
        got = compiled(x)
        expected = model(x)
    finally:
        handle.remove()
    assert_same(got, expected)
    assert not torch.equal(got, x)
    assert_same(compiled(x), x)  # removed again: the first entry serves
    assert entries(call) == 2


def test_backward_hooks_are_not_skipped():
    model = CallsShifted()
    seen = []
    model.child.register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0].clone()))
    compiled = kiln.compile(model, backend=CountingBackend())
    x = torch.ones(2, requires_grad=True)
    compiled(x).sum().backward()
    assert len(seen) == 1
    assert_same(x.grad, torch.ones(2))
    seen.clear()
    global_seen = []
    handle = nn.modules.module.register_module_full_backward_hook(
        lambda m, gin, gout: global_seen.append(type(m).__name__))
    try:
        compiled(torch.ones(2, requires_grad=True)).sum().backward()
    finally:
        handle.remove()
    assert len(seen) == 1
    assert "Shifted" in global_seen


def test_calling_forward_directly_skips_hooks_as_eager_does():
    class Direct(nn.Module):
        def __init__(self):
            super().__init__()
            self.child = Shifted()

        def forward(self, x):
            return self.child.forward(x) + self.child(x)

    model = Direct()
    model.child.register_forward_hook(lambda m, a, o: o * 10)
    _, got, expected = run_both(model, torch.ones(2))
    assert_same(got, expected)
    assert_same(got, torch.full((2,), 11.0))


# -- other module-level divergences --------------------------------------------------------------

class TrainingBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = nn.Dropout(0.5)

    def forward(self, x):
        y = self.child(x)
        return y * 2 if self.training else y - 1


def test_training_flag_changes_are_guarded():
    model = TrainingBranch()
    compiled = kiln.compile(model, backend=CountingBackend())
    x = torch.ones(4)
    model.eval()
    assert_same(compiled(x), model(x))
    model.train()
    torch.manual_seed(0)
    got = compiled(x)
    torch.manual_seed(0)
    assert_same(got, model(x))
    model.child.eval()  # only the child's flag: still a recompile
    assert_same(compiled(x), model(x))
    assert entries(TrainingBranch) == 3


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
        self.heads = nn.ModuleDict({"b": nn.Linear(2, 2), "a": nn.Linear(2, 2)})

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).tanh()
        x = self.layers[-1](x) + self.layers[0](x) + len(self.layers)
        outs = [self.heads[k](x) * i for i, k in enumerate(self.heads)]
        outs += [v(x) for v in self.heads.values()]
        outs += [v(x) * len(k) for k, v in self.heads.items()]
        return torch.stack(outs), "a" in self.heads, [n for n, _ in self.named_parameters()]


def test_module_containers_index_and_iterate_in_order_and_reorders_are_guarded():
    torch.manual_seed(0)
    model = Stack()
    compiled = kiln.compile(model, backend=CountingBackend(), fullgraph=True)
    x = torch.randn(2)
    assert_same(compiled(x), model(x))
    head = model.heads.pop("b")
    model.heads["b"] = head  # same names, other order
    assert_same(compiled(x), model(x))
    model.layers.insert(0, nn.Linear(2, 2))
    assert_same(compiled(x), model(x))
    assert entries(Stack) == 3


class Reversed(nn.ModuleList):
    def __iter__(self):
        return iter(list(self._modules.values())[::-1])

    def __len__(self):
        return 10

    def __getitem__(self, i):
        return next(iter(self._modules.values()))


class EmptyOrNot(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = layers

    def forward(self, x):
        if not self.layers:
            return x - 1
        for layer in self.layers:
            x = layer(x) * 2
        return x + len(self.layers) + self.layers[1](x)


@pytest.mark.parametrize("layers", [
    Reversed([nn.Linear(2, 2), nn.Linear(2, 2)]),
    nn.ModuleList(),
    nn.Sequential(),
    nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)]),
], ids=["overridden", "empty list", "empty sequential", "plain"])
def test_container_subclass_overrides_and_truthiness(layers):
    torch.manual_seed(0)
    model = EmptyOrNot(layers)
    _, got, expected = run_both(model, torch.randn(2))
    assert_same(got, expected)


def test_overridden_parameters_walk_is_followed():
    class Picky(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(torch.ones(2))
            self.b = nn.Parameter(torch.full((2,), 2.0))

        def parameters(self, recurse=True):
            return iter([self.b])

        def forward(self, x):
            return x + sum(p.sum() for p in self.parameters())

    _, got, expected = run_both(Holder(Picky()), torch.zeros(2))
    assert_same(got, expected)


def test_no_fallback_counts_for_plain_models():
    torch.manual_seed(0)
    model = Holder(nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1)))
    compiled = kiln.compile(model, backend=CountingBackend(), fullgraph=True)
    x = torch.randn(2, 3)
    assert_same(compiled(x), model(x))
    assert_same(compiled(x), model(x))
    assert entries(Holder) == 1
    assert not kiln.session().stats.breaks


class Slices(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(4)])
        self.seq = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 2))

    def forward(self, x):
        head = self.layers[1:3]
        for layer in head:
            x = layer(x)
        x = self.layers[::-2][0](x) + len(self.layers[:-1])
        x = self.seq[:2](x) + self.seq[-1:](x)
        return x, isinstance(head, nn.ModuleList), isinstance(self.seq[1:], nn.Sequential)


def test_container_slices_index_iterate_and_call():
    torch.manual_seed(0)
    model = Slices()
    _, got, expected = run_both(model, torch.randn(2))
    assert_same(got, expected)


def test_a_returned_slice_is_the_real_container():
    layers = nn.ModuleList([nn.ReLU(), nn.Tanh()])

    class ReturnsSlice(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = layers

        def forward(self, x):
            return x + 1, self.layers[1:]

    got = kiln.compile(ReturnsSlice(), backend=CountingBackend())(torch.ones(2))
    assert_same(got[0], torch.full((2,), 2.0))
    assert type(got[1]) is nn.ModuleList and got[1][0] is layers[1]


class ObjGetattr:
    scale = 3.0

    def __init__(self):
        self.inner = {"shift": 2.0}

    def __getattr__(self, name):
        return self.inner[name]


def test_plain_object_getattr_comes_after_class_and_instance_attributes():
    obj = ObjGetattr()

    def fn(x):
        return x * obj.scale + obj.shift

    compiled = kiln.compile(fn, backend=CountingBackend(), fullgraph=True)
    x = torch.ones(2)
    assert_same(compiled(x), fn(x))
    obj.shift = 10.0  # an instance attribute now answers before __getattr__
    assert_same(compiled(x), fn(x))
    obj.scale = -1.0
    assert_same(compiled(x), fn(x))
    assert_same(compiled(x), x * -1 + 10)


class Cached(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    @functools.cached_property
    def table(self):
        self.calls += 1
        return torch.full((2,), 4.0)

    def forward(self, x):
        return x * self.table


class CachedObject:
    @functools.cached_property
    def scale(self):
        return 6.0

    double = functools.partialmethod(lambda self, x, k: x * k, k=2)


def test_other_descriptors_are_not_answered_by_the_descriptor_object():
    model = Cached()
    compiled = kiln.compile(model, backend=CountingBackend())
    x = torch.ones(2)
    assert_same(compiled(x), torch.full((2,), 4.0))
    assert_same(compiled(x), model(x))
    assert model.calls == 1
    obj = CachedObject()

    def fn(x):
        kinds = (isinstance(obj.scale, float), callable(obj.double), type(model.table).__name__)
        return obj.double(x) * obj.scale, kinds

    assert_same(kiln.compile(fn, backend=CountingBackend())(x), fn(x))


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(2, 2)
        self.a = nn.Linear(2, 2)
        self.b = nn.Linear(2, 2)
        self.b.weight = self.a.weight
        self.again = self.shared

    def forward(self, x):
        total = sum(p.sum() for p in self.parameters())
        names = [n for n, _ in self.named_modules()]
        return x * total, names, len(list(self.children()))


def test_walks_skip_duplicates_as_eager_and_untying_recompiles():
    torch.manual_seed(0)
    model = Tied()
    compiled = kiln.compile(model, backend=CountingBackend(), fullgraph=True)
    x = torch.ones(2)
    with torch.no_grad():
        assert_same(compiled(x), model(x))
        model.b.weight = nn.Parameter(torch.full((2, 2), 3.0))  # untied
        assert_same(compiled(x), model(x))
        model.again = nn.Linear(2, 2)  # no longer the same submodule
        assert_same(compiled(x), model(x))
    assert entries(Tied) == 3


def test_an_overridden_named_parameters_decides_parameters():
    class OnlyWeights(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
            return iter([("fc.weight", self.fc.weight)])

        def forward(self, x):
            return x + sum(p.sum() for p in self.parameters())

    torch.manual_seed(0)
    _, got, expected = run_both(Holder(OnlyWeights()), torch.zeros(2), fullgraph=False)
    assert_same(got, expected)


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.count = 1
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x) * self.count


@pytest.mark.parametrize("how", ["item", "update", "vars"])
def test_writes_through_a_module_dict_are_seen_by_later_reads(how):
    torch.manual_seed(0)

    def fn(x, m):
        if how == "item":
            m.__dict__["count"] = 7
        elif how == "update":
            m.__dict__.update(count=5, fc=nn.Identity.forward.__get__(m))
        else:
            vars(m)["count"] = 3
        return m(x), m.count

    x = torch.ones(2)
    eager_model, compiled_model = Counter(), Counter()
    compiled_model.load_state_dict(eager_model.state_dict())
    expected = fn(x, eager_model)
    got = kiln.compile(fn, backend=CountingBackend())(x, compiled_model)
    assert_same(got, expected)
    assert vars(compiled_model).keys() == vars(eager_model).keys()
    assert compiled_model.count == eager_model.count


class Redirect:
    offset = torch.tensor([1.0, 2.0])  # a tensor class attribute

    def __init__(self):
        self.hidden = 4.0

    def __getattribute__(self, name):
        if name == "visible":
            return object.__getattribute__(self, "hidden") * 2
        return object.__getattribute__(self, name)


def test_plain_object_getattribute_and_tensor_class_attributes():
    obj = Redirect()

    def fn(x):
        return x * obj.visible + obj.offset

    compiled = kiln.compile(fn, backend=CountingBackend(), fullgraph=True)
    x = torch.ones(2)
    assert_same(compiled(x), fn(x))
    obj.hidden = 0.5
    obj.offset = torch.tensor([7.0, 7.0])  # the instance now shadows the class tensor
    assert_same(compiled(x), fn(x))
    assert_same(compiled(x), torch.tensor([8.0, 8.0]))


_DEFAULT_SCALE = torch.tensor([2.0, 3.0])


class CallWithTensorDefault(nn.Module):
    def __call__(self, x, scale=_DEFAULT_SCALE):
        return super().__call__(x) * scale

    def forward(self, x):
        return x - 1


def test_an_overridden_call_with_a_tensor_default_is_traced():
    model = Holder(CallWithTensorDefault())
    _, got, expected = run_both(model, torch.ones(2))
    assert_same(got, expected)
