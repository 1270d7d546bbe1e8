import os
import sys

import pytest
import torch

from kiln.inductor import _api

sys.path.insert(0, os.path.dirname(__file__))  # triton_support

# Without a GPU, Triton kernels run in triton's interpreter (how the Triton code generator is
# tested on CPU tensors, test_triton.py). triton decides it when a function is defined,
# its own library functions (tl.sum) included, so it is set before anything imports triton.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def graphs(monkeypatch, fresh_kiln):
    """The CompiledGraph of every ATen graph kiln.inductor compiles in the test (torch's RNG
    seeded: the inputs are the same on every run)."""
    torch.manual_seed(0)
    compiled = []
    original = _api.compile_graph

    def record(gm, config=None, builders=None, group=None):
        result = original(gm, config, builders, group)
        compiled.append(result)
        return result

    monkeypatch.setattr(_api, "compile_graph", record)
    return compiled
