"""CUDA graphs (``inductor.cudagraphs``; ``kiln.compile(mode="reduce-overhead")``): a compiled
graph's launches recorded once per input shape set into a ``torch.cuda.CUDAGraph`` and
replayed, one launch for the whole graph instead of one per kernel.

``with_cudagraphs(compiled, config)`` replaces ``compiled.call`` by a ``CudaGraphRunner``
around it, unless the graph's facts (``_cudagraph_plan.cudagraph_facts``) say it cannot be
recorded: then the reason is logged once (``kiln.perf_hints``, "cudagraphs: skipped: input 0
is a CPU tensor") and the graph runs as plain launches.

A call of the runner (the compiled call's contract: one list, which it empties):
1. ``shape_key`` of its leaves: one recording per key, up to
   ``config.cudagraph_max_shapes`` keys (a graph of symbolic sizes meets one per size set);
   past that, new keys run as plain launches (logged once).
2. First call of a key (the recording): each tensor input gets a static input
   (``StaticInput``): a ``torch.nn.Parameter`` is used where it is (its address is stable;
   if a later call passes another tensor there, the key is recorded again with a buffer of
   its own in that place), any other tensor is copied into a buffer. A warm-up run on the
   capture stream compiles Triton kernels and sets up cuBLAS; it gets copies of the inputs
   the graph writes, so it changes nothing anyone sees. Then cuBLAS's workspaces are cleared
   (``torch._C._cuda_clearCublasWorkspaces``: the capture allocates its own, from the
   recording's memory; one allocated in the warm-up, outside it, may be freed by another
   library clearing the workspaces, torch.compile's CUDA graphs do before each of their
   recordings, and a replay would write freed memory) and the call is captured
   (``torch.cuda.graph``, on the runner's capture stream, into its private memory pool).
3. Each call (the first included, after recording): an input whose address differs from its
   static input's is copied in; the graph is replayed on the current stream; an input the
   graph writes whose caller tensor is not the static input is copied back (each write
   reaches the caller exactly once per call); outputs are made by ``make_outputs``.

Outputs: a replay writes into the same memory each time, so ``y1 = f(x1); y2 = f(x2)``
must not leave y1 holding f(x2)'s values. Large outputs alone in their memory are lent to the
caller as the recording's memory (``_cudagraph_lend``): before each replay, one still held is
saved and written back after it, and copied from then on; the rest are copied out after each
replay (``plan_outputs``: one device copy per storage the outputs use, of the bytes they span,
and a new allocation). An input that is memory another runner of its group lent (the forward's activations,
read by the backward) is read in place, by address. The cost, per call: the copied outputs'
bytes once more, and for every input not at its static address (everything but parameters and
borrowed memory) its bytes copied in. An output that is an input, or a view of one, is the
caller's tensor (or the same view of it), never a copy and never the static input.

Memory: each runner (one per compiled graph: a forward and its backward have one each) owns a
capture stream per device and one private pool (``torch.cuda.graph_pool_handle``) that all its
recordings share: intermediates of one recording may sit where another's are; safe because
replays of one runner are ordered on the caller's stream and lent outputs still held are
saved and written back around every replay. A recording holds its static inputs and its outputs' memory as long as
the runner lives (``kiln.reset()`` drops them). Calls of one runner from two streams at once
are not supported (they share static inputs).

Where a recording fails (an op capture does not allow), or a key cannot be replayed correctly
(an input the graph writes sharing memory with another input; an output that is a view of an
input in another dtype), the reason is logged once and the runner falls back to plain
launches (for that call, or for good when the recording itself failed).
Torch's state is left as found: grad mode, inference mode, the current stream and device.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ._cudagraph_lend import LENDS, CudagraphGroup, Lent, keep_alive, lend
from ._cudagraph_plan import (
    OutputRule,
    StaticInput,
    flatten,
    make_outputs,
    non_overlapping,
    plan_outputs,
    shape_key,
    unflatten,
)

__all__ = ["CudaGraphRunner", "CudaRecorder", "CudagraphGroup", "CudagraphStats", "with_cudagraphs"]

_log = logging.getLogger("kiln.perf_hints")
_SCALARS = (int, float, bool, type(None))


@dataclass(slots=True)
class CudagraphStats:
    """What a runner did: graphs recorded (a key recorded again counts again), replays, and
    calls run as plain launches."""

    recordings: int = 0
    replays: int = 0
    plain_calls: int = 0


def with_cudagraphs(compiled: Any, config: Any, group: CudagraphGroup | None = None) -> Any:
    """``compiled`` (a ``CompiledGraph``) with its ``call`` replayed from CUDA graphs when
    ``config.cudagraphs`` and its facts allow (else the reason logged once); returns it.
    ``group``: the runners of the same compiled graph (its forward's and backward's), which
    read each other's lent outputs in place (None: a group of its own)."""
    if not config.cudagraphs:
        return compiled
    facts = compiled.cudagraph_facts
    reason = "the graph was not analysed" if facts is None else facts.skip
    if reason is None and compiled.cpp_code:
        reason = "the graph has CPU kernels (C++)"
    if reason is not None:
        _log.warning("cudagraphs: skipped: %s; the graph runs as plain launches", reason)
        return compiled
    compiled.call = CudaGraphRunner(compiled.call, facts.mutated, config.cudagraph_max_shapes, CudaRecorder(),
                                    group=group or CudagraphGroup(), seed=compiled.seed)
    return compiled


