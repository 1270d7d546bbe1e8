"""What the Triton code generator's tests share: the device their tensors live on (CUDA on a
GPU; without one, CPU tensors through triton's interpreter, which tests/inductor/conftest.py
switches on, with ``inductor.cpu_backend='triton'``), and a check against eager."""

from __future__ import annotations

import torch

import kiln

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
OPTIONS = None if CUDA else {"inductor.cpu_backend": "triton"}


def run_like_eager(fn, *args, dynamic=None, **compare):
    """``fn`` compiled by kiln on ``args`` moved to DEVICE (under no_grad, eager's result computed
    first on copies: ``fn`` may write its inputs), checked against eager; kiln's result."""
    args = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
    with torch.no_grad():
        expected = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        actual = kiln.compile(fn, options=OPTIONS, dynamic=dynamic)(*args)
    torch.testing.assert_close(actual, expected, equal_nan=True, **compare)
    return actual
