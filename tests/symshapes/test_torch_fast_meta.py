"""The metadata rules for pointwise ops, _to_copy and view on symbolic sizes
(``kiln.symshapes.bridge._fast_meta``): every output's sizes, strides, storage offset, dtype
and aliasing equal eager torch's on the example values, no guard is recorded, and calls the
rules do not cover still run through torch's meta kernels."""

from __future__ import annotations

import pytest
import torch

from kiln.symshapes import ShapeEnv, ShapeEnvConfig
from kiln.symshapes.bridge import FakeTensorMode, from_torch


def _mode():
    env = ShapeEnv(ShapeEnvConfig(duck_shape=True, oblivious_one=True))
    return env, FakeTensorMode(env)


def _value(env, v):
    return v if type(v) is int else env.size_hint(from_torch(v).expr)


_P, _Q = 3, 5  # the sizes the cases are traced at; every other size in them is static


def _fake(mode, t):
    """A fake of ``t`` whose dims of size ``_P`` or ``_Q`` are symbols (one per size, shared
    between operands, as the batch and length of a model; strides follow from the real ones)."""
    return mode.from_real(t, dynamic_dims=[d for d in range(t.dim()) if t.shape[d] in (_P, _Q)])


def _check(env, fake, real, *, trivial_strides=False):
    assert tuple(_value(env, s) for s in fake.shape) == tuple(real.shape)
    strides = [_value(env, s) for s in fake.stride()]
    for d, (a, b) in enumerate(zip(strides, real.stride(), strict=True)):
        if not (trivial_strides and real.shape[d] == 1):
            assert a == b, (d, strides, real.stride())
    assert _value(env, fake.storage_offset()) == real.storage_offset()
    assert fake.dtype == real.dtype and fake.device == real.device


def _transposed(*shape):
    return torch.randn(*reversed(shape)).permute(*reversed(range(len(shape))))


def _rotary_q(p, q):
    return torch.randn(p, q, 4, 8).transpose(1, 2)  # (b, heads, t, d), heads inner


def _qkv(p, q):
    """The query of a fused qkv projection: a (p, q, 32) slice of a (p, q, 96) tensor."""
    return torch.randn(p, q, 96).split(32, dim=-1)[0]


F = torch.nn.functional

