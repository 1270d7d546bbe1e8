"""Random pointwise chains over permuted inputs and outputs through the Triton code generator,
against eager: the cases where a flat kernel is tiled (``_kernel._tile_axis``: an access
contiguous along a variable other than the block's) and where a value read twice is realized
and then kept in registers (``Stage.private``), at sizes around the tile's minimum (16) and
not multiples of it. Seeded: the same programs on every run. CUDA tensors on a GPU;
otherwise CPU tensors through triton's interpreter."""

from __future__ import annotations

import random

import pytest
import torch
from triton_support import DEVICE, OPTIONS

import kiln

pytest.importorskip("triton")

_UNARY = [torch.sin, torch.exp, torch.tanh, torch.relu, lambda v: v * 1.5 - 0.25, torch.sigmoid]


def _program(rng: random.Random):
    """A function of two tensors of one shape, permuted as the program says, and its inputs."""
    ndim = rng.choice([2, 3, 4])
    shape = [rng.choice([1, 3, 16, 17, 24, 33]) for _ in range(ndim)]
    perm_x = rng.sample(range(ndim), ndim)
    perm_y = rng.sample(range(ndim), ndim)
    out_perm = rng.sample(range(ndim), ndim) if rng.random() < 0.5 else None
    ops = [rng.randrange(len(_UNARY)) for _ in range(rng.randint(1, 4))]
    shared = rng.random() < 0.5  # a value read twice (realized, maybe kept in registers)

    def fn(x, y):
        v = x.permute(*perm_x) + y.permute(*perm_y)
        for k in ops:
            v = _UNARY[k](v)
        if shared:
            w = torch.sin(v) * torch.cos(v) + torch.tanh(v) * torch.exp(-v)
            v = w * 2 + torch.sigmoid(w)
        if out_perm is not None:
            v = v.permute(*out_perm).contiguous()
        return v

    inv_x = [perm_x.index(d) for d in range(ndim)]  # x.permute(*perm_x) has ``shape``
    inv_y = [perm_y.index(d) for d in range(ndim)]
    x = torch.randn(*[shape[inv_x[d]] for d in range(ndim)])
    y = torch.randn(*[shape[inv_y[d]] for d in range(ndim)])
    return fn, x, y


def _layout(t):
    """A tensor's strides, less those of dimensions of size 1 (any stride is theirs)."""
    return [st for st, n in zip(t.stride(), t.shape, strict=True) if n != 1]


def test_random_permuted_chains_against_float64(graphs):
    tiled = kept = 0
    for seed in range(24):
        fn, x, y = _program(random.Random(seed))
        x, y = x.to(DEVICE), y.to(DEVICE)
        kiln.reset()  # every program is the same code: no recompiles, no dynamic sizes
        with torch.no_grad():
            expected = fn(x, y)
            actual = kiln.compile(fn, options=OPTIONS, dynamic=False)(x, y)
            exact = fn(x.double(), y.double())
        assert actual.shape == expected.shape, seed
        assert _layout(actual) == _layout(expected), seed  # eager's layout
        # a chain of up to eight transcendental functions can be ill-conditioned: eager's own
        # float32 result is then 1e-3 off the float64 one; kiln must be about as near it as
        # eager (twice eager's largest error, and 1e-5 relative for a GPU's approximate
        # exponentials where eager's error is small; a misplaced element is off by far more)
        eager_error = (expected.double() - exact).abs().max().item()
        torch.testing.assert_close(actual.double(), exact, rtol=1e-5, atol=2 * eager_error + 1e-6,
                                   msg=lambda m, s=seed: f"seed {s}: {m}")
        code = graphs[-1].triton_code
        tiled += "tiles_r = " in code
        kept += "kept in registers" in code
    assert len(graphs) == 24
    assert tiled >= 10 and kept >= 6, (tiled, kept)  # 15 and 11 of the 24: both paths taken
    assert tiled < 24


def _grown(t, by):
    """``t`` with every dimension but those of size 1 grown by ``by``, in the same layout."""
    order = sorted(range(t.dim()), key=lambda d: -t.stride(d))  # outermost first
    sizes = [n + by if n != 1 else 1 for n in t.shape]
    return torch.randn(*[sizes[d] for d in order]).to(t.device).permute(*[order.index(d) for d in range(t.dim())])


def test_dynamic_sizes_keep_eagers_layout(graphs):
    # the traced strides are symbolic ((s1*s2, 1, s1) for a permuted chain): the output is
    # laid out as eager lays it out, at the sizes compiled for and at other sizes (before,
    # such outputs came back contiguous: 5 of these 24 programs)
    permuted = 0
    for seed in range(24):
        fn, x, y = _program(random.Random(seed))
        kiln.reset()
        compiled = kiln.compile(fn, options=OPTIONS, dynamic=True)
        for by in (0, 2):
            a, b = (_grown(x, by), _grown(y, by)) if by else (x, y)
            a, b = a.to(DEVICE), b.to(DEVICE)
            with torch.no_grad():
                expected = fn(a, b)
                actual = compiled(a, b)
                exact = fn(a.double(), b.double())
            eager_error = (expected.double() - exact).abs().max().item()  # as the test above
            torch.testing.assert_close(actual.double(), exact, rtol=1e-5, atol=2 * eager_error + 1e-6,
                                       msg=lambda m, s=seed: f"seed {s}: {m}")
            assert _layout(actual) == _layout(expected), (seed, by, actual.stride(), expected.stride())
        permuted += not expected.is_contiguous()
    assert permuted >= 5
