"""kiln.symexec: symbolic execution of CPython bytecode into kiln.fxgraph graphs.

- ``kiln.symexec.bytecode``: decoding and assembly of code objects per CPython version
  (no torch needed).
- ``capture(code, L, f_globals)``: trace one frame into a torch-level graph, its guards and
  its replacement code (needs torch; imported on first use so the bytecode layer stays
  torch-free). The ``Capture`` it returns answers the pipeline's questions about itself
  (``fake_inputs``, ``may_start_user_frames``, ``specializations``, ``op_names``), so
  that no caller inspects guard kinds or graph nodes.
  ``capture(..., graph_breaks=True)`` ends the graph where tracing fails and resumes after
  (``_breaks``).
- ``SymexecCaches``: what captures share (decoded code, fake-op results, resume functions),
  owned by the caller and passed as ``capture(..., caches=)``; symexec keeps no module-level
  cache.
- ``Unsupported``: raised when tracing cannot go on, with the reason and the user's line.
"""

from typing import Any

from ._unsupported import SourceLocation, Unsupported

__version__ = "0.1.0"
__all__ = ["Capture", "ConstraintViolation", "ReplacementSource", "SourceLocation", "Specializations", "SymexecCaches",
           "Unsupported", "build_replacement", "capture", "mark_dynamic", "mark_static", "maybe_mark_dynamic"]


def __getattr__(name: str) -> Any:
    if name in ("capture", "Capture"):
        from . import _capture

        return getattr(_capture, name)
    if name in ("ConstraintViolation", "mark_dynamic", "mark_static", "maybe_mark_dynamic"):
        from . import _marks

        return getattr(_marks, name)
    if name == "Specializations":
        from ._capture_result import Specializations

        return Specializations
    if name in ("ReplacementSource", "build_replacement"):
        from . import _codegen

        return getattr(_codegen, name)
    if name == "SymexecCaches":
        from ._caches import SymexecCaches

        return SymexecCaches
    raise AttributeError(f"module 'kiln.symexec' has no attribute {name!r}")
