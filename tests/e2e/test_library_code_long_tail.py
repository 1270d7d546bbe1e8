"""The long tail of library code (issue 13): ``super()`` in a classmethod, ``threading.local``
state, ``str()`` of user objects, dataclasses with default factories, torch.backends
switches, indexing by a 0-d tensor, transformers' ``ModelOutput`` and ``ClassInstantier``,
torch.distributions, custom ops with a fake implementation and ``torch._check`` with a
message. Compared with eager; graph and break counts are those of torch.compile on the same
code.
"""

import dataclasses
import threading

import pytest
import torch
from e2e_support import CountingBackend, assert_same, check_one_graph

import kiln

# -- super() in a classmethod -----------------------------------------------------------------------


class Base:
    scale = 2

    @classmethod
    def make(cls, x):
        return x * cls.scale

    @staticmethod
    def shift(x):
        return x - 1


class Derived(Base):
    scale = 5

    @classmethod
    def make(cls, x):
        return super().make(x) + super().shift(x) + 1


class MoreDerived(Derived):
    scale = 7


def test_super_in_a_classmethod_binds_the_calling_class(counting):
    def fn(x):
        return Derived.make(x), MoreDerived.make(x), super(Derived, MoreDerived).make(x)

    check_one_graph(counting, fn, torch.randn(3))


# -- threading.local -------------------------------------------------------------------------------

state = threading.local()


def scaled(x):
    return x * state.scale + getattr(state, "shift", 0)


def in_thread(fn, *args):
    """``fn(*args)`` run in a new thread that sets its own ``state.scale`` first."""
    out = {}

    def work():
        state.scale = 10
        try:
            out["value"] = fn(*args)
        except Exception as e:
            out["error"] = type(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    return out


def test_thread_local_attributes_are_read_and_guarded_per_thread(counting):
    state.scale = 3
    x = torch.randn(3)
    compiled = check_one_graph(counting, scaled, x)
    assert_same(in_thread(compiled, x), in_thread(scaled, x))  # scale 10 in that thread
    assert_same(in_thread(compiled, x)["value"], x * 10)
    assert_same(compiled(x), x * 3)
    state.shift = 1.5
    assert_same(compiled(x), scaled(x))
    del state.shift


def test_a_thread_local_attribute_missing_in_another_thread_raises_as_eager():
    state.scale = 3

    def fn(x):
        return x * state.scale

    compiled = kiln.compile(fn, backend=CountingBackend())
    x = torch.randn(2)
    assert_same(compiled(x), x * 3)
    out = {}

    def work():
        try:
            compiled(x)
        except AttributeError:
            out["raised"] = True

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert out == {"raised": True}


# -- text of user objects --------------------------------------------------------------------------

class Named:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"<{self.name}>"


class Shown:
    def __repr__(self):
        return "Shown()"


def test_str_and_format_of_user_objects_inline_their_methods(counting):
    named, shown = Named("layer"), Shown()

    def fn(x):
        text = f"{named}/{shown!r}/{type(x).__name__}"
        return x + len(str(named)) + len(repr(shown)) + len(str(shown)), text

    compiled = check_one_graph(counting, fn, torch.randn(2))
    named.name = "a longer name"  # the attribute the text was made from is guarded
    x = torch.randn(2)
    assert_same(compiled(x), fn(x))


# -- dataclasses -----------------------------------------------------------------------------------

@dataclasses.dataclass
class Options:
    hooks: list = dataclasses.field(default_factory=list)
    extra: dict = dataclasses.field(default_factory=lambda: {"k": 1})
    scale: int = 2


def test_a_dataclass_with_default_factories_built_in_the_trace(counting):
    def fn(x):
        opts = Options()
        opts.hooks.append(3)
        other = Options(hooks=[1, 2], scale=4)
        return x * (opts.scale + len(opts.hooks) + opts.extra["k"]) + other.scale * len(other.hooks), opts

    check_one_graph(counting, fn, torch.randn(3))


# -- torch.backends switches -----------------------------------------------------------------------

def backend_flags(x):
    if torch.backends.cuda.matmul.allow_tf32:
        x = x + 1
    if torch.backends.cudnn.enabled and not torch.backends.cudnn.benchmark:
        x = x * 2
    if torch.backends.mkldnn.enabled:
        x = x - 3
    return x + torch.backends.cudnn.allow_tf32


@pytest.mark.parametrize("flag", [
    (torch.backends.cuda.matmul, "allow_tf32"),
    (torch.backends.cudnn, "enabled"),
    (torch.backends.cudnn, "benchmark"),
    (torch.backends.cudnn, "allow_tf32"),
    (torch.backends.mkldnn, "enabled"),
], ids=lambda f: f"{type(f[0]).__name__}.{f[1]}" if isinstance(f, tuple) else "")
def test_backend_switches_are_read_and_guarded_by_value(counting, flag):
    holder, name = flag
    before = getattr(holder, name)
    x = torch.randn(3)
    # torch's test helpers (imported by the OpInfo tests) freeze cudnn's and mkldnn's switches
    # outside their flags() context managers; torch's own way past that, as flags() does
    unfrozen = getattr(torch.backends, "__allow_nonbracketed_mutation")
    try:
        compiled = check_one_graph(counting, backend_flags, x)
        with unfrozen():
            setattr(holder, name, not before)
        assert_same(compiled(x), backend_flags(x))
        assert len(counting.graphs) == 2  # the switch changed: a recompile
    finally:
        with unfrozen():
            setattr(holder, name, before)


# -- indexing by a 0-d tensor ----------------------------------------------------------------------

def test_indexing_by_a_0d_tensor_breaks_at_the_subscript_not_the_frame(counting):
    def fn(x, idx):
        y = x * 2
        picked = y[idx[0]]
        return picked + 1, y

    x, idx = torch.randn(5), torch.tensor([2])
    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(x, idx), fn(x, idx))
    assert len(counting.graphs) == 2  # as torch.compile: one break at the subscript
    assert len(kiln.session().stats.breaks) == 1
    assert_same(compiled(x, torch.tensor([4])), fn(x, torch.tensor([4])))
    assert len(counting.graphs) == 2