class CudaRecorder:
    """Records with ``torch.cuda.CUDAGraph``: the warm-up and the capture on a capture
    stream of its own per device, into one private memory pool."""

    def __init__(self) -> None:
        self.streams: dict[Any, Any] = {}
        self.pool: Any = None

    capturing = staticmethod(torch.cuda.is_current_stream_capturing)  # whether a capture is underway

    @staticmethod
    def check(t: torch.Tensor) -> str | None:
        """Why a recording cannot read ``t`` (None: it can)."""
        return None if t.device.type == "cuda" else f"a {'CPU' if t.device.type == 'cpu' else t.device} tensor"

    def record(self, warm: Callable[[], Any], run: Callable[[], Any], device: Any,
               inputs: list[torch.Tensor]) -> tuple[Callable[[], None], Any, Any]:
        """``warm()`` once, then ``run()`` captured; returns the replay function, ``run``'s
        result (tensors in the pool, not computed until a replay) and what must stay alive
        with the recording. ``inputs``: the static inputs (a recorder that executes while
        recording must leave them as they were; this one does not execute)."""
        with torch.cuda.device(device):
            key = torch.cuda.current_device()
            stream = self.streams.get(key)
            if stream is None:
                stream = self.streams[key] = torch.cuda.Stream()
            if self.pool is None:
                self.pool = torch.cuda.graph_pool_handle()
            current = torch.cuda.current_stream()
            stream.wait_stream(current)
            with torch.cuda.stream(stream):
                warm()
            current.wait_stream(stream)
            clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
            if clear is not None:
                clear()  # the capture allocates cuBLAS's workspace from the pool (module docstring)
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph, pool=self.pool, stream=stream, capture_error_mode="thread_local"):
                    result = run()
            finally:
                if torch.cuda.current_stream() != current:  # a failed capture_end skips the stream's restore
                    torch.cuda.set_stream(current)
        return graph.replay, result, graph


