"""kiln.inductor: ATen graphs to loop-level IR (``_ir``, ``_lowering`` and its rule modules),
kernels by fusion (``_scheduler``), C++ for CPU tensors (``cpp``), and the Python wrapper
that runs them (``_wrapper``); see the package README.

Names load on first use (PEP 562): ``InductorConfig`` is read by the umbrella at every
``kiln.compile`` and must not pull in sympy or the lowering tables.
"""

from __future__ import annotations

import importlib

from kiln.inductor._config import InductorConfig

__version__ = "0.1.0"

_WHERE = {
    "CompiledGraph": "_graph_cache", "compile_graph": "_compile", "start_compile_workers": "_compile", "InductorUnsupported": "_graph", "aten_compiler": "_api",
    "backend": "_api", "decompositions": "_api", "FusionPolicy": "_policy", "lower_graph": "_graph", "schedule": "_scheduler",
    "CudaGraphRunner": "_cudagraphs", "CudagraphGroup": "_cudagraphs",
    # the disk caches (``_graph_cache``, ``_entries``), also used by the umbrella's cache of
    # whole captured graphs and its recompile memory
    "EntryStore": "_entries", "GraphDescriber": "_graph_cache", "Uncacheable": "_graph_cache",
    "cache_identity": "_graph_cache", "cache_root": "_config", "load_compiled": "_graph_cache",
    "code_digest": "_graph_cache", "source_digest": "_graph_cache",
}
__all__ = ["InductorConfig", *sorted(_WHERE)]


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f"kiln.inductor.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kiln.inductor' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
