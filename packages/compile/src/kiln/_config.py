"""kiln's configuration: one typed object, read by the API at call time.

``kiln.config`` is the instance users change (``kiln.config.recompile_limit = 4``). Nothing
reads it at import time; the compile policy reads it when it decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

__all__ = ["Config", "config"]


@dataclass(slots=True)
class Config:
    """Settings of the compile policy (see each field's help)."""

    recompile_limit: int = field(default=8, metadata={
        "help": "cache entries per code object; past it the code runs eagerly"})
    accumulated_recompile_limit: int = field(default=256, metadata={
        "help": "compiled entries over all code objects; past it new frames run eagerly"})
    suppress_errors: bool = field(default=False, metadata={
        "help": "False (torch.compile's default): a backend's failure while compiling a graph "
                "reaches the caller as BackendCompilerFailed; True: without fullgraph the "
                "frame falls back to eager with a logged warning. What kiln cannot capture "
                "(Unsupported) and the recompile limits always fall back"})
    raise_internal_errors: bool = field(default=False, metadata={
        "help": "False: an error of kiln's own while capturing a frame (a kiln bug) runs that "
                "frame eagerly with a warning and its traceback; True: it is raised (kiln's "
                "tests set it so that such bugs fail them)"})
    graph_cache: bool = field(default=True, metadata={
        "help": "keep whole compiled graphs in the cache directory (backend 'inductor': aotgrad's "
                "split and inductor's code, keyed by the captured graph and its inputs' metadata), so "
                "that a new process loads what an earlier one compiled instead of tracing and "
                "compiling again; False: only C++ kernel libraries are kept"})
    frame_cache: bool = field(default=True, metadata={
        "help": "with graph_cache (backend 'inductor'), also keep what kiln made of each captured frame "
                "(its guards, its replacement code and its compiled graph's record), keyed by the code and "
                "checked against the source files the trace read, so that a new process runs a frame it "
                "has seen without capturing it again; False: every process captures each frame"})
    recompile_memory: bool = field(default=True, metadata={
        "help": "keep in the cache directory which numbers and tensor dimensions turned dynamic for "
                "which code (automatic dynamic), so that a new process compiles them dynamic on its "
                "first call instead of compiling a static graph first"})

    trace_dir: str | None = field(default=None, metadata={
        "help": "a folder: every compile writes what it did there as JSON lines (one file per "
                "process: frames and why each compiled, graphs, graph breaks, guards, symbolic sizes, "
                "aotgrad's and inductor's output, phase times, cache hits and misses), which "
                "`python -m kiln report DIR` turns into an HTML page; None: the environment variable "
                "KILN_TRACE, else no trace. A cache hit costs the same either way"})

    def describe(self) -> str:
        """Every setting with its value and help."""
        return "\n".join(f"{f.name} = {getattr(self, f.name)!r}  # {f.metadata['help']}"
                         for f in fields(self))


config = Config()