@dataclass(slots=True)
class _Recording:
    replay: Callable[[], None]
    keep: Any  # the CUDAGraph (its instantiated graph and its hold on the pool)
    inputs: list[StaticInput]  # per tensor leaf
    borrowed: list[StaticInput]
    written: list[StaticInput]  # the static inputs of the inputs the graph writes
    rules: list[OutputRule]
    sources: list[torch.Tensor]
    structure: Any  # of the outputs (``flatten``)
    lend: list[bool]  # per source: lent to the caller rather than copied (``_cudagraph_lend``)
    # the leaves the recorded call was given; those read by address (``by_address``) are the
    # caller's during a replay only (a recorder that replays by running the call reads them)
    statics: list[Any]
    by_address: tuple[int, ...]

    def moved(self, leaves: list[Any]) -> list[int]:
        """The borrowed inputs ``leaves`` has at another address (the recording reads the old one)."""
        return [s.slot for s in self.borrowed if leaves[s.slot].data_ptr() != s.address]

    def run(self, leaves: list[Any], runner: CudaGraphRunner) -> tuple:
        if torch.is_grad_enabled():  # copies into buffers must not be recorded by autograd
            with torch.no_grad():
                return self._run(leaves, runner)
        return self._run(leaves, runner)

    def _run(self, leaves: list[Any], runner: CudaGraphRunner) -> tuple:
        held, saved = keep_alive(runner.lent)  # what the caller still holds of earlier calls
        if saved:
            runner._note("an output of an earlier call is still in use at the next call: it is kept, and that "
                         "output is copied out of the CUDA graph from now on")
        try:
            for s in self.inputs:
                x = leaves[s.slot]
                if x.data_ptr() != s.address:
                    s.fill(x)
            for k in self.by_address:
                self.statics[k] = leaves[k]
            if runner.seed is not None:
                runner.seed.draw()  # this call's seed, where the recorded kernels read it
            try:
                self.replay()
            finally:
                for k in self.by_address:
                    self.statics[k] = None
            for s in self.written:
                x = leaves[s.slot]
                if x.data_ptr() != s.address:
                    x.copy_(s.static)

            def lender(group: int, source: torch.Tensor) -> torch.Tensor | None:
                return lend(source, self, group, held) if self.lend[group] else None

            outs = make_outputs(self.rules, self.sources, leaves, lender)
        finally:
            for source, values in saved:  # the held outputs as their holders left them, even on an error
                source.copy_(values)
        runner.lent = held
        return tuple(unflatten(outs, self.structure))


