"""Reading a structured trace (``kiln._trace``) back: files to processes to compiles.

``load_trace(path)`` takes a trace folder (every ``*.jsonl`` in it, one per process) or one
file; ``trace_of(events)`` takes events already in memory (``kiln.explain``'s). A line that
is not JSON (a process killed while writing) is skipped and named in ``Trace.problems``;
it never stops the report.

``Compile`` groups the events of one compile and answers what the report asks (its frame,
its graph, its breaks, its phase times); ``Trace.link`` sets each compile's ``parent``: for
a resume function, the compile whose graph break made it (the latest earlier compile of the
same process that lists it among its ``resumes``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Compile", "Process", "Trace", "load_trace", "trace_of"]


@dataclass(eq=False)
class Compile:
    """The events of one compile of one process, in order."""

    process: int  # the index of its Process in the Trace
    number: int
    events: list[dict[str, Any]] = field(default_factory=list)
    parent: Compile | None = None
    children: list[Compile] = field(default_factory=list)

    def first(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in self.events if e["event"] == kind), None)

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == kind]

    @property
    def anchor(self) -> str:
        return f"c{self.process}-{self.number}"

    @property
    def frame(self) -> dict[str, Any]:
        return self.first("frame") or {"code": {"name": "?", "qualname": "?", "file": "?", "line": 0},
                                       "why": "?", "entries": 0, "failed_guards": []}

    @property
    def code(self) -> dict[str, Any]:
        return self.frame["code"]

    @property
    def end(self) -> dict[str, Any]:
        return self.first("compile_end") or {"status": "unfinished", "seconds": 0.0, "timings": {}}

    @property
    def start(self) -> float:
        return self.events[0]["t"] if self.events else 0.0

    @property
    def seconds(self) -> float:
        return float(self.end.get("seconds") or 0.0)

    @property
    def status(self) -> str:
        return self.end.get("status", "unfinished")

    @property
    def resume(self) -> bool:
        return self.code["name"].startswith("__kiln_resume_in_")

    def phases(self) -> dict[str, float]:
        """Seconds per phase: capture, aotgrad (the backend less inductor), inductor, guards,
        load (from the disk cache of captured frames) and other (the rest of the compile)."""
        timings = dict(self.end.get("timings") or {})
        inductor = sum(float(e.get("seconds") or 0.0) for e in self.all("inductor"))
        backend = float(timings.pop("backend", 0.0))
        out = {"capture": float(timings.pop("capture", 0.0)), "aotgrad": max(0.0, backend - inductor),
               "inductor": inductor, "guards": float(timings.pop("guards", 0.0)),
               "load": float(timings.pop("load", 0.0))}
        out["other"] = max(0.0, self.seconds - sum(out.values()))
        return out


@dataclass(eq=False)
class Process:
    """One trace file: its header (``process`` event) and its compiles, in order."""

    index: int
    path: str
    header: dict[str, Any]
    compiles: list[Compile] = field(default_factory=list)

    @property
    def label(self) -> str:
        rank = self.header.get("rank")
        pid = self.header.get("pid", "?")
        return f"rank {rank} (pid {pid})" if rank is not None else f"pid {pid}"


@dataclass(eq=False)
class Trace:
    """Every process of a trace, and what could not be read."""

    processes: list[Process] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def compiles(self) -> list[Compile]:
        """Every compile of every process, by start time."""
        return sorted((c for p in self.processes for c in p.compiles), key=lambda c: (c.start, c.process, c.number))

    def link(self) -> None:
        """Set each resume function's compile's ``parent`` (see the module docstring)."""
        for process in self.processes:
            made: dict[str, Compile] = {}
            for c in process.compiles:
                if c.resume and c.code["name"] in made:
                    c.parent = made[c.code["name"]]
                    c.parent.children.append(c)
                for b in c.all("graph_break"):
                    for name in b.get("resumes", ()):
                        made[name] = c


def _process(index: int, path: str, events: list[dict[str, Any]]) -> Process:
    header = next((e for e in events if e.get("event") == "process"), {})
    process = Process(index, path, header)
    by_number: dict[int, Compile] = {}
    for e in events:
        number = e.get("compile", 0)
        if e.get("event") == "process" or not isinstance(number, int):
            continue
        c = by_number.get(number)
        if c is None:
            c = by_number[number] = Compile(index, number)
            process.compiles.append(c)
        c.events.append(e)
    return process


def _read(path: str, problems: list[str]) -> list[dict[str, Any]]:
    events = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                problems.append(f"{os.path.basename(path)}:{i}: not a JSON line (a write cut short?); skipped")
                continue
            if isinstance(event, dict) and "event" in event:
                events.append(event)
            else:
                problems.append(f"{os.path.basename(path)}:{i}: not a trace event; skipped")
    return events


def load_trace(path: str) -> Trace:
    """The trace in folder ``path`` (each ``*.jsonl`` file a process) or in file ``path``;
    a FileNotFoundError names a path that does not exist, a ValueError a folder with no trace."""
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".jsonl"))
        if not files:
            raise ValueError(f"{path}: no trace files (*.jsonl) in this folder; set KILN_TRACE={path} "
                             "(or kiln.config.trace_dir) while compiling to write some")
    elif os.path.exists(path):
        files = [path]
    else:
        raise FileNotFoundError(f"{path}: no such trace folder or file")
    trace = Trace()
    for path_ in files:
        trace.processes.append(_process(len(trace.processes), path_, _read(path_, trace.problems)))
    trace.link()
    return trace


def trace_of(events: list[dict[str, Any]], label: str = "") -> Trace:
    """The trace of ``events`` held in memory, as one process."""
    trace = Trace([_process(0, label, list(events))])
    trace.link()
    return trace
