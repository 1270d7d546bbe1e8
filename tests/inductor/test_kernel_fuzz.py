"""A few seeds of the inductor's differential fuzzer (``fuzz_kernels.py``) on each code
generator: C++ kernels on CPU tensors, Triton kernels on a GPU or through triton's
interpreter. Seed 3 is ``tanh(x.clamp(-1, 1) * x.abs()) - y`` with gradients (the wrong
gradient of an ATen ``conj_physical`` that returned its argument), seed 14 an output other
nodes read, with ``x`` transposed (eager's strides); 21 and 40 are others."""

from __future__ import annotations

import pytest
from fuzz_kernels import check


@pytest.mark.parametrize("seed", [3, 14, 21, 40])
@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_fuzzed_programs_match_eager(fresh_kiln, backend, seed):
    if backend == "triton":
        pytest.importorskip("triton")
    assert check(seed, backend) is None
