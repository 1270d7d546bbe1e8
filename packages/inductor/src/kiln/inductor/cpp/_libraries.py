"""A graph's C++ kernels split among several libraries, compiled at once.

One library of all of a graph's kernels is one ``g++ -O3`` process, and its time grows with its
code: a 12-layer GPT-2's backward (41 functions, 2365 lines) took 1.12 s here, its forward (15
functions, 1227 lines) 0.49 s, one after another on a 2-core machine with the other core idle.
``split_kernels`` deals the kernels to up to one library per core (``CppBuilder.load_many``
compiles them in parallel), each library at least ``_MIN_LINES`` long: below that, another
process's start and its parse of the header (about 0.1 s) cost more than it saves.

The split is decided by the kernels' code and the number of cores alone, so a process on the
same machine makes the same libraries (the same cache keys); a graph's record keeps the
libraries it was compiled as, so a machine with another number of cores loads them as they are.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = ["build_jobs", "split_kernels"]

_MIN_LINES = 600  # about 0.3 s of g++ -O3 on this code
_MAX_JOBS = 8


def build_jobs() -> int:
    """How many compiler processes a graph's libraries may take: the cores this process may
    run on, at most ``_MAX_JOBS``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (no affinity on this platform)
        cores = os.cpu_count() or 1
    return max(1, min(cores, _MAX_JOBS))


def split_kernels(kernels: Sequence[Any], jobs: int) -> list[list[Any]]:
    """``kernels`` (``KernelSource``s, in the graph's order) dealt into at most ``jobs``
    libraries of about equal length, each at least ``_MIN_LINES`` lines where there are
    several: the longest kernel first to the shortest library so far (ties: the earlier
    library), each library's kernels in the graph's order. One library (all of them) for a
    short graph; none for no kernels."""
    if not kernels:
        return []
    lines = [k.code.count("\n") + 1 for k in kernels]
    count = max(1, min(jobs, sum(lines) // _MIN_LINES))
    if count == 1:
        return [list(kernels)]
    sizes = [0] * count
    members: list[list[int]] = [[] for _ in range(count)]
    for index in sorted(range(len(kernels)), key=lambda i: (-lines[i], i)):
        library = min(range(count), key=lambda j: (sizes[j], j))
        sizes[library] += lines[index]
        members[library].append(index)
    return [[kernels[i] for i in sorted(m)] for m in members if m]
