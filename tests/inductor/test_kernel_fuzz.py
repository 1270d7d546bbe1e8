"""A few seeds of the inductor's differential fuzzer (``fuzz_kernels.py``) on each code
generator: C++ kernels on CPU tensors, Triton kernels on a GPU or through triton's
interpreter. Seed 3 is ``tanh(x.clamp(-1, 1) * x.abs()) - y`` with gradients (the wrong
gradient of an ATen ``conj_physical`` that returned its argument), seed 14 an output other
nodes read, with ``x`` transposed (eager's strides); 21 and 40 are others. Of the wide family:
252 sums 36 bfloat16 values into one place (kiln's bfloat16 buffer rounded after every add),
572 takes the gradient of a maximum whose sizes the shape env renamed to a dead input's
(aotgrad read them from a node of the backward in the forward: a KeyError), 1150 the
gradient of an ``amin`` of a normalized value (the forward's kernel fused the mean's product
into its use, the backward recomputed it from the rounded mean: no element equal to the
minimum, NaN gradients; kernels are now compiled without contraction). Of the extremes
family: 144 takes the gradient of an ``amax`` of ``erf`` values at 42 x 9, which the backward
recomputed in a loop whose tail glibc's scalar ``erff`` computed (the forward's vector one:
another ulp), and found no element equal to the saved maximum (aotgrad now saves what the
backward compares). Of the twins family (a program applied to two pairs of inputs): 17
(bfloat16, gradients) and 36 (dynamic sizes, gradients) compile kernels that differ only in
names, which share one C++ function (``_twins``)."""

from __future__ import annotations

import pytest
from fuzz_kernels import check


@pytest.mark.parametrize(("family", "seed"), [("basic", 3), ("basic", 14), ("basic", 21), ("basic", 40),
                                              ("wide", 252), ("wide", 572), ("wide", 1150),
                                              ("extremes", 144), ("twins", 17), ("twins", 36)])
@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_fuzzed_programs_match_eager(fresh_kiln, backend, family, seed):
    if backend == "triton":
        pytest.importorskip("triton")
    assert check(seed, backend, family) is None