# (name, function, operands of sizes p, q): each output must match eager's metadata, and
# at least one ATen call is answered by a rule
_CASES = [
    # pointwise: TensorIterator's layouts and type promotion
    ("add contiguous", torch.add, lambda p, q: (torch.randn(p, q), torch.randn(p, q))),
    ("mul broadcast row", torch.mul, lambda p, q: (torch.randn(p, q), torch.randn(q))),
    ("mul broadcast both", torch.mul, lambda p, q: (torch.randn(p, 1), torch.randn(1, q))),
    ("le causal mask", torch.le, lambda p, q: (torch.arange(q).view(1, 1, 1, q), torch.arange(q).view(1, 1, q, 1))),
    ("mul transposed by broadcast", torch.mul, lambda p, q: (_rotary_q(p, q), torch.randn(1, 1, q, 8))),
    ("mul broadcast by transposed", torch.mul, lambda p, q: (torch.randn(1, 1, q, 8), _rotary_q(p, q))),
    ("add transposed + contiguous", torch.add, lambda p, q: (_rotary_q(p, q), torch.randn(p, 4, q, 8))),
    ("add contiguous + transposed", torch.add, lambda p, q: (torch.randn(p, 4, q, 8), _rotary_q(p, q))),
    ("neg of a slice", torch.neg, lambda p, q: (_rotary_q(p, q)[..., :4],)),
    ("neg transposed", torch.neg, lambda p, q: (_transposed(p, 4, q),)),
    ("sub same permuted strides", torch.sub, lambda p, q: (_transposed(p, q), _transposed(p, q))),
    ("add int and float promotes", torch.add, lambda p, q: (torch.arange(p * q).view(p, q), torch.randn(p, q))),
    ("mul by a 0-dim tensor", torch.mul, lambda p, q: (torch.randn(p, q), torch.tensor(2.0, dtype=torch.float64))),
    ("mul by a python float", lambda a: a * 2.5, lambda p, q: (torch.arange(p * q).view(p, q),)),
    ("bitwise_and bool", torch.bitwise_and, lambda p, q: (torch.rand(1, 1, q, q) > 0.5, torch.rand(p, 1, 1, q) > 0.5)),
    ("where", torch.where, lambda p, q: (torch.rand(p, q) > 0.5, torch.randn(p, q), torch.randn(q))),
    ("where transposed", torch.where, lambda p, q: (torch.rand(q, p).t() > 0.5, _transposed(p, q), torch.randn(p, q))),
    ("pow int scalar", lambda a: torch.pow(a, 2), lambda p, q: (torch.randn(p, q, dtype=torch.float64),)),
    ("true divide ints", torch.div, lambda p, q: (torch.arange(1, p * q + 1).view(p, q), torch.arange(1, q + 1))),
    ("floor divide", lambda a, b: torch.div(a, b, rounding_mode="floor"),
     lambda p, q: (torch.arange(p * q).view(p, q), torch.arange(1, q + 1))),
    ("silu half", F.silu, lambda p, q: (torch.randn(p, q, dtype=torch.float16),)),
    ("clone contiguous format", lambda a: a.clone(memory_format=torch.contiguous_format),
     lambda p, q: (_transposed(p, q),)),
    ("clone dense", torch.clone, lambda p, q: (_transposed(p, 4, q),)),
    ("masked_fill", lambda a, m: a.masked_fill(m, 0.0), lambda p, q: (torch.randn(p, q), torch.rand(q) > 0.5)),
    ("sigmoid channels last", torch.sigmoid,
     lambda p, q: (torch.randn(2, p, 4, q).to(memory_format=torch.channels_last),)),
    # views
    ("view flatten", lambda a: a.view(-1), lambda p, q: (torch.randn(p, q, 4),)),
    ("view heads of a qkv slice", lambda a: a.view(a.shape[0], a.shape[1], -1, 8), lambda p, q: (_qkv(p, q),)),
    ("view merge heads", lambda a: a.view(a.shape[0], a.shape[1], -1), lambda p, q: (torch.randn(p, q, 4, 8),)),
    ("view of a transposed tensor", lambda a: a.view(a.shape[0], a.shape[1]), lambda p, q: (_transposed(p, q),)),
    ("unsqueeze", lambda a: (a.unsqueeze(0), a.unsqueeze(1), a.unsqueeze(-1)), lambda p, q: (_transposed(p, q),)),
    ("transpose and permute", lambda a: (a.transpose(0, 2), a.permute(2, 0, 1), a.mT),
     lambda p, q: (torch.randn(p, 4, q),)),
    ("expand", lambda a, b: (a.expand(b.shape[0], -1, b.shape[2]), a.expand(3, *b.shape)),
     lambda p, q: (torch.randn(p, 1, q), torch.randn(p, 4, q))),
    ("slice", lambda a: (a[..., 2:], a[..., :4], a[..., 1:7:3], a[:, : a.shape[1]], a[:, 0:]),
     lambda p, q: (torch.randn(p, q, 8),)),
    ("slice of a static outer dim", lambda a: (a[1:3], a[-2:, :, 3:]), lambda p, q: (torch.randn(4, p, 8),)),
    ("select", lambda a: (a[0], a[:, 0], a[..., -1]), lambda p, q: (torch.randn(p, q, 8),)),
    ("select of a static outer dim", lambda a: (a[2], a[-1, :, 5]), lambda p, q: (torch.randn(4, p, 8),)),
    # products, normalizations, reductions, cat, embedding
    ("mm", torch.mm, lambda p, q: (torch.randn(p, 4), torch.randn(4, q))),
    ("bmm", torch.bmm, lambda p, q: (torch.randn(p, q, 4), torch.randn(p, 4, 6))),
    ("addmm", torch.addmm, lambda p, q: (torch.randn(q), torch.randn(p, 4), torch.randn(4, q))),
    ("linear 3-d", F.linear, lambda p, q: (torch.randn(p, q, 8), torch.randn(6, 8), torch.randn(6))),
    ("matmul of a transposed operand", torch.matmul, lambda p, q: (_transposed(p, 8), torch.randn(8, q))),
    ("layer_norm", lambda a, w, b: F.layer_norm(a, (8,), w, b), lambda p, q: (torch.randn(p, q, 8),
                                                                               torch.randn(8), torch.randn(8))),
    ("native_layer_norm stats", lambda a: torch.native_layer_norm(a, [8], None, None, 1e-5),
     lambda p, q: (torch.randn(p, q, 8),)),
    ("softmax", lambda a: (a.softmax(-1), a.log_softmax(1), a.half().softmax(-1, dtype=torch.float32)),
     lambda p, q: (torch.randn(p, q, 8),)),
    ("reductions", lambda a: (a.sum(), a.sum(1), a.mean(-1, keepdim=True), a.amax((0, 2)), a.sum(0, dtype=torch.float64)),
     lambda p, q: (torch.randn(p, q, 8),)),
    ("int sum", lambda a: (a.sum(-1), a.sum()), lambda p, q: (torch.arange(p * q).view(p, q),)),
    ("cat", lambda a, b: (torch.cat([a, b], 1), torch.cat([a, b.double()], -1)),
     lambda p, q: (torch.randn(p, q, 8), torch.randn(p, q, 8))),
    ("cat with a legacy empty tensor", lambda a, e: torch.cat([e, a], -2), lambda p, q: (_rotary_q(p, q), torch.empty(0))),
    ("cat of transposed halves", lambda a: torch.cat([-a[..., 4:], a[..., :4]], -1), lambda p, q: (_rotary_q(p, q),)),
    ("embedding", F.embedding, lambda p, q: (torch.randint(0, 10, (p, q)), torch.randn(10, 8))),
]
_IDS = [c[0] for c in _CASES]


