"""Kernels that differ only in names: one compiled function for all of them.

A model's repeated layers schedule the same kernels again and again: a 12-layer GPT-2's forward
has 51 C++ kernels of 10 distinct programs. Each would be compiled (a C++ function in the
graph's library, a Triton kernel compiled by triton) though they differ only in the names of
the buffers they read and write, in the comments naming them and in their own name. ``twins``
finds such kernels; the graph then compiles the first of each group and calls it in place of
the others, with their own arguments (``_compile``): a C++ twin calls the first's function, a
Triton twin's ``Launch`` launches the first's kernel (its compiles, its launcher, and under
max-autotune its measured launch, are the first's).

The invariant: a kernel stands for another only where their sources are the same program up to
a renaming of identifiers, so that the same arguments in the same order compute the same values.
The comparison is of the texts with whole-line comments dropped, the kernel's own name made
``<kernel>``, and each buffer name (``buf<N>``, ``arg<N>``, also where it is part of a longer
identifier such as ``val_buf3``) made ``<K>``, K its order of first appearance: equal texts mean
a one-to-one renaming takes one kernel into the other, parameters in the same positions. The
replacements hold ``<`` and ``>``, which no identifier does, so none can meet a name the code
already had.
"""

from __future__ import annotations

import re

__all__ = ["canonical", "twins"]

_BUFFER_NAME = re.compile(r"(?<![A-Za-z0-9])(?:buf|arg)\d+(?![0-9])")


def canonical(code: str, name: str, comment: str) -> str:
    """``code`` of kernel ``name`` with its whole-line comments (lines starting with
    ``comment``) dropped, its name and buffer names replaced (see the module docstring)."""
    lines = [line for line in code.splitlines() if not line.lstrip().startswith(comment)]
    text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", "<kernel>", "\n".join(lines))
    names: dict[str, str] = {}
    return _BUFFER_NAME.sub(lambda m: names.setdefault(m.group(0), f"<{len(names)}>"), text)


def twins(codes: dict[str, str], comment: str) -> dict[str, str]:
    """For kernels ``codes`` (their source by name, in order), the name of the first kernel of
    the same program for each later one (``canonical``); kernels without an earlier twin are
    not in it."""
    first: dict[str, str] = {}
    out: dict[str, str] = {}
    for name, code in codes.items():
        earlier = first.setdefault(canonical(code, name, comment), name)
        if earlier != name:
            out[name] = earlier
    return out
