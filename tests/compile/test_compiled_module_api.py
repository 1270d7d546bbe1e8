"""The module kiln.compile returns behaves like torch.compile's OptimizedModule: pickling and
torch.save, copy.deepcopy, dir(), truth value and len(), state_dict keys and loading,
attributes and training mode shared with the original, hooks, and kiln.disable(fn,
recursive=False). Each test runs torch.compile on the same code and compares what it sees
(results with eager through assert_close, graph and op counts exactly)."""

import copy
import io
import pickle

import pytest
import torch
from torch import nn

import kiln

GRAPHS = []  # what _record was given, torch's graphs or kiln's (one test at a time)


def _record(gm, example_inputs):
    """A backend both compilers accept, found by name when pickled (so copies share it)."""
    GRAPHS.append(gm)
    return gm.forward


def _ops(graphs):
    return [sum(node.op.startswith("call") for node in gm.graph.nodes) for gm in graphs]


@pytest.fixture(autouse=True)
def graphs():
    torch._dynamo.reset()
    GRAPHS.clear()
    yield GRAPHS
    GRAPHS.clear()
    torch._dynamo.reset()


COMPILERS = {"torch": torch.compile, "kiln": kiln.compile}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 4)
        self.norm = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.5)
        self.scale = 2.0
        self.register_buffer("shift", torch.full((4,), 0.5))

    def forward(self, x):
        return self.drop(self.norm(self.lin(x))) * self.scale + self.shift

    def describe(self):
        return "net"


def _net(seed=0):
    torch.manual_seed(seed)
    return Net()


def _seeded(fn, *args, seed=1):
    torch.manual_seed(seed)
    return fn(*args)


def test_pickle_and_torch_save_rebuild_a_compiled_module(graphs):
    x = torch.randn(5, 3)
    seen = {}
    for name, compile_ in COMPILERS.items():
        graphs.clear()
        model = _net().eval()
        compiled = compile_(model, backend=_record)
        torch.testing.assert_close(compiled(x), model(x))
        buffer = io.BytesIO()
        torch.save(compiled, buffer)
        buffer.seek(0)
        loaded = [pickle.loads(pickle.dumps(compiled)), torch.load(buffer, weights_only=False)]
        for again in loaded:
            # the same wrapper type around a loaded copy of the original, state included
            assert type(again) is type(compiled) and type(again._orig_mod) is Net
            assert again._orig_mod is not model and not again.training
            assert list(again.state_dict()) == list(compiled.state_dict())
            for key, value in compiled.state_dict().items():
                torch.testing.assert_close(again.state_dict()[key], value)
            torch.testing.assert_close(again(x), model(x))
            assert again.describe() == "net" and again.scale == 2.0
        buffer.seek(0)
        with pytest.raises(pickle.UnpicklingError):  # a whole module is no weights-only file
            torch.load(buffer)
        seen[name] = len(graphs)
    # the loaded modules run the graph compiled for the original (its code, its backend)
    assert seen == {"torch": 1, "kiln": 1}
    # a backend that pickle cannot find by name cannot be saved, under either: the same error
    errors = []
    for compile_ in COMPILERS.values():
        with pytest.raises((pickle.PicklingError, AttributeError)) as error:
            pickle.dumps(compile_(_net(), backend=lambda gm, example_inputs: gm.forward))
        errors.append((type(error.value), str(error.value).split(" at ")[0]))
    assert errors[0] == errors[1]


def _breaks(x):
    return torch.relu(x) if x.sum() > 0 else -x  # a data-dependent branch: a graph break


class Breaking(nn.Module):
    def forward(self, x):
        return _breaks(x) + 1


def test_pickle_keeps_the_compile_arguments():
    compiled = kiln.compile(Breaking(), backend="eager", fullgraph=True, dynamic=False)
    again = pickle.loads(pickle.dumps(compiled))
    assert again._kiln_callback.configs == compiled._kiln_callback.configs
    with pytest.raises(kiln.Unsupported):
        again(torch.ones(3))  # still fullgraph: the graph break is an error
    torch.testing.assert_close(pickle.loads(pickle.dumps(kiln.compile(Breaking(), backend="eager")))(torch.ones(3)),
                               torch.ones(3) + 1)


