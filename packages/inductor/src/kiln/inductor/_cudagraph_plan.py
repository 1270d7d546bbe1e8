"""What recording a compiled graph as CUDA graphs needs to know, as plain data and functions
that make no CUDA call (every one runs on CPU tensors; the tests run them there). The
recording itself is ``_cudagraphs``.

- ``cudagraph_facts(gm)``: what an ATen graph allows, decided once when it is compiled (and
  kept in its whole-graph cache record): the inputs it writes, and every reason it cannot be
  recorded at all: a tensor that is not on a CUDA device (input, output, constant or
  intermediate), tensors on several devices, an op whose result depends on the data (it waits
  for the host: ``.item()``, ``nonzero``, indexing with a boolean mask; not indexing with
  integer tensors). Random ops are recorded: an ATen call draws from the default CUDA
  generator, which a capture registers so that each replay draws new numbers (torch's
  graph-safe generator state; another generator makes the capture fail, and the graph runs
  as plain launches, logged), and kiln's own random kernels read the call's seed from device
  memory, which the runner writes before each replay (``_lower_random.SeedCell``).
- ``flatten``/``unflatten``: a compiled call's inputs (tensors, numbers, None, and tuples of
  them: a tuple the backward gets whole) or outputs as one list of leaves and a structure.
- ``shape_key``: what one recording is for: per leaf, a tensor's dtype, sizes, strides and
  device, or a number's type and value (baked into the recorded launches).
- ``StaticInput``: the memory a recording reads an input from, filled from the caller's tensor
  before each replay unless it is that memory (``address``): a parameter is used in place
  (``borrowed``), any other tensor gets a buffer of its sizes and strides (of the span it
  covers, when its elements may overlap: an expanded tensor).
- ``plan_outputs``/``make_outputs``: how a replay's outputs reach the caller. An output that
  is a recorded input, or a view of one, is the caller's tensor, or the same view of it; any
  other output lives in the recording's memory, which the next replay overwrites, so it is
  copied out: once per storage (outputs that share memory share the copy, as they did), the
  bytes its outputs span; an output of no elements is a new empty tensor.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kiln.fxgraph import GraphModule, Node

from ._mutation import is_input_copy, returns_alias

__all__ = ["CudagraphFacts", "OutputRule", "StaticInput", "cudagraph_facts", "flatten", "make_outputs",
           "non_overlapping", "plan_outputs", "shape_key", "span", "unflatten"]

aten = torch.ops.aten
_SCALARS = (int, float, bool, type(None))


# ----------------------------------------------------------------------------- graph facts
@dataclass(frozen=True, slots=True)
class CudagraphFacts:
    """``mutated``: the inputs (positions in the call's list) the graph writes; ``reasons``:
    why it cannot be recorded (empty: it can), the first the one logged."""

    mutated: tuple[int, ...] = ()
    reasons: tuple[str, ...] = ()

    @property
    def skip(self) -> str | None:
        return self.reasons[0] if self.reasons else None

    def to_json(self) -> dict[str, Any]:
        return {"mutated": list(self.mutated), "reasons": list(self.reasons)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CudagraphFacts:
        return cls(tuple(int(i) for i in data["mutated"]), tuple(str(r) for r in data["reasons"]))


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v)


def _device_name(device: torch.device) -> str:
    return "CPU" if device.type == "cpu" else str(device)


def cudagraph_facts(gm: GraphModule) -> CudagraphFacts:
    """The ``CudagraphFacts`` of the ATen graph ``gm`` (its nodes' ``meta["val"]`` give the
    devices; ops' tags say which depend on the data)."""
    placeholders = gm.graph.find_nodes("placeholder")
    position = {p: k for k, p in enumerate(placeholders)}
    reasons: list[str] = []
    devices: set[int] = set()  # CUDA device indices ("cuda" without one is any of them)
    cuda: list[bool] = []  # one entry per CUDA tensor seen

    def device_of(where: str, value: Any) -> None:
        for t in _tensors(value):
            if t.device.type != "cuda":
                reasons.append(f"{where} is a {_device_name(t.device)} tensor")
                return
            if t.device.index is not None:
                devices.add(t.device.index)
            cuda.append(True)

    for k, p in enumerate(placeholders):
        device_of(f"input {k}", p.meta.get("val"))
    output = gm.graph.output_node
    results = output.args[0] if output is not None and output.args else ()
    for k, r in enumerate(results if isinstance(results, (tuple, list)) else (results,)):
        if isinstance(r, Node):
            device_of(f"output {k}", r.meta.get("val"))
    mutated: set[int] = set()
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            device_of(f"constant {node.target}", gm.get_attr(node.target))
        if node.op != "call_function":
            continue
        device_of(f"the result of {node.target}", node.meta.get("val"))
        if _waits_for_host(node):
            reasons.append(f"{node.target} depends on the data (it waits for the host)")
        for written in _written_args(node):
            root = _root(written)
            if root.op == "placeholder":
                if not isinstance(root.meta.get("val"), torch.Tensor):
                    reasons.append(f"input {position[root]} is written but is not a tensor")
                mutated.add(position[root])
    if len(devices) > 1:
        reasons.append(f"tensors on several devices ({', '.join(f'cuda:{d}' for d in sorted(devices))})")
    if not cuda and not reasons:
        reasons.append("no CUDA tensor in the graph")
    return CudagraphFacts(tuple(sorted(mutated)), tuple(dict.fromkeys(reasons)))


_MISSING = object()


def _argument(node: Node, name: str) -> Any:
    """The value ``node`` passes for its op's argument ``name`` (its default where it passes
    none; ``_MISSING`` where the op has no such argument)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return _MISSING
    for k, arg in enumerate(schema.arguments):
        if arg.name != name:
            continue
        if name in node.kwargs:
            return node.kwargs[name]
        if not arg.kwarg_only and k < len(node.args):
            return node.args[k]
        return arg.default_value if arg.has_default_value() else _MISSING
    return _MISSING


def _waits_for_host(node: Node) -> bool:
    """An op whose result's sizes or value depend on the data. Indexing (``aten.index``) is
    tagged so for its boolean masks; with integer index tensors only, its sizes are the
    indices' and nothing waits."""
    tags = getattr(node.target, "tags", ())
    if torch.Tag.data_dependent_output in tags:
        return True
    if torch.Tag.dynamic_output_shape not in tags:
        return False
    indices = _argument(node, "indices")
    if not isinstance(indices, (list, tuple)):
        return True
    for index in indices:
        val = index.meta.get("val") if isinstance(index, Node) else index
        if index is not None and not (isinstance(val, torch.Tensor) and not val.dtype.is_floating_point
                                      and val.dtype not in (torch.bool, torch.uint8)):
            return True
    return False


def _written_args(node: Node) -> list[Node]:
    """The arguments ``node`` writes (its schema's mutable arguments)."""
    if is_input_copy(node):
        return [node.args[0]]
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return []
    written = []
    for k, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = node.args[k] if k < len(node.args) else node.kwargs.get(arg.name)
        written += [v for v in (value if isinstance(value, (tuple, list)) else (value,)) if isinstance(v, Node)]
    return written


def _root(node: Node) -> Node:
    """The node whose memory ``node`` is (through views of views)."""
    while node.op == "call_function" and node.args and isinstance(node.args[0], Node) \
            and returns_alias(node.target, unknown=False):
        node = node.args[0]
    return node


# ------------------------------------------------------------------------- leaves and keys
def flatten(items: Sequence[Any]) -> tuple[list[Any], Any]:
    """The leaves of ``items`` (a tuple or list inside it is taken apart) and its structure
    for ``unflatten`` (None when every item is a leaf)."""
    if not any(type(v) is tuple or type(v) is list for v in items):
        return list(items), None
    leaves: list[Any] = []
    return leaves, tuple(_take_apart(v, leaves) for v in items)


def _take_apart(value: Any, leaves: list[Any]) -> Any:
    if type(value) is tuple or type(value) is list:
        return type(value), tuple(_take_apart(v, leaves) for v in value)
    leaves.append(value)
    return None


def unflatten(leaves: Sequence[Any], structure: Any) -> list[Any]:
    """The list ``flatten`` took apart into ``leaves`` and ``structure``."""
    if structure is None:
        return list(leaves)
    it = iter(leaves)
    return [_put_together(s, it) for s in structure]


def _put_together(structure: Any, it: Iterator[Any]) -> Any:
    if structure is None:
        return next(it)
    kind, items = structure
    return kind(_put_together(s, it) for s in items)


def _leaf_key(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.dtype, value.shape, value.stride(), value.device
    if type(value) is float:
        return float, value.hex()  # NaN is one key, -0.0 another than 0.0
    return type(value), value


def shape_key(leaves: Sequence[Any]) -> tuple[Any, ...]:
    """The recording ``leaves`` (tensors and numbers) replay: see the module docstring."""
    return tuple(map(_leaf_key, leaves))


# ------------------------------------------------------------------------------ static inputs
def span(sizes: Sequence[int], strides: Sequence[int]) -> int:
    """How many elements of memory a tensor of ``sizes`` and ``strides`` covers, from its
    first element to its last (0 when it has none)."""
    if any(s == 0 for s in sizes):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))


def non_overlapping(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether no two elements of a tensor of ``sizes`` and ``strides`` share memory
    (proved by taking the dimensions by increasing stride: each must step over all the
    memory the ones before cover); False when it cannot be proved."""
    if any(s == 0 for s in sizes):
        return True
    covered = 1
    for stride, size in sorted((st, s) for s, st in zip(sizes, strides, strict=True) if s > 1):
        if stride < covered:
            return False
        covered += (size - 1) * stride
    return True


@dataclass(slots=True)
class StaticInput:
    """The memory a recording reads leaf ``slot`` from (see the module docstring);
    ``whole``: for a tensor whose elements may overlap, its buffer as one flat tensor,
    filled with the caller's span (an overlapping tensor cannot be copied into)."""

    slot: int
    static: torch.Tensor
    address: int
    borrowed: bool
    whole: torch.Tensor | None = None

    @classmethod
    def of(cls, slot: int, x: torch.Tensor, borrow: bool) -> StaticInput:
        """The static input of ``x``: ``x`` itself when ``borrow``, else a new buffer holding
        its values."""
        if borrow:
            static = x.detach()
            return cls(slot, static, static.data_ptr(), True)
        if non_overlapping(x.shape, x.stride()):
            static = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
            made = cls(slot, static, static.data_ptr(), False)
        else:
            whole = torch.empty(span(x.shape, x.stride()), dtype=x.dtype, device=x.device)
            static = whole.as_strided(x.shape, x.stride(), 0)
            made = cls(slot, static, static.data_ptr(), False, whole)
        made.fill(x)
        return made

    def fill(self, x: torch.Tensor) -> None:
        """Copy the caller's ``x`` (of the recorded sizes and strides) into the buffer."""
        if self.whole is None:
            self.static.copy_(x)
        else:
            self.whole.copy_(x.as_strided((self.whole.numel(),), (1,), x.storage_offset()))


# ----------------------------------------------------------------------------------- outputs
@dataclass(frozen=True, slots=True)
class OutputRule:
    """How one output leaf is made after a replay. ``kind``: "value" (``value``, a number
    or None, the same for every call of the recording), "input" (the caller's leaf ``slot``,
    or with ``view`` the view ``sizes``/``strides``/``offset`` of it, ``offset`` relative to
    its own), "clone" (the copy of ``group``: the output alone in its storage, dense),
    "copy" (``sizes``/``strides`` at element ``offset`` of the copy of ``group``, a flat
    span of bytes shared with other outputs or not dense), "empty" (a new tensor of no
    elements)."""

    kind: str
    value: Any = None
    slot: int = -1
    view: bool = False
    group: int = -1
    sizes: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    offset: int = 0
    dtype: torch.dtype | None = None
    device: torch.device | None = None


_ALIGN = 16  # bytes: a copy starts here so that every dtype's offset stays whole


def plan_outputs(outputs: Sequence[Any], statics: Sequence[Any]) -> tuple[list[OutputRule], list[torch.Tensor]] | str:
    """The rule of each output leaf of a recording and the memory each copied group is
    taken from (the output itself for a "clone", else a flat uint8 tensor over the bytes its
    outputs span), given the recording's
    input leaves ``statics`` (its static tensors, numbers as they are); a reason string
    when an output cannot be returned correctly."""
    by_storage: dict[int, int] = {}
    for k, s in enumerate(statics):
        if isinstance(s, torch.Tensor) and s.numel() > 0:
            by_storage.setdefault(s.untyped_storage().data_ptr(), k)
    groups: dict[int, list[int]] = {}
    rules: list[OutputRule | None] = []
    for k, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            if not isinstance(out, _SCALARS):
                return f"output {k} is a {type(out).__name__}"
            rules.append(OutputRule("value", value=out))
            continue
        sizes, strides = tuple(out.shape), tuple(out.stride())
        if out.numel() == 0:
            rules.append(OutputRule("empty", sizes=sizes, strides=strides, dtype=out.dtype, device=out.device))
            continue
        slot = by_storage.get(out.untyped_storage().data_ptr())
        if slot is not None:
            base = statics[slot]
            if out.dtype != base.dtype:
                return f"output {k} is a view of input {slot} with another dtype"
            offset = out.storage_offset() - base.storage_offset()
            view = (sizes, strides, offset) != (tuple(base.shape), tuple(base.stride()), 0)
            rules.append(OutputRule("input", slot=slot, view=view, sizes=sizes, strides=strides, offset=offset))
            continue
        groups.setdefault(out.untyped_storage().data_ptr(), []).append(k)
        rules.append(None)
    sources = []
    for members in groups.values():
        first = outputs[members[0]]
        if len(members) == 1 and _clones_exactly(first):  # the common case: one op
            rules[members[0]] = OutputRule("clone", group=len(sources))
            sources.append(first)
            continue
        ends = [(outputs[k].storage_offset() * outputs[k].element_size(),
                 (outputs[k].storage_offset() + span(outputs[k].shape, outputs[k].stride())) * outputs[k].element_size())
                for k in members]
        low = min(e[0] for e in ends) // _ALIGN * _ALIGN
        high = max(e[1] for e in ends)
        memory = torch.empty(0, dtype=torch.uint8, device=first.device).set_(first.untyped_storage())
        for k in members:
            out = outputs[k]
            rules[k] = OutputRule("copy", group=len(sources), sizes=tuple(out.shape), strides=tuple(out.stride()),
                                  offset=(out.storage_offset() * out.element_size() - low) // out.element_size(),
                                  dtype=out.dtype, device=out.device)
        sources.append(memory[low:high])
    return [r for r in rules if r is not None], sources


def _clones_exactly(t: torch.Tensor) -> bool:
    """Whether ``t.clone(memory_format=torch.preserve_format)`` has ``t``'s strides (torch
    keeps them for a tensor whose elements are dense and do not overlap)."""
    if span(t.shape, t.stride()) != t.numel() or not non_overlapping(t.shape, t.stride()):
        return False
    return t.clone(memory_format=torch.preserve_format).stride() == t.stride()


def make_outputs(rules: Sequence[OutputRule], sources: Sequence[torch.Tensor], leaves: Sequence[Any],
                 lender: Any = None) -> list[Any]:
    """The output leaves of one replay: each group of ``sources`` copied once (before the
    next replay overwrites it), or lent (``lender(group, source)``: the caller's tensor over
    the source's memory, or None to copy it; ``_cudagraph_lend``), inputs as the caller's
    ``leaves``."""
    copies = []
    for group, source in enumerate(sources):
        out = lender(group, source) if lender is not None else None
        copies.append(out if out is not None else source.clone(memory_format=torch.preserve_format))
    outs = []
    for r in rules:
        kind = r.kind
        if kind == "clone":
            outs.append(copies[r.group])
        elif kind == "copy":
            # the group's bytes start where its tensor does: 0 for a copy, the first output's
            # (aligned) byte for memory lent where the recording wrote it
            memory = copies[r.group]
            start = memory.storage_offset() * memory.element_size() // r.dtype.itemsize
            outs.append(torch.empty(0, dtype=r.dtype, device=r.device).set_(
                memory.untyped_storage(), start + r.offset, r.sizes, r.strides))
        elif kind == "input":
            x = leaves[r.slot]
            outs.append(x.as_strided(r.sizes, r.strides, x.storage_offset() + r.offset) if r.view else x)
        elif kind == "value":
            outs.append(r.value)
        else:
            outs.append(torch.empty_strided(r.sizes, r.strides, dtype=r.dtype, device=r.device))
    return outs
