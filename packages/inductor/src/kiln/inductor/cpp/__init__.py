"""kiln.inductor's C++ code generator for CPU tensors: element operations and index
expressions (``_ops``), one kernel as a C++ function (``_kernel``), and the build into a
loaded shared library with its on-disk cache (``_build``)."""

from kiln.inductor.cpp._kernel import KernelSource, Param, render_kernel
from kiln.inductor.cpp._ops import HEADER

__all__ = ["HEADER", "KernelSource", "Param", "render_kernel"]