def test_deepcopy_is_an_independent_compiled_module(graphs):
    x = torch.randn(5, 3)
    counts = {}
    for name, compile_ in COMPILERS.items():
        graphs.clear()
        model = _net()
        compiled = compile_(model, backend=_record)
        _seeded(compiled, x)
        copied = copy.deepcopy(compiled)
        assert type(copied) is type(compiled) and copied._orig_mod is not model
        assert not {id(p) for p in copied.parameters()} & {id(p) for p in model.parameters()}
        assert not {p.data_ptr() for p in copied.state_dict().values()} & {
            p.data_ptr() for p in model.state_dict().values()}
        with torch.no_grad():
            copied.lin.weight.add_(1.0)
        copied.scale = 3.0
        copied.eval()  # the copy's mode is its own
        assert model.training and compiled.training and not copied._orig_mod.training
        torch.testing.assert_close(copied(x), copied._orig_mod(x))
        torch.testing.assert_close(_seeded(compiled, x), _seeded(model, x))
        assert model.scale == 2.0
        pair = copy.deepcopy((compiled, model))  # one memo: the copy wraps the copied original
        assert pair[0]._orig_mod is pair[1] and pair[1] is not model
        shallow = copy.copy(compiled)  # a new wrapper around the same original
        assert type(shallow) is type(compiled) and shallow is not compiled and shallow._orig_mod is model
        counts[name] = len(graphs)
    assert counts == {"torch": 2, "kiln": 2}  # train, then the copy in eval: its own graph


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_deepcopy_with_a_named_backend(backend):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    compiled = kiln.compile(model, backend=backend)
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), model(x))
    copied = copy.deepcopy(compiled)
    with torch.no_grad():
        copied._orig_mod[0].bias.add_(1.0)
    torch.testing.assert_close(copied(x), copied._orig_mod(x))
    torch.testing.assert_close(compiled(x), model(x))
    assert not torch.equal(copied(x), compiled(x))


def test_dir_lists_the_originals_names():
    model = _net()
    model.extra_attribute = 1
    for compile_ in COMPILERS.values():
        compiled = compile_(model, backend="eager")
        names = dir(compiled)
        assert set(dir(model)) <= set(names)
        assert {"describe", "extra_attribute", "lin", "scale", "shift", "_orig_mod"} <= set(names)
    # the original's names first, then the wrapper's own
    names = kiln.compile(model, backend="eager").__dir__()
    assert names[:len(model.__dir__())] == model.__dir__()


class _Falsy(nn.Module):
    def forward(self, x):
        return x + 1

    def __bool__(self):
        return False


def test_truth_value_and_len_are_the_originals():
    sized = [nn.Sequential(), nn.Sequential(nn.ReLU(), nn.Tanh()), nn.ModuleList(), nn.ModuleList([nn.ReLU()]),
             nn.ModuleDict(), nn.ModuleDict({"a": nn.ReLU()})]
    for module in sized:  # where torch 2.13 answers, kiln answers the same
        ours, theirs = kiln.compile(module, backend="eager"), torch.compile(module, backend="eager")
        assert bool(ours) is bool(theirs) is bool(module)
        assert len(ours) == len(theirs) == len(module)
    for module in [nn.Linear(2, 2), _Falsy()]:
        ours, theirs = kiln.compile(module, backend="eager"), torch.compile(module, backend="eager")
        # the original's truth value (torch 2.13 raises TypeError here: pytorch/pytorch#196292)
        assert bool(ours) is bool(module)
        with pytest.raises(TypeError):
            len(ours)
        with pytest.raises(TypeError):
            len(theirs)
    assert bool(kiln.compile(nn.Linear(2, 2), backend="eager")) is True
    assert bool(kiln.compile(_Falsy(), backend="eager")) is False