@dataclass(eq=False)
class CudaGraphRunner:
    """``runner(args)``: ``call(args)`` (a compiled graph's call, taking one list, which it
    empties) replayed from CUDA graphs; see the module docstring. ``mutated``: the positions
    of the inputs the graph writes; ``limit``: the most input shape sets recorded;
    ``recorder``: how graphs are recorded (``CudaRecorder``; tests give one that runs on
    CPU tensors). ``stats``: what it did; ``off``: why it runs plain launches for good (None
    while it records)."""

    call: Callable[[list[Any]], Any]
    mutated: tuple[int, ...]
    limit: int
    recorder: Any
    stats: CudagraphStats = field(default_factory=CudagraphStats)
    recordings: dict[tuple, _Recording] = field(default_factory=dict)
    unstable: set[int] = field(default_factory=set)  # leaves whose borrowed input moved: never borrowed again
    lent: list[Lent] = field(default_factory=list)  # outputs lent to callers (``_cudagraph_lend``)
    off: str | None = None
    logged: set[str] = field(default_factory=set)
    group: CudagraphGroup = field(default_factory=CudagraphGroup)  # whose lent memory it reads in place
    seed: Any = None  # the graph's seed in device memory (``_lower_random.SeedCell``), drawn here per call

    def __post_init__(self) -> None:
        self.group.join(self)
        if self.seed is not None:
            self.seed.managed = True

    def __call__(self, args: list[Any]) -> Any:
        if self.off is not None or self.recorder.capturing():  # inside the caller's own capture: plain
            return self._plain(args)
        leaves, structure = flatten(args)
        if self.mutated:
            reason = self._unsafe_writes(args, leaves)
            if reason is not None:
                self._note(f"a call runs as plain launches: {reason}")
                return self._plain(args)
        key = shape_key(leaves)
        recording = self.recordings.get(key)
        if recording is not None:
            moved = recording.moved(leaves)
            if moved:  # a parameter is not where it was: recorded again, reading a buffer there
                self.unstable.update(moved)
                del self.recordings[key]
                recording = None
        if recording is None:
            recording = self._record(key, leaves, structure)
            if recording is None:
                return self._plain(args)
        args.clear()
        self.stats.replays += 1
        return recording.run(leaves, self)

    def _plain(self, args: list[Any]) -> Any:
        self.stats.plain_calls += 1
        if self.seed is not None:
            self.seed.draw()
        return self.call(args)

    def _note(self, message: str) -> None:
        if message not in self.logged:
            self.logged.add(message)
            _log.warning("cudagraphs: %s", message)

    def _turn_off(self, reason: str) -> None:
        self.off = reason
        self._note(f"skipped: {reason}; the graph runs as plain launches")

    def _unsafe_writes(self, args: list[Any], leaves: list[Any]) -> str | None:
        """Why the graph's writes of this call's inputs cannot go through static inputs: a
        written input sharing memory with another input (the recording has one buffer each),
        or whose elements may overlap (it cannot be copied back)."""
        storages = [x.untyped_storage().data_ptr() for x in leaves if isinstance(x, torch.Tensor) and x.numel()]
        for p in self.mutated:
            x = args[p]
            if not isinstance(x, torch.Tensor) or x.numel() == 0:
                continue
            if storages.count(x.untyped_storage().data_ptr()) > 1:
                return f"input {p}, which the graph writes, shares memory with another input"
            if not non_overlapping(x.shape, x.stride()):
                return f"input {p}, which the graph writes, has elements that share memory"
        return None

    def _record(self, key: tuple, leaves: list[Any], structure: Any) -> _Recording | None:
        if len(self.recordings) >= self.limit:
            self._note(f"the graph met more than {self.limit} input shape sets (inductor.cudagraph_max_shapes); "
                       "further ones run as plain launches")
            return None
        device = None
        for k, x in enumerate(leaves):
            reason = self.recorder.check(x) if isinstance(x, torch.Tensor) else \
                None if isinstance(x, _SCALARS) else f"a {type(x).__name__}"
            if reason is not None:
                self._turn_off(f"input {k} is {reason}")
                return None
            if device is None and isinstance(x, torch.Tensor):
                device = x.device
        try:
            with torch.no_grad(), torch.inference_mode(False):
                return self._capture(key, leaves, structure, device)
        except Exception as e:  # an op capture does not allow, or one that raises
            self._turn_off(f"recording failed ({type(e).__name__}: {_first_line(e)})")
            return None

    def _capture(self, key: tuple, leaves: list[Any], structure: Any, device: Any) -> _Recording | None:
        written_slots = _leaf_positions(self.mutated, structure)
        # read in place: parameters, and memory another runner of the group lends (not written here)
        by_address = {k for k, x in enumerate(leaves) if isinstance(x, torch.Tensor) and k not in self.unstable
                      and k not in written_slots and not isinstance(x, torch.nn.Parameter)
                      and self.group.borrowable(x, self)}
        inputs = [StaticInput.of(k, x, (isinstance(x, torch.nn.Parameter) or k in by_address) and k not in self.unstable)
                  for k, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        by_slot = {s.slot: s for s in inputs}
        statics = [by_slot[k].static if k in by_slot else x for k, x in enumerate(leaves)]
        warm = list(statics)
        for k in written_slots:  # the warm-up writes copies: a call writes its inputs once
            warm[k] = StaticInput.of(k, statics[k], borrow=False).static
        if self.seed is not None:
            self.seed.draw()  # the warm-up's seed, outside the capture (which must draw none)
        replay, result, keep = self.recorder.record(lambda: self.call(unflatten(warm, structure)),
                                                    lambda: self.call(unflatten(statics, structure)),
                                                    device, [s.static for s in inputs])
        outs, out_structure = flatten(list(result))
        for k, out in enumerate(outs):
            reason = self.recorder.check(out) if isinstance(out, torch.Tensor) else None
            if reason is not None:
                self._turn_off(f"output {k} is {reason}")
                return None
        planned = plan_outputs(outs, statics)
        if isinstance(planned, str):
            self._turn_off(planned)
            return None
        rules, sources = planned
        lent = [LENDS] * len(sources)  # a copy group too: views of one storage (q, k and v)
        for k in by_address:  # the recording keeps the address, not the memory (its lender's)
            s = by_slot[k]
            s.static = statics[k] = torch.empty(0, dtype=s.static.dtype, device=s.static.device)
        recording = _Recording(replay, keep, inputs, [s for s in inputs if s.borrowed],
                               [by_slot[k] for k in written_slots], rules, sources, out_structure, lent,
                               statics, tuple(sorted(by_address)))
        self.recordings[key] = recording
        self.stats.recordings += 1
        return recording


def _first_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ""


def _leaf_positions(positions: tuple[int, ...], structure: Any) -> list[int]:
    """The leaf index of each top-level item at ``positions`` (``flatten``'s ``structure``)."""
    if structure is None:
        return list(positions)
    starts, count = [], 0
    for s in structure:
        starts.append(count)
        count += _leaf_count(s)
    return [starts[p] for p in positions]


def _leaf_count(structure: Any) -> int:
    return 1 if structure is None else sum(_leaf_count(s) for s in structure[1])
