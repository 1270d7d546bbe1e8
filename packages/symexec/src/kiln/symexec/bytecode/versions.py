"""Selection of the running interpreter's ``VersionTable``: the one place that asks which
CPython runs. Other versions' table modules are never imported (they read the running
interpreter's ``opcode`` module, which only describes the running version).
"""

from __future__ import annotations

import importlib
import sys

from ._table import VersionTable

__all__ = ["SUPPORTED_VERSIONS", "TABLE", "UnsupportedVersion", "table_for_running_python"]

SUPPORTED_VERSIONS = {(3, 11): "py311", (3, 12): "py312", (3, 13): "py313"}


class UnsupportedVersion(RuntimeError):
    """The running CPython has no bytecode table."""


def table_for_running_python() -> VersionTable:
    """Import and return the table for ``sys.version_info``; raise UnsupportedVersion if none."""
    module = SUPPORTED_VERSIONS.get(sys.version_info[:2])
    if module is None:
        raise UnsupportedVersion(
            f"kiln.symexec.bytecode supports CPython {sorted(SUPPORTED_VERSIONS)}, "
            f"not {sys.version_info[:2]}"
        )
    return importlib.import_module(f"{__package__}.{module}").TABLE


TABLE: VersionTable = table_for_running_python()
