"""Logging: ``KILN_LOGS`` names the artifacts to show, like ``TORCH_LOGS``.

``KILN_LOGS="graph_code,guards,recompiles"`` turns on the loggers ``kiln.graph_code``,
``kiln.guards``, ... at INFO with a handler on stderr (only loggers that have no handler yet).
The variable is read when kiln compiles something (``configure_from_env``; a value is
applied once, again only when it changes), or set in code with
``kiln.set_logs("graph_code", "guards")``. An unknown name is an error that lists the valid
ones (as TORCH_LOGS does), never silently ignored. ``ARTIFACTS`` maps every name to what it
shows; the top-level README documents the same list.
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
import sys

__all__ = ["ARTIFACTS", "artifact_logger", "configure_from_env", "set_logs"]

ARTIFACTS: dict[str, str] = {
    "graph_code": "the generated code of each captured graph",
    "guards": "the guards of each cache entry",
    "recompiles": "each recompile, with the first guard that failed; numbers made graph inputs",
    "dynamic": "symbolic sizes: each symbol made for a tensor dimension, each one the code specialized (with the user's line)",
    "recompiles_verbose": "each recompile, with the failing guard of every existing entry",
    "graph_breaks": "each graph break and each frame that falls back to eager, with the reason",
    "bytecode": "the replacement code of each frame (source and disassembly)",
    "perf": "the time each compile of a frame took, per phase (capture, backend, guards)",
    "aot_graphs": "the joint, forward and backward ATen graphs kiln.aotgrad makes of each graph",
    "output_code": "the code kiln.inductor generates (reserved: not built yet)",
    "perf_hints": "performance hints of the backends: why a graph is not recorded as CUDA graphs, max-autotune's choices",
    "cache": "the disk caches of whole graphs and of the recompile memory: what is not cacheable, corrupt entries",
}


def artifact_logger(name: str) -> logging.Logger:
    """The logger of one artifact (``kiln.<name>``)."""
    _check_names([name], "kiln log artifact")
    return logging.getLogger(f"kiln.{name}")


def set_logs(*names: str) -> None:
    """Show the given artifacts on stderr (and only those); an unknown name is a ValueError."""
    _check_names(names, "kiln log name")
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
    """Apply ``KILN_LOGS`` (a comma list of artifact names); a ValueError names an unknown
    one and lists the valid ones."""
    _apply_env_value(os.environ.get("KILN_LOGS", "").strip())


@functools.cache
def _apply_env_value(text: str) -> None:
    # Cached per value: a later set_logs() in code is not undone by the next compile, while
    # a changed KILN_LOGS applies. A value that raises is not cached, so it raises each time.
    if not text:
        return
    names = [n.strip() for n in text.split(",") if n.strip()]
    try:
        set_logs(*names)
    except ValueError as e:
        raise ValueError(f"KILN_LOGS={text!r}: {e}") from None


def _check_names(names: tuple[str, ...] | list[str], what: str) -> None:
    for name in names:
        if name not in ARTIFACTS:
            close = difflib.get_close_matches(name, ARTIFACTS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown {what} {name!r}{hint}; valid names: {', '.join(ARTIFACTS)}")
