"""Two reductions in one pass of a looped Triton row kernel (``kiln.inductor.triton._online``),
for rows wider than ``triton_persistent_max`` or of unknown width: a softmax's max and sum of
exponentials (online softmax: two passes over the row and no stored exponentials, where it
took three and a buffer), a variance's sum and squared deviations (Welford: LayerNorm in two
passes, not three). Checked against eager, with -inf, +inf and NaN in the rows. CUDA tensors
on a GPU; without one, CPU tensors through triton's interpreter."""

from __future__ import annotations

import pytest
import torch
from triton_support import DEVICE, OPTIONS
from triton_support import run_like_eager as _run

import kiln

pytest.importorskip("triton")


WIDE = 40000  # above triton_persistent_max (32768): a looped row


def _passes(code):
    """How many loops over a row the kernel makes, and whether it folds max and sum in one."""
    return code.count("for roffset in range(0, rnumel, RBLOCK):"), "online softmax" in code


def _welford(code):
    return code.count("for roffset in range(0, rnumel, RBLOCK):"), "(Welford)" in code


def test_softmax_is_two_passes_with_no_stored_exponentials(graphs):
    _run(lambda x: torch.softmax(x, -1), torch.randn(3, WIDE))
    assert [g.kernels for g in graphs] == [1]
    code = graphs[0].triton_code
    assert _passes(code) == (2, True)
    assert code.count("tl.store(") == 1  # the output only


def test_log_softmax(graphs):
    _run(lambda x: torch.log_softmax(x * 3, -1), torch.randn(2, WIDE))
    assert _passes(graphs[0].triton_code) == (2, True)


def test_persistent_rows_keep_their_single_pass(graphs):
    _run(lambda x: torch.softmax(x, -1), torch.randn(3, 1000))
    assert _passes(graphs[0].triton_code) == (0, False)


def test_infinities_and_nan_as_eager():
    x = torch.randn(6, WIDE)
    x[0, :30000] = float("-inf")     # a lane sees only -inf for several blocks, the row has a max later
    x[1, :] = float("-inf")          # a whole row of -inf: NaN, as eager
    x[2, 12345] = float("inf")       # +inf: exp(inf - inf) is NaN, as eager
    x[3, 777] = float("nan")         # NaN propagates to the row
    x[4, 39999] = 80.0               # the max in the row's last block: earlier partial sums rescaled
    x[5, ::2] = float("-inf")        # every other lane -inf
    _run(lambda x: torch.softmax(x, -1), x)


def test_large_values_do_not_overflow():
    x = torch.randn(2, WIDE) * 30 + torch.linspace(0, 500, WIDE)  # the max grows block after block
    _run(lambda x: torch.softmax(x, -1), x)


def test_half_types():
    for dtype in (torch.bfloat16, torch.float16):
        _run(lambda x: torch.softmax(x, -1), torch.randn(2, WIDE).to(dtype))


def test_symbolic_widths_are_online(graphs):
    fn = kiln.compile(lambda x: torch.softmax(x, -1), options=OPTIONS, dynamic=True)
    for cols in (5, 3000):
        x = torch.randn(4, cols, device=DEVICE)
        torch.testing.assert_close(fn(x), torch.softmax(x, -1))
    assert len(graphs) == 1 and _passes(graphs[0].triton_code) == (2, True)


def test_cross_entropy_training_step(graphs):
    logits = torch.randn(4, WIDE, device=DEVICE, requires_grad=True)
    target = torch.randint(0, WIDE, (4,), device=DEVICE)
    ref = logits.detach().clone().requires_grad_(True)
    loss = kiln.compile(lambda x, t: torch.nn.functional.cross_entropy(x, t), options=OPTIONS)(logits, target)
    loss.backward()
    expected = torch.nn.functional.cross_entropy(ref, target)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(logits.grad, ref.grad)
    assert any(_passes(g.triton_code)[1] for g in graphs)


def test_layer_norm_is_two_passes(graphs):
    x = torch.randn(3, WIDE) * 4 + 100  # a large mean: Welford keeps the variance exact enough
    w, b = torch.randn(WIDE), torch.randn(WIDE)
    _run(lambda x, w, b: torch.nn.functional.layer_norm(x, (WIDE,), w, b), x, w, b)
    assert [g.kernels for g in graphs] == [1]
    assert _welford(graphs[0].triton_code) == (2, True)


def test_var_mean_and_keepdim(graphs):
    x = torch.randn(4, WIDE) * 3 - 7
    _run(lambda x: torch.var_mean(x, -1), x)
    _run(lambda x: (torch.var(x, -1, keepdim=True, correction=0), x.std(1)), x)
    assert all(_welford(g.triton_code)[1] for g in graphs)


def test_variance_with_infinities_and_nan():
    x = torch.randn(4, WIDE)
    x[0, 100] = float("inf")
    x[1, 39000] = float("nan")
    x[2, :] = 5.0  # constant: variance 0
    _run(lambda x: torch.var(x, -1), x)
    _run(lambda x: torch.var_mean(x, -1), x[1:])
    # eager's var_mean gives the mean of a row holding +inf as NaN or inf depending on where
    # the inf is (its Welford update turns inf into NaN at the next finite element); kiln's
    # mean, looped or not, is the row's sum over its count: inf
    var, mean = kiln.compile(lambda x: torch.var_mean(x, -1), options=OPTIONS)(x.to(DEVICE))
    assert var[0].isnan() and mean[0] == float("inf")


def test_symbolic_widths_use_welford(graphs):
    fn = kiln.compile(lambda x: torch.var_mean(x, -1, correction=0), options=OPTIONS, dynamic=True)
    for cols in (3, 2500):
        x = torch.randn(5, cols, device=DEVICE) + 10
        for got, expected in zip(fn(x), torch.var_mean(x, -1, correction=0), strict=True):
            torch.testing.assert_close(got, expected)
    assert len(graphs) == 1 and _welford(graphs[0].triton_code) == (1, True)


def test_layer_norm_training_step(graphs):
    x = (torch.randn(2, WIDE, device=DEVICE) * 2 + 3).requires_grad_(True)
    w = torch.randn(WIDE, device=DEVICE, requires_grad=True)
    ref_x, ref_w = x.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    fn = kiln.compile(lambda x, w: torch.nn.functional.layer_norm(x, (WIDE,), w).square().mean(), options=OPTIONS)
    loss = fn(x, w)
    loss.backward()
    expected = torch.nn.functional.layer_norm(ref_x, (WIDE,), ref_w).square().mean()
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(x.grad, ref_x.grad)
    torch.testing.assert_close(w.grad, ref_w.grad)
    assert any(_welford(g.triton_code)[1] for g in graphs)
