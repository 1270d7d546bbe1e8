"""kiln.report: a structured trace (``KILN_TRACE``, ``kiln.config.trace_dir``) as one HTML page.

``python -m kiln report DIR`` (or the ``kiln-report`` console script) reads every trace file
in DIR and writes ``DIR/report.html`` (or ``-o PATH``): a self-contained page that opens
in a browser with no server and no downloads. ``write_report(path, out)`` does the same from
Python; ``render_events(events)`` renders events held in memory (``kiln.explain``'s
``ExplainOutput.report``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ._load import Compile, Process, Trace, load_trace, trace_of
from ._render import render_report

__all__ = ["Compile", "Process", "Trace", "load_trace", "main", "render_events", "render_report",
           "trace_of", "write_report"]


def write_report(path: str, out: str | None = None, title: str | None = None) -> str:
    """Render the trace in ``path`` (a folder or one file) to ``out`` (default: ``report.html``
    in the folder, or beside the file); returns the path written."""
    trace = load_trace(path)
    if out is None:
        folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        out = os.path.join(folder, "report.html")
    text = render_report(trace, title or f"kiln trace: {os.path.abspath(path)}")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return out


def render_events(events: list[dict[str, Any]], title: str = "kiln report") -> str:
    """The HTML page of trace events held in memory (one process)."""
    return render_report(trace_of(events), title)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The report command's arguments (shared by ``python -m kiln report`` and ``kiln-report``)."""
    parser.add_argument("path", help="a trace folder (KILN_TRACE=DIR while compiling) or one trace file")
    parser.add_argument("-o", "--out", default=None, help="the HTML file to write (default: DIR/report.html)")
    parser.add_argument("--title", default=None, help="the page's title")


def run(args: argparse.Namespace) -> int:
    """Write the report ``args`` ask for; print where. 2 with a message when there is no trace."""
    try:
        out = write_report(args.path, args.out, args.title)
    except (FileNotFoundError, ValueError) as e:
        print(f"kiln report: {e}", file=sys.stderr)
        return 2
    print(f"report: {os.path.abspath(out)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The ``kiln-report`` console script."""
    parser = argparse.ArgumentParser(prog="kiln-report", description="Turn a kiln trace into one HTML page.")
    add_arguments(parser)
    return run(parser.parse_args(argv))