def _outputs(out):
    return out if isinstance(out, tuple) else (out,)


def _aliases(out, inputs) -> list:
    """For each input, whether ``out`` shares its storage (fakes: FakeStorage; real: data)."""
    if isinstance(out, torch.Tensor) and hasattr(out, "fake_storage"):
        return [getattr(t, "fake_storage", None) is out.fake_storage for t in inputs]
    return [t.untyped_storage().data_ptr() == out.untyped_storage().data_ptr() and t.numel() > 0 for t in inputs]


@pytest.mark.parametrize("name, fn, operands", _CASES, ids=_IDS)
def test_metadata_matches_eager_without_guards(name, fn, operands):
    real = operands(_P, _Q)
    env, mode = _mode()
    fakes = [_fake(mode, t) for t in real]
    with mode:
        out = fn(*fakes)
    expected = fn(*real)
    for o, e in zip(_outputs(out), _outputs(expected), strict=True):
        _check(env, o, e)
        assert _aliases(o, fakes) == _aliases(e, real), name
    assert mode.fast_hits >= 1, name
    assert env.guards == ()


@pytest.mark.parametrize("ones", [(1, 5), (3, 1), (1, 1)])
@pytest.mark.parametrize("name, fn, operands", _CASES, ids=_IDS)
def test_metadata_holds_where_a_symbol_is_1(name, fn, operands, ones):
    """A size that may be 1 is a symbol: the output metadata traced at sizes (3, 5) must be
    eager's at (1, 5), (3, 1) and (1, 1) too, but for the stride of a dim of size 1 (which
    addresses nothing)."""
    env, mode = _mode()
    fakes = [_fake(mode, t) for t in operands(_P, _Q)]
    with mode:
        out = fn(*fakes)
    at = {sym: dict(zip((_P, _Q), ones, strict=True))[env.size_hint(sym)] for sym in env.symbols}

    def value(v):
        return v if type(v) is int else int(from_torch(v).expr.xreplace(at))

    for o, e in zip(_outputs(out), _outputs(fn(*operands(*ones))), strict=True):
        assert tuple(value(s) for s in o.shape) == tuple(e.shape)
        strides = [value(s) for s in o.stride()]
        for d, (a, b) in enumerate(zip(strides, e.stride(), strict=True)):
            assert e.shape[d] == 1 or a == b, (d, strides, e.stride())
        if e.numel() > 1:
            assert value(o.storage_offset()) == e.storage_offset()


def test_to_copy_keeps_a_contiguous_layout_and_changes_dtype_and_device():
    real = torch.randn(3, 5)
    env, mode = _mode()
    x = _fake(mode, real)
    with mode:
        y = x.to(torch.float16)
        z = x.to(dtype=torch.int32, copy=True)
    _check(env, y, real.to(torch.float16))
    _check(env, z, real.to(dtype=torch.int32, copy=True))
    assert y.fake_storage is not x.fake_storage
    assert mode.fast_hits == 2 and env.guards == ()


def test_to_copy_to_another_device_reports_that_device():
    _, mode = _mode()
    x = _fake(mode, torch.randn(3, 5))
    with mode:
        y = torch.ops.aten._to_copy(x, device=torch.device("cuda"))
    assert y.device.type == "cuda" and mode.fast_hits == 1
    assert tuple(from_torch(s).expr for s in y.shape) == tuple(from_torch(s).expr for s in x.shape)


@pytest.mark.parametrize("sizes", [(15,), (-1,), (3, -1), (-1, 5, 1), (1, 3, 1, 5)])
def test_view_of_a_contiguous_tensor_is_contiguous_and_shares_storage(sizes):
    real = torch.randn(3, 5)
    env, mode = _mode()
    x = _fake(mode, real)
    s0, s1 = x.shape
    symbolic = [{15: s0 * s1, 3: s0, 5: s1}.get(v, v) for v in sizes]
    with mode:
        y = x.view(symbolic)
    _check(env, y, real.view(sizes))
    assert y.fake_storage is x.fake_storage
    assert mode.fast_hits == 1 and env.guards == ()


