"""The long tail of nn.Module code (issue 13): lazy modules whose first call infers their
parameters, a buffer reassigned in ``forward``, a module passed to a torch function, and
ModuleList subclasses, static ``forward``, a missing ``forward`` and returned modules.

Each case runs eagerly and compiled and compares results and module state; graph and break
counts are those of torch.compile on the same code (one graph) unless a comment says why.
"""

import copy

import pytest
import torch
from e2e_support import CountingBackend, assert_same, check_one_graph
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.parameter import UninitializedParameter

import kiln


def run_twins(model, *args, seed=0):
    """The model compiled and an untouched copy run eagerly, each from the same RNG state
    (a lazy module initializes its parameters on its first call): (compiled model, counting
    backend, compiled result, eager copy, eager result)."""
    twin = copy.deepcopy(model)
    counting = CountingBackend()
    compiled = kiln.compile(model, backend=counting)
    torch.manual_seed(seed)
    got = compiled(*args)
    torch.manual_seed(seed)
    expected = twin(*args)
    return compiled, counting, got, twin, expected


# -- lazy modules ----------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: nn.Sequential(nn.LazyLinear(5), nn.ReLU()),
    lambda: nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.LazyLinear(5)),
    lambda: nn.Sequential(nn.LazyConv1d(4, 2), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2)),
], ids=["first", "after ops", "conv then linear"])
def test_lazy_modules_infer_their_parameters_in_one_graph(make):
    torch.manual_seed(0)
    model = make()
    x = torch.randn(2, 3, 6) if isinstance(model[0], nn.LazyConv1d) else torch.randn(2, 3)
    compiled, counting, got, twin, expected = run_twins(model, x)
    assert_same(got, expected)
    assert len(counting.graphs) == 1 and kiln.session().stats.breaks == []
    assert [type(m) for m in model] == [type(m) for m in twin]  # LazyLinear became Linear
    assert_same(dict(model.named_parameters()), dict(twin.named_parameters()))
    # the next calls reuse the graph, with the parameters the first call made
    assert_same(compiled(x * 2), twin(x * 2))
    assert len(counting.graphs) == 1


class LazyScale(LazyModuleMixin, nn.Module):
    """A user lazy layer: one weight per input feature, sized by the first input."""

    def __init__(self):
        super().__init__()
        self.weight = UninitializedParameter()

    def initialize_parameters(self, x):
        if self.has_uninitialized_params():
            with torch.no_grad():
                self.weight.materialize((x.shape[-1],))
                self.weight.uniform_(-1, 1)

    def forward(self, x):
        return x * self.weight


def test_a_user_lazy_layer_is_initialized_once_as_eager_does():
    model = nn.Sequential(nn.Linear(3, 4), LazyScale())
    _, counting, got, twin, expected = run_twins(model, torch.randn(2, 3))
    assert_same(got, expected)
    assert len(counting.graphs) == 1 and kiln.session().stats.breaks == []
    assert model[1].weight.shape == (4,) and not hasattr(model[1], "_initialize_hook")
    assert_same(model[1].weight, twin[1].weight)


def test_a_new_uninitialized_lazy_module_recompiles_and_is_initialized():
    counting = CountingBackend()
    run = kiln.compile(lambda m, x: m(x) + 1, backend=counting)
    for features in (3, 3):
        torch.manual_seed(0)
        model = nn.LazyLinear(2)
        twin = copy.deepcopy(model)
        x = torch.randn(2, features)
        torch.manual_seed(1)
        got = run(model, x)
        torch.manual_seed(1)
        assert_same(got, twin(x) + 1)
        assert type(model) is nn.Linear and model.in_features == features
    # the first graph's guards say Linear (what the module became): a fresh LazyLinear recompiles
    assert len(counting.graphs) == 2 and kiln.session().stats.breaks == []


def test_a_lazy_module_after_a_random_op_is_initialized_in_eager_order():
    # eager draws the dropout mask before the initialization draws the weight; doing the
    # initialization at trace time would swap them, so the call breaks instead (torch.compile
    # makes one graph, with the draws reordered)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Dropout(0.5), nn.LazyLinear(3))
    _, counting, got, twin, expected = run_twins(model, torch.randn(4, 6), seed=5)
    assert_same(got, expected)
    assert_same(model[1].weight, twin[1].weight)
    assert len(counting.graphs) == 2


