"""Online softmax in Triton kernels (``kiln.inductor.triton._online``): a softmax over rows the
kernel loops over (wider than ``triton_persistent_max``, or of unknown width) computes the max
and the sum of exponentials in one pass, then the outputs in a second: two passes over the
row and no stored exponentials, where it took three and a buffer. Checked against eager,
with -inf, +inf and NaN in the rows. CUDA tensors on a GPU; without one, CPU tensors through
triton's interpreter."""

from __future__ import annotations

import pytest
import torch

import kiln

pytest.importorskip("triton")

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
OPTIONS = None if CUDA else {"inductor.cpu_backend": "triton"}
WIDE = 40000  # above triton_persistent_max (32768): a looped row


def _run(fn, *args, dynamic=None, **compare):
    args = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
    actual = kiln.compile(fn, options=OPTIONS, dynamic=dynamic)(*args)
    torch.testing.assert_close(actual, fn(*args), equal_nan=True, **compare)
    return actual


def _passes(code):
    """How many loops over a row the kernel makes, and whether it folds max and sum in one."""
    return code.count("for roffset in range(0, rnumel, RBLOCK):"), "online softmax" in code


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
        _run(lambda x: torch.softmax(x, -1), torch.randn(2, WIDE).to(dtype), atol=2e-3, rtol=2e-2)


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
