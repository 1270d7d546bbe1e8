"""Automatic dynamic: per code object, the numbers and tensor dimensions its captures take
as graph inputs and symbols instead of constants (``dynamic=None``; numbers also under
``dynamic=True``).

The memory is the policy's ``Stats.dynamic_numbers`` and ``Stats.dynamic_dims`` (source ->
dimensions), per code object, in the current ``kiln.Session``; every function here is given
the ``Stats`` to read and write. It only grows until ``kiln.reset``: a number or a dimension
never goes back to static. It is filled three ways:

1. **Learned** (``dynamic_numbers``, ``dynamic_dims``): when a code recompiles, each int or
   float an earlier capture guarded by value that holds another value of the same type now
   is a graph input from this compile on; and when a tensor an earlier capture fixed (a
   plain tensor, not a parameter or buffer) has another size now in any dimension, every
   dimension of it is a symbol from this compile on. Batch and length move together in the
   programs this is for, and the first change shows one of them: learning them one at a
   time costs a recompile each (a sweep over batches and lengths in random order: 3
   compiles, where 2 suffice). A dimension that never changes costs nothing but its shape
   guards, and one the code needs as a value is specialized by a guard as before. What
   each capture fixed is kiln.symexec's answer (``Capture.specializations``, kept per
   capture in ``Stats.code_guards``); this module only compares it with the frame's values.
2. **Inherited by resume functions** (``inherit_resume_inputs``): a capture that ends at a
   graph break says, for each resume function its replacement calls
   (``Capture.resumes``), which arguments hold tensors whose dimensions are symbols in the
   capture and which hold graph-input numbers; the resume function's memory takes them, so
   a resume function first compiled after its parent learned a dimension is dynamic in it
   from its first compile, as its parent is.
3. **Inherited by called frames** (``inherit_from_caller``): a frame compiled as a root of
   its own while a kiln-compiled code is still running further up its stack (that code
   runs eagerly after its recompile limit or a failure, or its replacement runs the call
   of a graph break for real) takes, among its tensor arguments' dimensions, those whose
   size equals the current size of a dimension that calling code made dynamic (sizes 0 and
   1 excepted: they are specialized anyway). The caller is the nearest frame up the stack
   whose code (or whose replacement's code) kiln compiled. A size that matches by chance
   only makes a dimension symbolic that could have stayed static: the graph is as correct,
   and specializing it (a relation to a parameter's size) is a guard, never an error. For a
   resume function the rule covers only the arguments its parent's capture could not
   describe (the result of the instruction run for real).

Recompile counts this gives under ``dynamic=None``: every code object compiles static once,
then at most once more per tensor whose size changes, unless a resume function's parent or a frame's
caller already learned that dimension, in which case it compiles dynamic from the start.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import torch

from kiln.guards import ItemSource, LocalSource, Source

from ._logs import artifact_logger

if TYPE_CHECKING:
    from ._stats import Stats

__all__ = ["dynamic_dims", "dynamic_numbers", "inherit_from_caller", "inherit_resume_inputs"]

Dims = Mapping[Source, frozenset[int]]


def dynamic_numbers(stats: Stats, code: types.CodeType, L: dict[str, Any], f_globals: dict[str, Any], *,
                    learn: bool) -> frozenset[Source]:
    """Sources whose numbers the next capture of ``code`` takes as graph inputs: those
    remembered, and (``learn``) each int or float an earlier capture fixed by value
    (kiln.symexec's ``Specializations.numbers``: bools stay constants) that holds another
    value of the same type now."""
    known = stats.dynamic_numbers.get(code, frozenset())
    if not learn:
        return known
    changed = set(known)
    for fixed in stats.code_guards.get(code, ()):
        for source, value in fixed.numbers():
            if source in changed:
                continue
            try:
                now = source.fetch(L, f_globals)
            except Exception:
                continue
            if type(now) is type(value) and now != value:
                changed.add(source)
                _log().info("%s: %s is a graph input from now on (was %r, now %r)",
                            code.co_qualname, source, value, now)
    stats.dynamic_numbers[code] = result = frozenset(changed)
    return result


def dynamic_dims(stats: Stats, code: types.CodeType, L: dict[str, Any], f_globals: dict[str, Any], *,
                 learn: bool) -> dict[Source, frozenset[int]]:
    """Tensor dimensions the next capture of ``code`` makes symbols: those remembered, and
    (``learn``) every dimension an earlier capture fixed (kiln.symexec's
    ``Specializations.tensor_sizes``: never a module's parameters or buffers) of a tensor
    whose size differs now in any dimension."""
    known = stats.dynamic_dims.get(code, {})
    if not learn:
        return dict(known)
    dims = {source: set(d) for source, d in known.items()}
    for fixed in stats.code_guards.get(code, ()):
        for source, sizes in fixed.tensor_sizes():
            try:
                now = source.fetch(L, f_globals)
            except Exception:
                continue
            if not isinstance(now, torch.Tensor) or isinstance(now, torch.nn.Parameter) \
                    or now.dim() != len(sizes):
                continue
            if all(size is None or now.shape[d] == size for d, size in enumerate(sizes)):
                continue
            changed = {d for d, size in enumerate(sizes) if size is not None}  # all of them
            new = changed - dims.get(source, set())
            if new:
                dims.setdefault(source, set()).update(new)
                _log().info("%s: dims %s of %s are symbols from now on (sizes %s, now %s)", code.co_qualname,
                            sorted(new), source, sizes, tuple(now.shape))
    stats.dynamic_dims[code] = result = {source: frozenset(d) for source, d in dims.items()}
    return result


def inherit_resume_inputs(stats: Stats, cap: Any, *, dims: bool) -> None:
    """Remember, for each resume function ``cap``'s replacement calls, the arguments
    ``cap`` says are dynamic: numbers always, tensor dimensions when ``dims``."""
    for inputs in cap.resumes:
        code = inputs.code
        stats.resume_runtime[code] = stats.resume_runtime.get(code, frozenset()) | inputs.runtime
        numbers = stats.dynamic_numbers.get(code, frozenset())
        if not inputs.numbers <= numbers:
            stats.dynamic_numbers[code] = numbers | inputs.numbers
            _log().info("%s: %s are graph inputs from its first compile on (as in %s)", code.co_qualname,
                        ", ".join(sorted(map(str, inputs.numbers - numbers))), cap.code.co_qualname)
        if dims:
            _remember_dims(stats, code, inputs.dims, f"as in {cap.code.co_qualname}")


def inherit_from_caller(stats: Stats, code: types.CodeType, L: dict[str, Any], caller: types.FrameType | None) -> None:
    """Remember the dimensions of ``code``'s tensor arguments ``L`` whose sizes equal a
    current size of a dimension the nearest compiled code up the stack from ``caller`` (the
    frame that calls ``code``) made dynamic; see the module docstring."""
    only = stats.resume_runtime.get(code)  # a resume function: only what its parent did not see
    if only is not None and not only:
        return
    found = _nearest_compiled(stats, caller)
    if found is None:
        return
    frame, parent = found
    sizes = _current_sizes(stats.dynamic_dims.get(parent, {}), frame)
    if not sizes:
        return
    matched = {}
    for source, tensor in _tensor_arguments(L, only):
        dims = frozenset(d for d, n in enumerate(tensor.shape) if n in sizes)
        if dims:
            matched[source] = dims
    _remember_dims(stats, code, matched, f"sizes {sorted(sizes)} are dynamic in the caller {parent.co_qualname}")


def _remember_dims(stats: Stats, code: types.CodeType, dims: Dims, why: str) -> None:
    known = stats.dynamic_dims.get(code, {})
    merged = dict(known)
    for source, d in dims.items():
        new = d - known.get(source, frozenset())
        if new:
            merged[source] = known.get(source, frozenset()) | new
            _log().info("%s: dims %s of %s are symbols from now on (%s)", code.co_qualname, sorted(new),
                        source, why)
    stats.dynamic_dims[code] = merged


def _nearest_compiled(stats: Stats, frame: types.FrameType | None) -> tuple[types.FrameType, types.CodeType] | None:
    """The nearest frame from ``frame`` up whose code, or whose replacement's original
    code, kiln compiled, with that code."""
    while frame is not None:
        code = frame.f_code
        # by identity: a replacement's constants may be unhashable (the objects it calls)
        replaced = stats.originals.get(id(code))
        if replaced is not None and replaced[0] is code:
            return frame, replaced[1]
        try:
            if code in stats.code_guards:
                return frame, code
        except TypeError:  # generated code with unhashable constants: not one kiln compiled
            pass
        frame = frame.f_back
    return None


def _current_sizes(dims: Dims, frame: types.FrameType) -> set[int]:
    """The sizes (2 and up) the dynamic dimensions ``dims`` of ``frame``'s code have in
    ``frame`` now (its arguments may have been rebound since it started: their values now)."""
    if not dims:
        return set()
    L, G = frame.f_locals, frame.f_globals
    sizes: set[int] = set()
    for source, ds in dims.items():
        try:
            value = source.fetch(L, G)
        except Exception:
            continue
        if isinstance(value, torch.Tensor):
            sizes.update(value.shape[d] for d in ds if d < value.dim())
    return {n for n in sizes if n >= 2}


def _tensor_arguments(L: dict[str, Any], only: frozenset[str] | None) -> Iterator[tuple[Source, torch.Tensor]]:
    """Plain tensors among the arguments (and the items of tuple and list arguments), with
    the sources a capture reads them from; only the names ``only`` when given."""
    for name, value in L.items():
        if only is not None and name not in only:
            continue
        if type(value) is torch.Tensor:
            yield LocalSource(name), value
        elif type(value) in (tuple, list):
            for i, item in enumerate(value):
                if type(item) is torch.Tensor:
                    yield ItemSource(LocalSource(name), i), item


def _log() -> logging.Logger:
    return artifact_logger("recompiles")
