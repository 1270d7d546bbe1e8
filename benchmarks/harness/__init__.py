"""The harness: suites of workloads, each timed for eager, torch.compile and kiln in one
process (interleaved medians after warm-up, compile time separately), written as JSON and
printed as a table; ``compare`` shows regressions between two result files."""

from .run import compare, run_suites
from .suites import SUITES, Workload

__all__ = ["SUITES", "Workload", "compare", "run_suites"]
