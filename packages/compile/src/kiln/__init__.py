"""kiln: an independent implementation of the torch.compile stack.

``kiln.compile(model)`` is used like ``torch.compile(model)``. The umbrella package also owns
the ``kiln`` namespace: the other distributions (kiln-fxgraph, kiln-frameeval, ...) install
``kiln/<name>/`` without a ``kiln/__init__.py``, and ``extend_path`` below makes every
``kiln`` folder on ``sys.path`` part of this package, so editable installs of each package
stay importable as ``kiln.<name>``.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from kiln._api import (
    CompiledModule,
    ExplainOutput,
    compile,
    disable,
    explain,
    reset,
)
from kiln._backends import BackendUnavailable
from kiln._config import config
from kiln._logs import set_logs
from kiln.symexec import Unsupported

__version__ = "0.1.0"
__all__ = [
    "BackendUnavailable",
    "CompiledModule",
    "ExplainOutput",
    "Unsupported",
    "compile",
    "config",
    "disable",
    "explain",
    "reset",
    "set_logs",
]
