"""kiln.inductor's Triton code generator for CUDA tensors: element operations and index
expressions (``_ops``), one kernel as a ``@triton.jit`` function with its launch
(``_kernel``), and the module loader and libdevice resolution (``_runtime``)."""

from kiln.inductor.triton._kernel import TritonKernel, render_kernel
from kiln.inductor.triton._runtime import HEADER, load_module

__all__ = ["HEADER", "TritonKernel", "load_module", "render_kernel"]
