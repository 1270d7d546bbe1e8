"""kiln.inductor's Triton code generator for CUDA tensors: element operations and index
expressions (``_ops``), one kernel as a ``@triton.jit`` function with its launch
(``_kernel``), and the module loader and libdevice resolution (``_runtime``).

Names load on first use (PEP 562): a generated module imports ``_runtime`` alone, so a
process that only compiles kernels (``_compile_worker``) never imports torch or sympy."""

from __future__ import annotations

import importlib

_WHERE = {"TritonKernel": "_kernel", "render_kernel": "_kernel", "HEADER": "_runtime", "load_module": "_runtime"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
