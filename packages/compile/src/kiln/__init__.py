"""kiln: an independent implementation of the torch.compile stack.

The umbrella package owns the ``kiln`` namespace: the other distributions (kiln-fxgraph,
kiln-frameeval, ...) install ``kiln/<name>/`` without a ``kiln/__init__.py``, and
``extend_path`` below makes every ``kiln`` folder on ``sys.path`` part of this package, so
editable installs of each package stay importable as ``kiln.<name>``.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
__all__: list[str] = []
