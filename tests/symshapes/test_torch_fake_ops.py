"""Fake-tensor op coverage: for each op the fake result's shape, stride, dtype and device equal
the real result's, with static sizes and with symbolic sizes (after substituting the hints)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from kiln.symshapes import ShapeEnv
from kiln.symshapes.bridge import (
    DispatchCache,
    FakeTensor,
    FakeTensorMode,
    UnsupportedOpError,
    from_real,
)


@dataclass
class Spec:
    shape: tuple
    dtype: torch.dtype = torch.float32
    dyn: tuple = ()  # dims made symbolic in the symbolic run
    kind: str = "randn"  # randn | index:<high> | bool

    def real(self, gen: torch.Generator) -> torch.Tensor:
        if self.kind.startswith("index"):
            return torch.randint(0, int(self.kind.split(":")[1]), self.shape, generator=gen)
        if self.kind == "bool":
            return torch.rand(self.shape, generator=gen) > 0.5
        if self.kind == "pos":
            return torch.rand(self.shape, generator=gen, dtype=self.dtype) + 0.5
        return torch.randn(self.shape, generator=gen, dtype=self.dtype)


def S(*shape, dyn=(), dtype=torch.float32, kind="randn"):
    return Spec(tuple(shape), dtype, tuple(dyn), kind)


X = S(6, 10, dyn=(0, 1))
B = S(3, 6, 10, dyn=(0, 1))
IMG = S(2, 3, 12, 12, dyn=(0, 2, 3))

CASES = {
    # elementwise, broadcasting
    "add": (lambda a, b: a + b, [X, S(10, dyn=(0,))]),
    "add_broadcast_1": (lambda a, b: a + b, [X, S(6, 1, dyn=(0,))]),
    "sub_scalar": (lambda a: a - 2.5, [X]),
    "mul": (lambda a, b: a * b, [B, S(6, 10, dyn=(0, 1))]),
    "div": (lambda a, b: a / b, [X, S(1, 10, dyn=(1,), kind="pos")]),
    "pow": (lambda a: a.pow(2), [X]),
    "where": (lambda c, a, b: torch.where(c, a, b), [S(6, 10, kind="bool", dyn=(0,)), X, S(10, dyn=(0,))]),
    "maximum": (torch.maximum, [X, S(6, 10, dyn=(0, 1))]),
    "relu": (torch.relu, [X]),
    "gelu": (F.gelu, [X]),
    "silu": (F.silu, [X]),
    "sigmoid": (torch.sigmoid, [X]),
    "tanh": (torch.tanh, [X]),
    "exp": (torch.exp, [X]),
    "log": (torch.log, [S(6, 10, dyn=(0,), kind="pos")]),
    "sqrt_rsqrt": (lambda a: torch.rsqrt(a) + torch.sqrt(a), [S(6, 10, dyn=(1,), kind="pos")]),
    "abs_neg": (lambda a: -a.abs(), [X]),
    "clamp": (lambda a: a.clamp(-1, 1), [X]),
    "eq_compare": (lambda a, b: a > b, [X, S(10, dyn=(0,))]),
    "logical_and": (torch.logical_and, [S(6, 10, kind="bool", dyn=(0,)), S(6, 10, kind="bool")]),
    "type_promotion": (lambda a, b: a + b, [S(6, 10, dtype=torch.int64, kind="index:5", dyn=(0,)), S(10, dtype=torch.float16)]),
    "to_dtype": (lambda a: a.to(torch.bfloat16), [X]),
    "float_to_int": (lambda a: a.long(), [X]),
    "dropout_eval": (lambda a: F.dropout(a, 0.5, training=False), [X]),
    "masked_fill": (lambda a, m: a.masked_fill(m, 0.0), [X, S(6, 10, kind="bool", dyn=(0, 1))]),
    "lerp": (lambda a, b: torch.lerp(a, b, 0.3), [X, S(6, 10, dyn=(0, 1))]),
    "addcmul": (lambda a, b, c: torch.addcmul(a, b, c, value=0.5), [X, X, X]),
    # reductions
    "sum": (lambda a: a.sum(), [X]),
    "sum_dim": (lambda a: a.sum(1), [B]),
    "sum_keepdim": (lambda a: a.sum(-1, keepdim=True), [B]),
    "mean_keepdim": (lambda a: a.mean((0, 2), keepdim=True), [B]),
    "amax": (lambda a: a.amax(1), [B]),
    "max_dim": (lambda a: a.max(1), [B]),
    "argmax": (lambda a: a.argmax(-1), [B]),
    "var": (lambda a: a.var(1, keepdim=True), [B]),
    "std_mean": (lambda a: torch.std_mean(a, dim=0), [X]),
    "prod": (lambda a: a.prod(0), [X]),
    "norm": (lambda a: torch.linalg.vector_norm(a, dim=-1), [B]),
    "logsumexp": (lambda a: torch.logsumexp(a, 1), [X]),
    "cumsum": (lambda a: a.cumsum(1), [X]),
    "all_any": (lambda m: (m.all(1), m.any()), [S(6, 10, kind="bool", dyn=(0,))]),
    "topk": (lambda a: torch.topk(a, 3, dim=1), [X]),
    "sort": (lambda a: torch.sort(a, dim=-1), [X]),
    # views and shape ops
    "view": (lambda a: a.view(-1), [X]),
    "view_split_dim": (lambda a: a.view(a.shape[0], 2, 5), [X]),
    "reshape_noncontig": (lambda a: a.t().reshape(-1), [X]),
    "transpose": (lambda a: a.transpose(0, 2), [B]),
    "permute": (lambda a: a.permute(2, 0, 1), [B]),
    "t_contiguous": (lambda a: a.t().contiguous(), [X]),
    "expand": (lambda a: a.expand(4, -1, -1), [S(1, 6, 10, dyn=(1, 2))]),
    "unsqueeze_squeeze": (lambda a: a.unsqueeze(1).squeeze(1), [X]),
    "flatten": (lambda a: a.flatten(1), [IMG]),
    "unflatten": (lambda a: a.unflatten(1, (2, 5)), [X]),
    "narrow": (lambda a: a.narrow(1, 2, 4), [X]),
    "slice": (lambda a: a[:, 1:7:2], [X]),
    "select": (lambda a: a[2], [B]),
    "diagonal": (lambda a: a.diagonal(dim1=-2, dim2=-1), [B]),
    "unbind": (lambda a: a.unbind(0), [S(3, 6, dyn=(1,))]),
    "chunk": (lambda a: a.chunk(2, dim=1), [X]),
    "split": (lambda a: a.split(4, dim=1), [X]),
    "split_sizes": (lambda a: a.split([3, 7], dim=1), [X]),
    "cat": (lambda a, b: torch.cat([a, b], dim=0), [X, S(4, 10, dyn=(0, 1))]),
    "stack": (lambda a, b: torch.stack([a, b], dim=1), [X, S(6, 10, dyn=(0, 1))]),
    "repeat": (lambda a: a.repeat(2, 1, 3), [X]),
    "flip": (lambda a: a.flip(0), [X]),
    "roll": (lambda a: a.roll(2, 1), [X]),
    "tril": (lambda a: a.tril(), [X]),
    "pad": (lambda a: F.pad(a, (1, 2, 3, 4)), [IMG]),
    "contiguous_channels_last": (lambda a: a.contiguous(memory_format=torch.channels_last), [IMG]),
    "clone_preserve": (lambda a: a.permute(0, 2, 3, 1).clone(), [IMG]),
    "empty_like": (lambda a: torch.empty_like(a.transpose(0, 1)), [X]),
    "zeros_like": (lambda a: torch.zeros_like(a), [X]),
    "new_zeros": (lambda a: a.new_zeros(a.shape[0], 3), [X]),
    "full": (lambda a: torch.full((a.shape[1], 2), 1.5), [X]),
    "arange": (lambda a: torch.arange(a.shape[0]), [X]),
    # indexing
    "index_tensor": (lambda a, i: a[i], [X, S(5, dtype=torch.int64, kind="index:6", dyn=(0,))]),
    "index_2d": (lambda a, i: a[:, i], [X, S(4, 3, dtype=torch.int64, kind="index:10")]),
    "gather": (lambda a, i: a.gather(1, i), [X, S(6, 4, dtype=torch.int64, kind="index:10", dyn=(0,))]),
    "index_select": (lambda a, i: a.index_select(0, i), [X, S(7, dtype=torch.int64, kind="index:6")]),
    "scatter_add": (lambda a, i, s: a.scatter_add(1, i, s), [X, S(6, 4, dtype=torch.int64, kind="index:10"), S(6, 4)]),
    "index_put": (lambda a, i, v: a.index_put((i,), v), [X, S(3, dtype=torch.int64, kind="index:6"), S(3, 10)]),
    "embedding": (lambda i, w: F.embedding(i, w), [S(4, 7, dtype=torch.int64, kind="index:20", dyn=(0, 1)), S(20, 8, dyn=(0, 1))]),
    "one_hot": (lambda i: F.one_hot(i, 5), [S(7, dtype=torch.int64, kind="index:5", dyn=(0,))]),
    # linear algebra
    "matmul": (torch.matmul, [X, S(10, 7, dyn=(0, 1))]),
    "bmm": (torch.bmm, [B, S(3, 10, 4, dyn=(0, 1))]),
    "matmul_broadcast": (torch.matmul, [B, S(10, 4, dyn=(0,))]),
    "matmul_vec": (torch.matmul, [X, S(10, dyn=(0,))]),
    "linear": (F.linear, [B, S(7, 10, dyn=(1,)), S(7)]),
    "addmm": (lambda c, a, b: torch.addmm(c, a, b), [S(7), X, S(10, 7)]),
    "einsum": (lambda a, b: torch.einsum("bij,bjk->bik", a, b), [B, S(3, 10, 4)]),
    "outer": (torch.outer, [S(6, dyn=(0,)), S(9, dyn=(0,))]),
    "kron": (torch.kron, [S(3, 4, dyn=(0, 1)), S(2, 5, dyn=(0, 1))]),  # asks aten.size via the dispatcher
    "take_along_dim": (lambda a, i: torch.take_along_dim(a, i, 1), [X, S(6, 1, dtype=torch.int64, kind="index:10", dyn=(0,))]),
    # nn
    "softmax": (lambda a: F.softmax(a, -1), [B]),
    "log_softmax": (lambda a: F.log_softmax(a, 1), [B]),
    "layer_norm": (lambda a, w, b: F.layer_norm(a, (10,), w, b), [B, S(10), S(10)]),
    "rms_norm": (lambda a, w: F.rms_norm(a, (10,), w), [B, S(10)]),
    "group_norm": (lambda a: F.group_norm(a, 3), [S(2, 6, 5, 5, dyn=(0, 2, 3))]),
    "batch_norm_eval": (lambda a, m, v: F.batch_norm(a, m, v, training=False), [IMG, S(3), S(3, kind="pos")]),
    "conv2d": (lambda a, w, b: F.conv2d(a, w, b, stride=2, padding=1), [IMG, S(5, 3, 3, 3), S(5)]),
    "conv1d": (lambda a, w: F.conv1d(a, w, padding=2), [S(2, 4, 17, dyn=(0, 2)), S(6, 4, 5)]),
    "conv_transpose2d": (lambda a, w: F.conv_transpose2d(a, w, stride=2), [IMG, S(3, 4, 3, 3)]),
    "max_pool2d": (lambda a: F.max_pool2d(a, 2), [IMG]),
    "avg_pool2d": (lambda a: F.avg_pool2d(a, 3, stride=2, padding=1), [IMG]),
    "adaptive_avg_pool2d": (lambda a: F.adaptive_avg_pool2d(a, (4, 4)), [IMG]),
    "interpolate": (lambda a: F.interpolate(a, scale_factor=2, mode="nearest"), [IMG]),
    "cross_entropy": (lambda a, t: F.cross_entropy(a, t), [X, S(6, dtype=torch.int64, kind="index:10", dyn=(0,))]),
    "mse_loss": (F.mse_loss, [X, S(6, 10, dyn=(0, 1))]),
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [S(2, 4, 9, 8, dyn=(0, 2)), S(2, 4, 11, 8, dyn=(0, 2)), S(2, 4, 11, 8, dyn=(0, 2))]),
    "sdpa_causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), [S(2, 4, 9, 8, dyn=(2,)), S(2, 4, 9, 8, dyn=(2,)), S(2, 4, 9, 8, dyn=(2,))]),
    # in-place
    "add_": (lambda a, b: a.add_(b), [X, S(10, dyn=(0,))]),
    "mul_scalar_": (lambda a: a.mul_(2), [X]),
    "copy_": (lambda a, b: a.copy_(b), [X, S(10, dyn=(0,))]),
    # in-place changes of sizes/strides (the wrapper must follow)
    "t_": (lambda a: a.clone().t_(), [X]),
    "transpose_": (lambda a: a.clone().transpose_(0, 2), [B]),
    "unsqueeze_squeeze_": (lambda a: a.clone().unsqueeze_(1).squeeze_(1).unsqueeze_(0), [X]),
    "quantile": (lambda a: torch.quantile(a, 0.5), [X]),
}


def _flatten(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flatten(v)]
    return []


def torch_reads_data(name):
    """Whether torch's own fake tensors cannot run a case on this torch (its kernels read
    tensor data: torch 2.11's CPU ``quantile`` checks ``q`` with ``aten::equal``). No
    fake-tensor mode can run such a case; kiln must then fail with a clear error."""
    from torch._subclasses.fake_tensor import FakeTensorMode as TorchFakeTensorMode

    fn, specs = CASES[name]
    try:
        with TorchFakeTensorMode() as mode:
            fn(*[mode.from_tensor(t) for t in _inputs(specs)])
    except Exception:
        return True
    return False


def run_fake(name, mode, fakes):
    """``fn(*fakes)`` under ``mode``, or None when it fails with a clear error and torch's
    kernels need data for this case (any other failure, or this one elsewhere, fails)."""
    fn, _ = CASES[name]
    try:
        with mode:
            return fn(*fakes)
    except (UnsupportedOpError, RuntimeError) as e:
        clear = isinstance(e, UnsupportedOpError) or "symbolic sizes" in str(e)
        if not (clear and torch_reads_data(name)):
            raise
        return None


def _hint(env, v):
    return env.size_hint(v.node.expr) if isinstance(v, torch.SymInt) else v


def _inputs(specs, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [s.real(gen) for s in specs]


def _check(real_out, fake_out, env=None, device=None):
    reals, fakes = _flatten(real_out), _flatten(fake_out)
    assert len(reals) == len(fakes) > 0
    for r, f in zip(reals, fakes, strict=True):
        assert isinstance(f, FakeTensor)
        assert f.dtype == r.dtype
        assert f.device == (device or r.device)
        shape = [_hint(env, s) for s in f.shape] if env else list(f.shape)
        stride = [_hint(env, s) for s in f.stride()] if env else list(f.stride())
        assert shape == list(r.shape)
        if r.numel() > 1:
            assert stride == list(r.stride()), (stride, r.stride())


@pytest.mark.parametrize("name", sorted(CASES))
def test_static(name):
    fn, specs = CASES[name]
    mode = FakeTensorMode()
    reals = _inputs(specs)
    fakes = [from_real(mode, t) for t in reals]
    expected = fn(*[t.clone() for t in reals])
    out = run_fake(name, mode, fakes)
    if out is None:
        return  # torch's kernels read data here (see torch_reads_data)
    with mode:
        replayed = fn(*[from_real(mode, t) for t in reals])  # same metadata: served by the cache
    _check(expected, out)
    _check(expected, replayed)
    assert mode.cache.hits > 0 or mode.cache.misses == 0


def test_cache_replays_aliasing():
    mode = FakeTensorMode()
    base = from_real(mode, torch.randn(4, 6))
    with mode:
        first = [base.t(), base + 1, base.add_(1)]
        second = [base.t(), base + 1, base.add_(1)]
    assert mode.cache.hits == 3
    for a, b in zip(first, second, strict=True):
        assert (a.shape, a.stride(), a.storage_offset(), a.dtype) == (b.shape, b.stride(), b.storage_offset(), b.dtype)
    assert second[0].fake_storage is base.fake_storage
    assert second[1].fake_storage is not base.fake_storage and second[1].fake_storage is not first[1].fake_storage
    assert second[2] is base


def test_cache_key_sees_aliasing_between_arguments():
    mode = FakeTensorMode()
    base = torch.randn(2, 4, 4)
    a, b, c = from_real(mode, base[0]), from_real(mode, base[1]), from_real(mode, torch.randn(4, 4))
    assert a.fake_storage is b.fake_storage and a.stride() == c.stride() and a.storage_offset() == 0
    d, e = from_real(mode, base[0]), from_real(mode, torch.randn(4, 4))
    with mode:
        torch.mul(a, c)
        torch.mul(a, d)  # same metadata as (a, c), but both views of one storage
    assert (mode.cache.hits, mode.cache.misses) == (0, 2)
    with mode:
        torch.mul(a, e)
    assert mode.cache.hits == 1


def test_resizing_a_fake_in_place_is_refused():
    mode = FakeTensorMode()
    x, out = from_real(mode, torch.randn(3, 4)), from_real(mode, torch.empty(0))
    with pytest.raises(UnsupportedOpError, match=r"aten\.mul\.out.*resizes"), mode:
        torch.mul(x, 2, out=out)


def test_cache_follows_the_default_dtype():
    mode = FakeTensorMode()
    previous = torch.get_default_dtype()
    try:
        with mode:
            a = torch.empty(3)
            torch.set_default_dtype(torch.float64)
            b = torch.empty(3)
    finally:
        torch.set_default_dtype(previous)
    assert (a.dtype, b.dtype) == (torch.float32, torch.float64)


def test_cache_can_be_shared_or_disabled():
    shared = DispatchCache()
    real = torch.randn(3, 5)
    for _ in range(2):
        mode = FakeTensorMode(cache=shared)
        fake = from_real(mode, real)
        with mode:
            fake.sum(0)
    assert shared.hits == 1 and shared.misses == 1
    off = FakeTensorMode(cache=False)
    assert off.cache is None
    fake = from_real(off, real)
    with off:
        assert tuple(fake.sum(0).shape) == (5,)


def test_a_shared_cache_serves_modes_with_different_shape_envs_for_concrete_calls_only():
    shared = DispatchCache()
    real = torch.randn(4, 6)
    outs = []
    for _ in range(2):  # each with its own ShapeEnv, as a compiler makes one per capture
        mode = FakeTensorMode(ShapeEnv(), cache=shared)
        fake = from_real(mode, real)  # static sizes
        with mode:
            outs.append(fake.t().matmul(fake))
    assert (shared.hits, shared.misses) == (2, 2)  # t, matmul: computed once, replayed once
    assert all(tuple(o.shape) == (6, 6) for o in outs)
    # symbolic inputs: the key holds the ShapeEnv, so another env never sees the entry
    before = shared.hits
    for _ in range(2):
        mode = FakeTensorMode(ShapeEnv(), cache=shared)
        fake = from_real(mode, real, dynamic_dims=(0,), name="x")
        with mode:
            fake.t().matmul(fake)
    assert shared.hits == before
    # an unbacked output size is never stored under a shared (concrete) key
    for _ in range(2):
        mode = FakeTensorMode(ShapeEnv(), cache=shared)
        fake = from_real(mode, real)
        with mode:
            n = torch.nonzero(fake)
        assert not isinstance(n.shape[0], int)
    shared_entries = [spec for key, spec in shared.entries.items() if key[1] is None]
    assert shared_entries and all(isinstance(v, int) for spec in shared_entries
                                  if hasattr(spec, "size") for v in spec.size)


@pytest.mark.parametrize("name", sorted(CASES))
def test_symbolic(name):
    fn, specs = CASES[name]
    env = ShapeEnv()
    mode = FakeTensorMode(env)
    reals = _inputs(specs)
    fakes = [from_real(mode, t, dynamic_dims=s.dyn, name=f"in{i}") for i, (t, s) in enumerate(zip(reals, specs, strict=True))]
    expected = fn(*[t.clone() for t in reals])
    out = run_fake(name, mode, fakes)
    if out is None:
        return  # torch's kernels read data here (see torch_reads_data)
    with mode:
        # Duck sizing gives fresh fakes of the same sizes the same symbols: cache replays.
        again = [from_real(mode, t, dynamic_dims=s.dyn, name=f"in{i}") for i, (t, s) in enumerate(zip(reals, specs, strict=True))]
        replayed = fn(*again)
    _check(expected, out, env)
    _check(expected, replayed, env)
    assert mode.cache.hits > 0
    produced = env.produce_guards()
    values = {}
    for i, t in enumerate(reals):
        for d, size in enumerate(t.shape):
            values[f"in{i}", d] = size
    failing = produced.check({src: values[src.name, src.dim] for src in produced.sources.values()})
    assert failing == [], failing


def test_symbolic_sizes_really_symbolic():
    env = ShapeEnv()
    mode = FakeTensorMode(env)
    x = from_real(mode, torch.randn(6, 10), dynamic_dims=(0, 1), name="x")
    w = from_real(mode, torch.randn(10, 7), dynamic_dims=(1,), name="w")
    with mode:
        y = x @ w
    assert [str(s) for s in y.shape] == ["s0", "s3"]
    # w's static dim 0 met x's symbolic dim 1: the matmul check specialized it.
    assert env.replacements[env.symbols[1]] == 10


@pytest.mark.parametrize("name", ["matmul", "conv2d", "softmax", "layer_norm", "sdpa", "cat", "embedding", "sum_keepdim"])
def test_cuda_device_without_gpu(name):
    fn, specs = CASES[name]
    mode = FakeTensorMode(ShapeEnv())
    reals = _inputs(specs)
    expected = fn(*reals)
    with mode:
        fakes = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cuda") for t in reals]
        out = fn(*fakes)
    for r, f in zip(_flatten(expected), _flatten(out), strict=True):
        assert f.device.type == "cuda"
        assert list(f.shape) == list(r.shape)
        assert f.dtype == r.dtype


def test_case_count():
    assert len(CASES) >= 80
