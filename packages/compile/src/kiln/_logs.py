"""Logging: ``KILN_LOGS`` names the artifacts to show, like ``TORCH_LOGS``.

``KILN_LOGS="graph_code,guards,recompiles"`` turns on the loggers ``kiln.graph_code``,
``kiln.guards``, ... at INFO with a handler on stderr (only loggers that have no handler yet).
The variable is read when kiln first compiles something (``configure_from_env``), or set in
code with ``kiln.set_logs("graph_code", "guards")``.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["ARTIFACTS", "artifact_logger", "configure_from_env", "set_logs"]

ARTIFACTS = ("graph_code", "guards", "recompiles", "recompiles_verbose", "graph_breaks",
             "bytecode", "aot_graphs", "output_code", "perf_hints")
_configured = False


def artifact_logger(name: str) -> logging.Logger:
    """The logger of one artifact (``kiln.<name>``)."""
    if name not in ARTIFACTS:
        raise ValueError(f"unknown kiln log artifact {name!r}; known: {', '.join(ARTIFACTS)}")
    return logging.getLogger(f"kiln.{name}")


def set_logs(*names: str) -> None:
    """Show the given artifacts on stderr (and only those)."""
    wanted = set(names)
    for name in ARTIFACTS:
        logger = artifact_logger(name)
        if name in wanted:
            logger.setLevel(logging.INFO)
            if not logger.handlers:
                handler = logging.StreamHandler(sys.stderr)
                handler.setFormatter(logging.Formatter(f"[kiln.{name}] %(message)s"))
                logger.addHandler(handler)
        else:
            logger.setLevel(logging.WARNING)


def configure_from_env() -> None:
    """Apply ``KILN_LOGS`` once (the first time kiln compiles)."""
    global _configured
    if _configured:
        return
    _configured = True
    text = os.environ.get("KILN_LOGS", "").strip()
    if text:
        set_logs(*[n.strip() for n in text.split(",") if n.strip()])
