"""Random reductions over permuted inputs through both code generators (C++, and Triton: CUDA
tensors on a GPU, otherwise CPU tensors through triton's interpreter), against float64 and as
near it as eager: sums, means, maxima, variances, softmax, log-softmax and LayerNorm over a
random dimension of a permuted input, with pointwise work before and after (a value read
twice, realized and maybe kept in registers), at sizes around the Triton kernels' limits
(rows of 1, 17, 33 and 40000 elements: persistent and looped) and the split reductions'.
Seeded: the same programs on every run."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from triton_support import DEVICE, OPTIONS

import kiln

_REDUCE = {
    "sum": lambda v, d: v.sum(d, keepdim=True),
    "mean": lambda v, d: v.mean(d, keepdim=True),
    "amax": lambda v, d: v.amax(d, keepdim=True),
    "var": lambda v, d: v.var(d, keepdim=True),
    "softmax": lambda v, d: torch.softmax(v, d),
    "log_softmax": lambda v, d: torch.log_softmax(v, d),
    "layer_norm": lambda v, d: F.layer_norm(v.movedim(d, -1), (v.shape[d],)).movedim(-1, d),
}


def _program(rng: random.Random, wide: bool):
    ndim = rng.choice([2, 3])
    shape = [rng.choice([1, 3, 17, 33]) for _ in range(ndim)]
    dim = rng.randrange(ndim)
    if wide:  # above triton_persistent_max: a looped row (few of them: the interpreter is slow)
        shape = [40000 if d == dim else rng.choice([1, 2]) for d in range(ndim)]
    perm = rng.sample(range(ndim), ndim)
    kind = rng.choice(sorted(_REDUCE))
    pre = rng.random() < 0.5
    post = rng.random() < 0.5

    def fn(x):
        v = x.permute(*perm)
        if pre:
            v = torch.sin(v) * 2 + torch.cos(v) * torch.tanh(v)
        r = _REDUCE[kind](v, dim)
        if post:
            r = r * torch.sigmoid(r) + v.mean()
        return r

    inv = [perm.index(d) for d in range(ndim)]
    return fn, torch.randn(*[shape[inv[d]] for d in range(ndim)]), (kind, shape, dim, perm, pre, post)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_random_reductions_against_float64(graphs, backend):
    if backend == "triton":
        pytest.importorskip("triton")
        options, device = OPTIONS, DEVICE
    else:
        options, device = None, "cpu"
    for seed in range(30):
        fn, x, what = _program(random.Random(seed), wide=seed % 5 == 4)
        x = x.to(device)
        kiln.reset()
        with torch.no_grad():
            expected = fn(x)
            actual = kiln.compile(fn, options=options, dynamic=False)(x)
            exact = fn(x.double())
        assert actual.shape == expected.shape, what
        # kiln must be about as near float64 as eager: twice eager's largest error, and 1e-5
        # relative (sums of 40000 elements, a GPU's approximate exponentials)
        eager_error = (expected.double() - exact).abs().max().item()
        torch.testing.assert_close(actual.double(), exact, rtol=1e-5, atol=2 * eager_error + 1e-6,
                                   msg=lambda m, w=what: f"{w}: {m}")
    assert len(graphs) == 30