def test_a_0d_tensor_index_gives_a_view_as_eager():
    def fn(x, idx):
        row = x[idx[0]]
        row.add_(100)
        return x.sum()

    x, idx = torch.randn(3, 2), torch.tensor([1])
    compiled = kiln.compile(fn, backend=CountingBackend())
    a, b = x.clone(), x.clone()
    assert_same(compiled(a, idx), fn(b, idx))
    assert_same(a, b)


# -- transformers ----------------------------------------------------------------------------------

transformers_utils = pytest.importorskip("transformers.utils")
activations = pytest.importorskip("transformers.activations")


@dataclasses.dataclass
class Output(transformers_utils.ModelOutput):
    logits: torch.Tensor = None
    hidden: torch.Tensor | None = None
    extra: torch.Tensor | None = None


def test_model_output_in_and_out_by_attribute_key_index_and_iteration(counting):
    def fn(out):
        total = sum(v.sum() for v in out.values())
        n = len(out) + ("extra" in out) + len(out.to_tuple()) + len(list(out.keys()))
        first = out[0]
        made = Output(logits=out.logits * 2 + first, hidden=out["hidden"] + total + n)
        return made, made["logits"], made[1], made.to_tuple(), [k for k in made], out.get("extra")

    given = Output(logits=torch.randn(2), hidden=torch.randn(2))
    compiled = check_one_graph(counting, fn, given)
    result = compiled(given)[0]
    assert type(result) is Output and list(result.keys()) == ["logits", "hidden"] and result.extra is None
    full = Output(logits=torch.randn(2), hidden=torch.randn(2), extra=torch.randn(2))
    assert_same(compiled(full), fn(full))  # another key set: a recompile, not a stale answer
    assert len(counting.graphs) == 2


def test_class_instantier_registries_build_modules(counting):
    def fn(x):
        return activations.ACT2FN["gelu"](x) + activations.ACT2CLS["relu"]()(x) + activations.ACT2FN["silu"](x)

    check_one_graph(counting, fn, torch.randn(4))


