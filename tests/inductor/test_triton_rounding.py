"""Rounding to bfloat16 in Triton kernels is the GPU's (to nearest, ties to even, as torch
rounds), also under triton's interpreter, which on its own truncates (``conftest.py``
gives the interpreter the GPU's rounding): a value rounded in a kernel then compared takes
eager's branch."""

from __future__ import annotations

import torch
from triton_support import DEVICE, OPTIONS

import kiln


def test_float32_rounds_to_nearest_bfloat16_ties_to_even(graphs):
    values = torch.tensor([1.031005859375, 1.498046875, 0.513671875, 0.509765625, -1.031005859375,
                           3.3961e38, 3.4e38, -3.4e38, 1e-40, float("inf"), float("-inf"), 0.0, -0.0,
                           2.0 ** -126 * 1.00390625, 65504.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -9])
    values = torch.cat([values, torch.randn(4000, generator=torch.Generator().manual_seed(0)) * 100])
    got = kiln.compile(lambda x: (x * 1).to(torch.bfloat16), options=OPTIONS)(values.to(DEVICE))
    expected = values.to(torch.bfloat16)
    assert torch.equal(got.cpu().view(torch.int16), expected.view(torch.int16))  # bit for bit
    nan = kiln.compile(lambda x: (x * 1).to(torch.bfloat16), options=OPTIONS)(torch.full((3,), float("nan"), device=DEVICE))
    assert nan.isnan().all()


def test_a_branch_on_a_rounded_bfloat16_value_takes_eagers_side(graphs):
    """``y + 1`` is an output, so it is rounded where it is computed; the comparison reads the
    rounded value, as eager's does (1.031005859375 rounds up to 1.03125 > 1.0234375; truncated
    it would equal ``x`` and the branch would flip)."""
    x = torch.tensor([1.0234375, 1.4921875, 0.51171875, 2.0], dtype=torch.bfloat16)
    y = torch.tensor([0.031005859375, 0.498046875, -0.486328125, 0.5], dtype=torch.float32).to(torch.bfloat16)

    def fn(x, y):
        z = y + 1
        return z, torch.where(z > x, z, x * 0.5)

    expected = fn(x, y)
    got = kiln.compile(fn, options=OPTIONS)(x.to(DEVICE), y.to(DEVICE))
    for g, e in zip(got, expected, strict=True):
        assert torch.equal(g.cpu(), e)


def test_exp_is_eagers_over_float32s_range(graphs):
    """A kernel's ``exp`` is libdevice's, eager's on a GPU (bit for bit there): triton's
    ``tl.exp`` was up to 63 ulps from float64 over this range on an H100, where eager's is
    within 1.9 (benchmarks/exp_precision.py). Under the interpreter, numpy's float32 ``exp``
    against torch's CPU one: each within an ulp of the exact value, so two apart at most.
    ``sigmoid``, ``1 / (1 + exp(-x))``, rounds twice more, and triton's float32 division is
    approximate (``div.full``, 2 ulps; eager's is IEEE): within float32's default tolerance."""
    noise = torch.randn(10_000, generator=torch.Generator().manual_seed(0)) * 10
    x = torch.cat([torch.linspace(-87.0, 88.0, 100_000), noise,
                   torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 89.0, -104.0])])
    fn = lambda x: (torch.exp(x), torch.sigmoid(-x))  # noqa: E731
    got, sigmoid = kiln.compile(fn, options=OPTIONS)(x.to(DEVICE))
    expected, expected_sigmoid = fn(x.to(DEVICE))
    assert "libdevice.exp(" in graphs[0].triton_code and "tl.exp(" not in graphs[0].triton_code
    if DEVICE == "cuda":
        assert torch.equal(got.isnan(), expected.isnan()) and torch.equal(got[~got.isnan()], expected[~expected.isnan()])
    else:
        torch.testing.assert_close(got, expected, rtol=2.4e-7, atol=0, equal_nan=True)
    torch.testing.assert_close(sigmoid, expected_sigmoid, equal_nan=True)
