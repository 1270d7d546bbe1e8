"""kiln.aotgrad on CUDA tensors (GPU machine only): the autograd engine runs the backward of
fake CUDA tensors on its device threads while tracing, and the compiled graphs on the GPU
train like eager."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import kiln

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("dynamic", [False, True])
def test_cuda_mlp_with_batchnorm_and_dropout_trains_like_eager(dynamic):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.GELU(), nn.Dropout(0.2),
                          nn.Linear(32, 4)).cuda()
    reference = copy.deepcopy(model)
    kiln.reset()
    compiled = kiln.compile(model, backend="aot_eager", dynamic=dynamic)
    for step, batch in enumerate((8, 8, 5)):
        x = torch.randn(batch, 16, device="cuda")
        torch.manual_seed(step)
        expected = reference(x).square().mean()
        expected.backward()
        torch.manual_seed(step)
        out = compiled(x)
        got = out.square().mean()
        got.backward()
        torch.testing.assert_close(got, expected)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad = q.grad = None
    torch.testing.assert_close(model[1].running_mean, reference[1].running_mean)
    # the graph ran through aotgrad (not the captured graph it falls back to on an error)
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
