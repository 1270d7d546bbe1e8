"""On a machine with CUDA: fake CUDA results equal real CUDA results (shape, stride, dtype,
device) for every op case, static and symbolic. CUDA kernels choose their own layouts
(attention, convolution), so this is the check that fakes report what the GPU would do."""

from __future__ import annotations

import pytest
import torch

from kiln.symshapes import ShapeEnv
from kiln.symshapes.bridge import FakeTensorMode, from_real

from .test_torch_fake_ops import CASES, _check, _inputs, run_fake

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("symbolic", [False, True], ids=["static", "symbolic"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fake_cuda_matches_real_cuda(name, symbolic):
    fn, specs = CASES[name]
    reals = [t.cuda() for t in _inputs(specs)]
    expected = fn(*[t.clone() for t in reals])
    env = ShapeEnv() if symbolic else None
    mode = FakeTensorMode(env)
    fakes = [
        from_real(mode, t, dynamic_dims=s.dyn if symbolic else (), name=f"in{i}" if symbolic else None)
        for i, (t, s) in enumerate(zip(reals, specs, strict=True))
    ]
    out = run_fake(name, mode, fakes)
    if out is None:
        return  # torch's kernels read data here (see torch_reads_data)
    _check(expected, out, env)
