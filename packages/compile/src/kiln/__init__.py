"""kiln: an independent implementation of the torch.compile stack.

``kiln.compile(model)`` is used like ``torch.compile(model)``. The umbrella package also owns
the ``kiln`` namespace: the other distributions (kiln-fxgraph, kiln-frameeval, ...) install
``kiln/<name>/`` without a ``kiln/__init__.py``, and ``extend_path`` below makes every
``kiln`` folder on ``sys.path`` part of this package, so editable installs of each package
stay importable as ``kiln.<name>``.

The user API is imported on first use, so that ``import kiln.fxgraph`` (or any other
torch-free package) does not import torch and the whole compiler.
"""

from pkgutil import extend_path
from typing import Any

__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
__all__ = [
    "BackendCompilerFailed",
    "BackendUnavailable",
    "CompileContext",
    "CompiledModule",
    "ConstraintViolation",
    "Decompiled",
    "ExplainOutput",
    "Session",
    "Unsupported",
    "compile",
    "compile_context",
    "config",
    "decompile",
    "disable",
    "explain",
    "mark_dynamic",
    "mark_static",
    "maybe_mark_dynamic",
    "reset",
    "session",
    "set_logs",
]

_HOMES = {
    "BackendCompilerFailed": "kiln._backends",
    "BackendUnavailable": "kiln._backends",
    "CompileContext": "kiln._context",
    "CompiledModule": "kiln._compiled_module",
    "ConstraintViolation": "kiln.symexec",
    "Decompiled": "kiln._decompile",
    "decompile": "kiln._decompile",
    "mark_dynamic": "kiln.symexec",
    "mark_static": "kiln.symexec",
    "maybe_mark_dynamic": "kiln.symexec",
    "ExplainOutput": "kiln._api",
    "Session": "kiln._session",
    "Unsupported": "kiln.symexec",
    "compile": "kiln._api",
    "compile_context": "kiln._context",
    "config": "kiln._config",
    "disable": "kiln._disable",
    "explain": "kiln._api",
    "reset": "kiln._api",
    "session": "kiln._session",
    "set_logs": "kiln._logs",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kiln' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
