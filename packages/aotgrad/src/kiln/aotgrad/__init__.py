"""kiln.aotgrad: ATen-level forward and backward graphs of a torch-level graph, functional
(no in-place ops or aliasing inside), split into a forward and a backward graph that an
``autograd.Function`` runs (see the package README).

Names load on first use (PEP 562): ``AotgradConfig`` is read by the umbrella at every
``kiln.compile``, and must not pull in the tracer (sympy, torch's meta kernels: ~0.3 s).
"""

from __future__ import annotations

import importlib

from kiln.aotgrad._config import AotgradConfig

__version__ = "0.1.0"

_WHERE = {
    "aot_compile": "_api", "core_aten_decompositions": "_decompositions", "AotUnsupported": "_functional",
    "functional_variant": "_functional", "Partition": "_partition", "partition": "_partition",
    "RuntimeMeta": "_runtime", "make_runtime": "_runtime", "TraceResult": "_trace", "trace": "_trace",
}
__all__ = ["AotgradConfig", *sorted(_WHERE)]


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f"kiln.aotgrad.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kiln.aotgrad' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
