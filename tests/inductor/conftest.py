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


def _round_bfloat16_as_gpus_do() -> None:
    """Triton's interpreter converts float32 to bfloat16 by dropping the low bits (triton 3.9:
    ``interpreter._convert_float`` truncates, and its round-to-nearest branch carries no
    overflow into the exponent), and bfloat16 subnormals back to float32 wrongly; a GPU's
    ``.to(tl.bfloat16)`` rounds to nearest, ties to even, as torch does, and widening is exact. A value a kernel rounds to bfloat16 then compared (``torch.where(y + 1 > x,
    ...)``) took the other branch under the interpreter where the GPU and eager agree. The
    tests run the interpreter with the GPU's rounding: torch's conversion, for that pair of
    types only (``test_triton_rounding.py`` checks it)."""
    try:
        import numpy as np
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    convert = getattr(interpreter, "_convert_float", None)
    if convert is None or getattr(convert, "kiln_rounds", False):
        return

    def rounded(values, input_dtype, output_dtype, rounding_mode):
        values = np.ascontiguousarray(values)
        if input_dtype == tl.float32 and output_dtype == tl.bfloat16 and rounding_mode in (
                None, interpreter._ir.ROUNDING_MODE.RTNE):
            floats = torch.from_numpy(values.view(np.float32))
            return floats.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).reshape(values.shape)
        if input_dtype == tl.bfloat16 and output_dtype == tl.float32:  # exact (the interpreter's loses subnormals)
            return (values.view(np.uint16).astype(np.uint32) << 16).reshape(values.shape)
        return convert(values, input_dtype, output_dtype, rounding_mode)

    rounded.kiln_rounds = True
    interpreter._convert_float = rounded


if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    _round_bfloat16_as_gpus_do()


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