# -- a buffer reassigned in forward ----------------------------------------------------------------

class StepCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))
        self.register_buffer("offset", torch.ones(2), persistent=False)

    def forward(self, x):
        self.steps = self.steps + 1
        y = x * self.steps
        self.steps = self.steps * 2
        return y + self.offset + self.steps


def test_a_buffer_reassigned_in_forward_is_updated_on_the_module():
    model, twin = StepCounter(), StepCounter()
    counting = CountingBackend()
    compiled = kiln.compile(model, backend=counting)
    x = torch.randn(2)
    for _ in range(3):
        assert_same(compiled(x), twin(x))
        assert_same(model.steps, twin.steps)
    assert list(model._buffers) == ["steps", "offset"] and model._non_persistent_buffers_set == {"offset"}
    assert set(model.state_dict()) == {"steps"}
    assert len(counting.graphs) == 1 and kiln.session().stats.breaks == []


def test_buffer_registration_hooks_run_for_a_reassigned_buffer():
    seen = []

    def hook(module, name, tensor):
        seen.append(name)
        return tensor + 100

    model, twin = StepCounter(), StepCounter()
    handle = torch.nn.modules.module.register_module_buffer_registration_hook(hook)
    try:
        compiled = kiln.compile(model, backend=CountingBackend())
        x = torch.randn(2)
        got = compiled(x)
        assert seen == ["steps", "steps"]
        assert_same(got, twin(x))
        assert_same(model.steps, twin.steps)
        assert seen == ["steps"] * 4
    finally:
        handle.remove()


# -- modules as arguments of torch functions -------------------------------------------------------

@pytest.mark.parametrize("distance", [nn.PairwiseDistance(), nn.CosineSimilarity(dim=1), None],
                         ids=["pairwise", "cosine", "user function"])
def test_a_module_or_function_passed_to_a_torch_function(counting, distance):
    def user_distance(a, b):
        return (a - b).abs().sum(-1)

    fn_distance = distance if distance is not None else user_distance

    def fn(a, p, n):
        return nn.functional.triplet_margin_with_distance_loss(a, p, n, distance_function=fn_distance, margin=0.5)

    check_one_graph(counting, fn, *torch.randn(3, 3, 4))


# -- module shapes that already traced (kept working) ---------------------------------------------

class Cyclic(nn.ModuleList):
    """A ModuleList whose ``__getitem__`` wraps the index around."""

    def __getitem__(self, i):
        return super().__getitem__(i % len(self))


def test_a_modulelist_subclass_getitem_is_followed(counting):
    torch.manual_seed(0)
    layers = Cyclic([nn.Linear(3, 3), nn.Linear(3, 3)])

    def fn(x):
        return layers[3](x) + layers[-4](x)

    check_one_graph(counting, fn, torch.randn(2, 3))


class StaticForward(nn.Module):
    @staticmethod
    def forward(x):
        return x * 2 + 1


def test_a_static_forward(counting):
    model = StaticForward()
    check_one_graph(counting, model, torch.randn(3))
    check_one_graph(CountingBackend(), lambda x: model(x) - 1, torch.randn(3))


class NoForward(nn.Module):
    pass


class CallsNoForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = NoForward()

    def forward(self, x):
        return self.inner(x) + 1


@pytest.mark.parametrize("model", [NoForward(), CallsNoForward()], ids=["top", "submodule"])
def test_a_module_without_forward_raises_eagers_error(model):
    compiled = kiln.compile(model, backend=CountingBackend())
    with pytest.raises(NotImplementedError, match=r'Module \[NoForward\] is missing the required "forward"'):
        compiled(torch.randn(2))


def test_a_module_returned_from_a_compiled_function_is_the_module(counting):
    torch.manual_seed(0)
    lin = nn.Linear(2, 2)

    def fn(x):
        return lin, lin(x), {"layer": lin}

    compiled = check_one_graph(counting, fn, torch.randn(2))
    got = compiled(torch.randn(2))
    assert got[0] is lin and got[2]["layer"] is lin
