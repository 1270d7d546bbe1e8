"""Outputs of a CUDA graph replay lent to the caller as the recording's own memory, instead
of copied out of it (``_cudagraphs``), and inputs read where another runner lent them.

Copying every output out after each replay (``_cudagraph_plan.make_outputs``) keeps the old
outputs' values whatever runs next, at the cost of a device copy of each. In a training step
that cost is most of the step: the forward's saved activations are copied out of its
recording, then into the backward's static inputs, and the gradients out of the backward's.
A lent output costs nothing, and the backward reads the activations where the forward's
recording wrote them (``CudagraphGroup.borrowable``: its static input is that memory, by
address).

The invariant: a replay never changes memory that anything outside the runner still refers
to. Before each replay the runner asks each output it lent (``Lent.alive``) whether anyone
still holds it: a tensor or view over its memory (the storage's use count above the one
measured before it was lent), or the storage object itself (its Python reference count
above that measured). A lent output is handed out as a tensor of its own over the same
storage (``lend``), so a write of the runner's to its memory does not bump a version counter
the caller's autograd checks. If one is still held:

- its values are kept: cloned before the replay and written back after it
  (``keep_alive``), so the holder sees no change (a stream that reads it concurrently with
  the call, unsynchronized, could see the replay's values in between: kiln's runners are
  called from one stream at a time, as the module docstring of ``_cudagraphs`` says);
- that output is copied from then on (``_Recording.lend``), as before this module.

Outputs of every size are lent where torch has ``torch._C._storage_Use_Count`` (``LENDS``;
else every output is copied); a group of views of one
storage (q, k and v: ``_cudagraph_plan``'s "copy" group) is lent as one span of its bytes,
each view at its offset. Small outputs are as often what the backward reads (a norm's mean
and reciprocal deviation: each lent one saves a copy out of the forward's recording and one
into the backward's); one the caller holds across calls (a loss) is copied from its second
call on, after one clone and write-back. Lending only outputs of 256 KiB or more, a training
step of a transformer block (``benchmarks/host_profile.py --cases block-bf16-train --mode
reduce-overhead``, H100) still made 27 device copies, 119 µs of its ~2 ms. Lending keeps no memory alive
that the caller does not: the lent tensor shares the recording's storage, which it keeps
alive if the recording is dropped first.

An input is borrowed by address (``CudagraphGroup.borrowable``) when another runner of its
group lends that storage now: the runners of one compiled graph, its forward's and its
backward's, share a group (the backward reads the forward's activations). The recording
reads that address and keeps no reference to it; a later call with the input elsewhere
records again, reading a buffer of its own there (``_cudagraphs``' moved inputs). Memory the
runner lent itself is never borrowed (its replay would write what it reads).
"""

from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["LENDS", "CudagraphGroup", "Lent", "keep_alive", "lend"]

_use_count = getattr(torch._C, "_storage_Use_Count", None)
LENDS = _use_count is not None  # whether outputs are lent (this torch tells who holds a storage)


def _holders(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return _use_count(storage._cdata), sys.getrefcount(storage)


@dataclass(slots=True)
class Lent:
    """An output of ``recording``'s source group ``group`` lent to a caller: ``source`` is the
    recording's tensor over that memory, ``holders`` what refers to it besides the caller
    (measured before it was lent)."""

    source: torch.Tensor
    recording: Any
    group: int
    holders: tuple[int, int]

    def alive(self) -> bool:
        """Whether anything outside the runner still refers to the lent memory."""
        count, refs = _holders(self.source)
        return count > self.holders[0] or refs > self.holders[1]


def lend(source: torch.Tensor, recording: Any, group: int, lent: list[Lent]) -> torch.Tensor:
    """A tensor over ``source``'s memory for the caller (its own version counter), recorded
    in ``lent``."""
    lent.append(Lent(source, recording, group, _holders(source)))
    return torch.empty(0, dtype=source.dtype, device=source.device).set_(
        source.untyped_storage(), source.storage_offset(), source.shape, source.stride())


class CudagraphGroup:
    """The CUDA graph runners of one compiled graph (its forward's and its backward's, made
    by one compile or one load of the whole-graph cache): a runner reads by address the
    memory another runner of its group lends (weak references: a group keeps no runner
    alive)."""

    def __init__(self) -> None:
        self._runners: list[weakref.ref] = []

    def join(self, runner: Any) -> None:
        self._runners.append(weakref.ref(runner))

    def borrowable(self, x: torch.Tensor, runner: Any) -> bool:
        """Whether ``runner``'s input ``x`` is read in place, by address: a storage another
        runner of the group lent at its last call (``runner.lent``: its outputs still lent)."""
        if not x.numel():
            return False
        storage = x.untyped_storage()._cdata
        for ref in self._runners:
            other = ref()
            if other is not None and other is not runner and any(
                    entry.source.untyped_storage()._cdata == storage for entry in other.lent):
                return True
        return False


def keep_alive(lent: list[Lent]) -> tuple[list[Lent], list[tuple[torch.Tensor, torch.Tensor]]]:
    """Before a replay: the lent outputs still held (kept in the list), each switched to
    copies from now on, and a saved copy of each one's values to write back after the
    replay (``(source, saved)`` pairs)."""
    held = [entry for entry in lent if entry.alive()]
    saved = []
    for entry in held:
        entry.recording.lend[entry.group] = False
        saved.append((entry.source, entry.source.clone()))
    return held, saved
