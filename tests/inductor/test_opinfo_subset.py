"""kiln's inductor backend on torch's OpInfo samples of common ops, compared with eager.

A fast subset of ``benchmarks/inductor_opinfo.py`` (whose helpers it uses): pointwise ops,
comparisons, reductions, normalizations, views, scatters and scans, and an op kiln.inductor
runs as an ATen call (cummax). Each op's first two CPU float32 samples (one where it has one) run through one
``kiln.compile(call, backend="inductor")``, so the second sample also exercises a recompile
(automatic dynamic sizes where the shapes differ). Each result must match eager
(``assert_close``, NaNs equal), kiln must have compiled a graph (a pass through the eager
fallback proves nothing) and logged no warning (aotgrad refusing the graph, which then runs
as captured). Compiled kernels are cached on disk ($KILN_CACHE_DIR).
"""

import os
import sys

import pytest
import torch

# the repository root: the ``benchmarks`` package (``hatch test`` runs pytest without the
# working directory on sys.path)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import kiln
from benchmarks.inductor_opinfo import (
    call_sample,
    compare,
    eager_references,
    fresh_samples,
    full_name,
    kiln_recording,
    load_op_db,
    make_caller,
)

SAMPLES = 2

OPS = (
    # pointwise
    "add", "mul", "sub", "div.no_rounding_mode", "neg", "abs", "exp", "log", "sqrt", "rsqrt",
    "sigmoid", "tanh", "erf", "pow", "clamp", "where", "maximum", "minimum",
    "nn.functional.relu", "nn.functional.gelu",
    # comparisons and logic
    "eq", "lt", "ge", "logical_and",
    # reductions and normalizations
    "sum", "mean", "amax", "amin", "argmax", "var", "std", "softmax", "log_softmax",
    "logsumexp", "nn.functional.layer_norm",
    # views and index remaps
    "permute", "transpose", "reshape", "expand", "select", "slice", "flip", "repeat",
    # writes at loaded places and scans
    "scatter", "scatter_add", "scatter_reduce.sum", "scatter_reduce.amax", "scatter_reduce.mean", "index_put",
    "index_add", "cumsum", "cumprod",
    # an ATen call from the wrapper
    "cummax",
)

_BY_NAME = {full_name(op): op for op in load_op_db()}


pytestmark = pytest.mark.usefixtures("fresh_kiln")


def _describe(sample) -> str:
    def one(value):
        if isinstance(value, torch.Tensor):
            return f"tensor{tuple(value.shape)} strides {value.stride()}"
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(one(v) for v in value) + "]"
        return repr(value)

    return f"input {one(sample.input)}, args {one(sample.args)}, kwargs {sample.kwargs!r}"


def test_subset_is_in_op_db():
    assert set(OPS) <= set(_BY_NAME), sorted(set(OPS) - set(_BY_NAME))


@pytest.mark.parametrize("name", OPS)
def test_matches_eager(name):
    op = _BY_NAME[name]
    samples = fresh_samples(op, SAMPLES)  # some ops have only one
    expected, why = eager_references(op, SAMPLES)
    assert samples and len(expected) == len(samples), why
    compiled = kiln.compile(make_caller(op.op), backend="inductor")
    with kiln_recording() as (_, logged):
        for index, reference in expected.items():
            actual = call_sample(compiled, samples[index])
            problem = compare(actual, reference)
            assert problem is None, f"sample {index} ({_describe(samples[index])}): {problem}"
    stats = kiln.session().stats
    assert stats.unique_graphs >= 1, f"no graph compiled: {stats.breaks}"
    assert not logged.messages, logged.messages