def test_state_dict_keys_and_loading_as_torch():
    model, other = _net(0), _net(1)
    ours, theirs = kiln.compile(model, backend="eager"), torch.compile(model, backend="eager")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(ours.state_dict()) == ["_orig_mod." + key for key in model.state_dict()]
    assert list(model.state_dict()) == list(_net().state_dict())  # the original's keys stay plain
    for key, value in ours.state_dict().items():  # the original's tensors, not copies
        assert value.data_ptr() == theirs.state_dict()[key].data_ptr()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    # a plain module's state_dict is refused by both, with the same missing and unexpected keys
    errors = []
    for compiled in (ours, theirs):
        with pytest.raises(RuntimeError, match="Missing key") as error:
            compiled.load_state_dict(other.state_dict())
        errors.append(str(error.value).split(":", 1)[1])
        result = compiled.load_state_dict(other.state_dict(), strict=False)
        errors.append((result.missing_keys, result.unexpected_keys))
    assert errors[0] == errors[2] and errors[1] == errors[3]
    with pytest.raises(RuntimeError, match="Unexpected key"):
        nn.Module.load_state_dict(_net(), ours.state_dict())
    # a compiled module's state_dict (saved and loaded) loads into another compiled module
    buffer = io.BytesIO()
    torch.save(kiln.compile(other, backend="eager").state_dict(), buffer)
    buffer.seek(0)
    ours.load_state_dict(torch.load(buffer))
    torch.testing.assert_close(model.lin.weight, other.lin.weight)
    x = torch.randn(5, 3)
    torch.testing.assert_close(_seeded(ours, x), _seeded(other, x))
    ours._orig_mod.load_state_dict(_net(2).state_dict())  # the plain keys go to the original
    torch.testing.assert_close(model.lin.weight, _net(2).lin.weight)
    torch.testing.assert_close(_seeded(ours, x), _seeded(model, x))


def test_attribute_reads_and_writes_reach_the_original(graphs):
    x = torch.randn(5, 3)
    counts = {}
    for name, compile_ in COMPILERS.items():
        graphs.clear()
        model = _net().eval()
        compiled = compile_(model, backend=_record)
        assert compiled.lin is model.lin and compiled.shift is model.shift
        assert compiled.lin.weight is model.lin.weight
        torch.testing.assert_close(compiled(x), model(x))
        compiled.scale = 3.0  # written on the compiled module, seen on the original
        assert model.scale == 3.0 and "scale" not in compiled.__dict__
        torch.testing.assert_close(compiled(x), model(x))
        model.flag = "set on the original"  # and the reverse
        assert compiled.flag == "set on the original"
        model.shift = torch.zeros(4)  # a buffer replaced on the original
        assert compiled.shift is model.shift and "shift" in model._buffers
        torch.testing.assert_close(compiled(x), model(x))
        compiled.lin = nn.Linear(3, 4).eval()  # a submodule replaced through the compiled module
        assert model.lin is compiled.lin and list(compiled._modules) == ["_orig_mod"]
        torch.testing.assert_close(compiled(x), model(x))
        with pytest.raises(AttributeError, match="'Net' object has no attribute 'missing'"):
            compiled.missing  # noqa: B018
        counts[name] = len(graphs)
    assert counts == {"torch": 2, "kiln": 2}  # the first call, and scale 3.0 (a guard on its value)


def test_train_and_eval_on_either_side_are_seen_by_the_next_call(graphs):
    x = torch.randn(6, 3)
    counts = {}
    for name, compile_ in COMPILERS.items():
        graphs.clear()
        model, reference = _net(), _net()
        compiled = compile_(model, backend=_record)
        steps = [
            lambda m: m,  # train: dropout and batch statistics, running stats updated
            lambda m: m.eval(),  # eval through the compiled module
            lambda m: m.train(),  # back to train through the original
            lambda m: m.eval(),  # eval through the original
        ]
        for i, step in enumerate(steps):
            step(compiled if i == 1 else model)
            step(reference)
            assert compiled.training is model.training is reference.training
            assert all(m.training is model.training for m in model.modules())
            torch.testing.assert_close(_seeded(compiled, x), _seeded(reference, x))
            torch.testing.assert_close(model.norm.running_mean, reference.norm.running_mean)
            torch.testing.assert_close(model.norm.running_var, reference.norm.running_var)
        compiled.training = True  # the attribute itself, as nn.Module.train sets it
        assert model.training and not model.lin.training
        counts[name] = len(graphs)
    assert counts == {"torch": 2, "kiln": 2}  # one graph per mode; switching back hits


def test_train_and_eval_with_inductor():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU())
    reference = copy.deepcopy(model)
    compiled = kiln.compile(model)
    x = torch.randn(6, 3)
    for step in (lambda m: m.train(), lambda m: m.eval(), lambda m: m.train()):
        step(model)
        step(reference)
        torch.testing.assert_close(compiled(x), reference(x))
        torch.testing.assert_close(model[1].running_mean, reference[1].running_mean)