# -- torch.distributions, custom ops, torch._check ---------------------------------------------------

def test_distributions_helpers(counting):
    dist = torch.distributions

    def fn(mu, logits, x, k, b):
        normal = dist.Normal(mu, torch.ones_like(mu), validate_args=False)
        categorical = dist.Categorical(logits=logits, validate_args=False)  # probs: a lazy_property
        independent = dist.Independent(dist.Normal(mu, mu.exp(), validate_args=False), 1, validate_args=False)
        mvn = dist.MultivariateNormal(mu, scale_tril=torch.eye(3), validate_args=False)
        bernoulli = dist.Bernoulli(probs=mu.sigmoid(), validate_args=False)
        return (normal.log_prob(x), normal.entropy(), normal.stddev, categorical.log_prob(k), categorical.probs,
                categorical.entropy(), independent.log_prob(x), independent.batch_shape, mvn.log_prob(x),
                bernoulli.log_prob(b), bernoulli.logits)

    check_one_graph(counting, fn, torch.randn(3), torch.randn(2, 4), torch.randn(3), torch.tensor([1, 3]),
                    torch.tensor([0.0, 1.0, 1.0]))


def test_distribution_argument_validation_raises_as_eager():
    # eager checks the parameters (a data-dependent test, so a graph break); torch.compile
    # skips the check and returns nan where eager raises. Asked for explicitly: torch.compile's
    # first use turns the process-wide default off (Distribution.set_default_validate_args)
    def fn(mu, scale, x):
        return torch.distributions.Normal(mu, scale, validate_args=True).log_prob(x)

    compiled = kiln.compile(fn, backend=CountingBackend())
    mu, x = torch.randn(3), torch.randn(3)
    assert_same(compiled(mu, torch.ones(3), x), fn(mu, torch.ones(3), x))
    with pytest.raises(ValueError, match="Expected parameter scale"):
        compiled(mu, -torch.ones(3), x)


_library = torch.library.Library("kiln_long_tail", "DEF")
_library.define("twice(Tensor x) -> Tensor")
torch.library.impl(_library, "twice", "CPU")(lambda x: x * 2)
torch.library.register_fake("kiln_long_tail::twice", lib=_library)(lambda x: torch.empty_like(x))


@torch.library.custom_op("kiln_long_tail::shifted", mutates_args=())
def shifted(x: torch.Tensor, by: float) -> torch.Tensor:
    return x + by


@shifted.register_fake
def _(x, by):
    return torch.empty_like(x)


def test_custom_ops_with_a_fake_implementation(counting):
    def fn(x):
        return torch.ops.kiln_long_tail.twice(x + 1) - shifted(x, 0.5)

    check_one_graph(counting, fn, torch.randn(3))


def test_torch_check_with_a_message_lambda(counting):
    def fn(x):
        torch._check(x.shape[0] > 1, lambda: f"too short: {x.shape}")
        return x + 1

    check_one_graph(counting, fn, torch.randn(3))


def test_torch_size_arithmetic_and_comparisons_keep_eagers_types(counting):
    def fn(x):
        s = x.shape
        sums = (s + (2,), (2,) + s, torch.Size([4]) + s, s + torch.Size([]), s + s)  # noqa: RUF005
        tests = (s[1:] == torch.Size([4]), s != torch.Size([3, 4]), s == (3, 4), s == [3, 4], s[0:1] == [3])
        return x.reshape(sums[2][1:]), sums, tests

    check_one_graph(counting, fn, torch.randn(3, 4))


def test_aten_ops_called_by_overload_are_graph_ops(counting):
    # torch.ops.aten.<op>.<overload>: reading the overload off the packet was a graph break
    def fn(x):
        out, indices = torch.nn.functional.max_pool2d_with_indices(x, 2, return_indices=True)
        grad = torch.ops.aten.max_pool2d_with_indices_backward.default(
            torch.ones_like(out), x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices)
        return torch.ops.aten.relu.default(grad - 0.5), torch.ops.aten.add.Tensor(out, x.mean())

    check_one_graph(counting, fn, torch.randn(1, 2, 4, 4))