def test_view_with_an_inexact_minus_one_runs_the_meta_kernel():
    """(s0, s1) viewed as (s0, -1, 5): s1 / 5 is not an exact expression; torch decides it."""
    real = torch.randn(3, 5)
    env, mode = _mode()
    x = _fake(mode, real)
    with mode:
        y = x.view(x.shape[0], -1, 5)
    _check(env, y, real.view(3, -1, 5))
    assert mode.fast_hits == 0


def test_unsafe_view_is_a_new_storage():
    real = torch.randn(3, 5)
    env, mode = _mode()
    x = _fake(mode, real)
    with mode:
        y = torch.ops.aten._unsafe_view(x, [x.shape[0] * x.shape[1]])
    _check(env, y, torch.ops.aten._unsafe_view(real, [15]))
    assert y.fake_storage is not x.fake_storage and mode.fast_hits == 1


def test_broadcasting_two_different_symbols_is_left_to_the_meta_kernel():
    env = ShapeEnv(ShapeEnvConfig(duck_shape=False, oblivious_one=True))
    mode = FakeTensorMode(env)
    x, y = _fake(mode, torch.randn(3, 4)), _fake(mode, torch.randn(3, 4))
    with mode:
        x + y
    assert mode.fast_hits == 0
    assert env.guards  # torch's kernel related the two symbols


def test_masked_fill_broadcasts_self_against_a_larger_mask():
    env, mode = _mode()
    real, mask = torch.randn(1, 4), torch.rand(3, 4) > 0.5
    x = mode.from_real(real, dynamic_dims=(0, 1))
    with mode:
        y = x.masked_fill(mode.from_real(mask), 0.0)
    _check(env, y, real.masked_fill(mask, 0.0))


def test_static_operands_take_the_meta_kernel():
    _, mode = _mode()
    x = mode.from_real(torch.randn(3, 4))
    with mode:
        x + x
    assert mode.fast_hits == 0


def test_a_call_the_dtype_probe_rejects_runs_the_meta_kernel():
    """A float alpha for integer tensors: torch's C++ kernel refuses it on the probe, so the
    rule answers nothing and torch's own kernel raises, as eager does."""
    _, mode = _mode()
    x = _fake(mode, torch.arange(6).view(2, 3))
    with mode:
        torch.add(x, x, alpha=2)
        assert mode.fast_hits == 1
        with pytest.raises((RuntimeError, ValueError), match="alpha"):
            torch.add(x, x, alpha=2.5)
    assert mode.fast_hits == 1


@pytest.mark.parametrize("make, sizes, plan", [
    (lambda: torch.randn(3, 5, 4), lambda x: (x.shape[0] * x.shape[1], 4), "view"),
    (lambda: torch.randn(3, 5, 4).transpose(0, 1), lambda x: (x.shape[0], x.shape[1], 4), "view"),
    (lambda: torch.randn(3, 2, 5, 4)[:, :, None].expand(3, 2, 2, 5, 4),
     lambda x: (x.shape[0], 4, x.shape[3], 4), "copy"),
    (lambda: torch.randn(3, 4, 6).transpose(1, 2), lambda x: (x.shape[0], 24), "copy"),
    # a view when a symbolic size is 1: left to torch's kernel (guards)
    (lambda: torch.randn(5, 3).t(), lambda x: (x.shape[0] * x.shape[1],), None),
    (lambda: torch.randn(4, 3).t(), lambda x: (x.shape[0] * x.shape[1],), None),
])
def test_reshape_plan_matches_eager_for_the_traced_sizes(make, sizes, plan):
    from kiln.symshapes.bridge import reshape_plan

    real = make()
    env, mode = _mode()
    x = _fake(mode, real)
    assert reshape_plan(x, sizes(x)) == plan
    eager = real.reshape(sizes(real))
    if plan is not None:
        assert (eager.untyped_storage().data_ptr() == real.untyped_storage().data_ptr()) == (plan == "view")
    assert env.guards == ()


def test_reshape_plan_leaves_to_torch_what_depends_on_a_size_being_1():
    """(n, 1).t() flattened: a view when n is 1, a copy otherwise."""
    from kiln.symshapes.bridge import reshape_plan

    _, mode = _mode()
    x = mode.from_real(torch.randn(5, 1), dynamic_dims=(0, 1)).t()
    assert reshape_plan(x, (x.shape[0] * x.shape[1],)) is None