def test_hooks_on_the_original_before_and_after_compiling(graphs):
    x = torch.randn(5, 3)
    counts = {}
    for name, compile_ in COMPILERS.items():
        graphs.clear()
        model = _net().eval()
        model.register_forward_pre_hook(lambda module, args: (args[0] * 2,))  # before compiling
        compiled = compile_(model, backend=_record)
        torch.testing.assert_close(compiled(x), model(x))
        handle = model.register_forward_hook(lambda module, args, out: out - args[0].sum())  # after
        expected = model(x)
        torch.testing.assert_close(compiled(x), expected)
        kw = model.register_forward_pre_hook(lambda module, args, kwargs: ((args[0] + 1,), kwargs),
                                             with_kwargs=True)
        torch.testing.assert_close(compiled(x), model(x))
        handle.remove()
        kw.remove()
        torch.testing.assert_close(compiled(x), model(x))
        counts[name] = (len(graphs), _ops(graphs))
    assert counts["kiln"] == counts["torch"]


def test_hooks_on_a_submodule_added_after_compiling():
    # torch 2.13 leaves a submodule's hooks unguarded (skip_nnmodule_hook_guards): a hook added
    # after compiling is ignored there. kiln's guards see it: compare with eager only.
    model = _net().eval()
    compiled = kiln.compile(model, backend="eager")
    x = torch.randn(5, 3)
    torch.testing.assert_close(compiled(x), model(x))
    handle = model.lin.register_forward_hook(lambda module, args, out: out * 3)
    pre = model.norm.register_forward_pre_hook(lambda module, args: (args[0] + 1,))
    torch.testing.assert_close(compiled(x), model(x))
    handle.remove()
    pre.remove()
    torch.testing.assert_close(compiled(x), model(x))


def _inner(x):
    return x.sin() + 1


def _middle(x):
    return _inner(x * 2) - 1


def test_disable_not_recursive_skips_only_that_frame(graphs):
    x = torch.randn(4)
    seen = {}
    for name, disable, compile_ in (("torch", torch.compiler.disable, torch.compile),
                                    ("kiln", kiln.disable, kiln.compile)):
        for recursive in (True, False):
            torch._dynamo.reset()
            kiln.reset()
            graphs.clear()
            middle = disable(_middle, recursive=recursive)

            def outer(x, middle=middle):
                return middle(x.cos()) + 1

            compiled = compile_(outer, backend=_record)
            torch.testing.assert_close(compiled(x), outer(x))
            torch.testing.assert_close(compiled(x + 1), outer(x + 1))  # cache hits
            seen[name, recursive] = _ops(graphs)
    # outer's two graphs around the call; not recursive: _inner is compiled, _middle's own ops not
    assert seen[("kiln", True)] == seen[("torch", True)] == [1, 1]
    assert seen[("kiln", False)] == seen[("torch", False)] == [1, 2, 1]
    assert [str(n.target) for n in GRAPHS[1].graph.nodes if n.op == "call_method"] == ["sin"]
    kiln.reset()
    middle = kiln.disable(_middle, recursive=False)
    with pytest.raises(kiln.Unsupported, match=r"_middle is marked kiln\.disable"):
        kiln.compile(lambda x: middle(x), backend="eager", fullgraph=True)(x)


def test_disable_not_recursive_as_a_decorator_and_on_forward(graphs):
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(4))

        @kiln.disable(recursive=False)
        def forward(self, x):
            return _middle(x * self.weight)  # forward runs as it is; _middle is compiled

    model = Model()
    x = torch.randn(2, 4)
    compiled = kiln.compile(model, backend=_record)
    torch.testing.assert_close(compiled(x), model(x))
    torch.testing.assert_close(compiled(x), model(x))
    assert _ops(graphs) == [4]  # _middle with _inner inlined, and nothing of forward's own
    assert Model.forward.__name__ == "forward"
    # torch's twin compiles the same graph (its forward skipped, _middle compiled)
    graphs.clear()
    Model.forward = torch.compiler.disable(Model.forward.__wrapped__, recursive=False)
    torch.testing.assert_close(torch.compile(model, backend=_record)(x), model(x))
    assert _ops(graphs) == [4]
