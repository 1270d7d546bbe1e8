"""The wrapper: the Python function that runs a compiled graph. It binds the size symbols
from the inputs, allocates each buffer a kernel writes (or hands it the memory of a dead
buffer of the same layout: ``_Pool``), calls the kernels (through ctypes) and the ATen calls
in order, deletes every other buffer after its last reader (memory is released as early as
in eager code), and returns the outputs with their traced sizes and strides. When a kernel
computes random numbers, the call first draws its seed from torch's default generator
(``kiln_seed``, an argument of those kernels; ``_lower_random``), or, for Triton kernels
recorded into CUDA graphs, takes the device tensor holding it (``kiln_seed_ptr``, from the
graph's ``_lower_random.SeedCell``).

The source is readable (``KILN_LOGS=output_code``): one statement per step, buffers by name.
``call(args)`` takes one list, which it empties (the caller's references go with it); an
ATen call's result with other strides than traced is copied into the traced layout before a
kernel reads it (the kernels index memory by the traced strides).
"""

from __future__ import annotations

import ctypes
import keyword
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from ._graph import InductorUnsupported, LoweredGraph
from ._ir import (
    SCALAR_OPS,
    SEED,
    SEED_PTR,
    ExternBuffer,
    InputBuffer,
    RuntimeScalar,
    SizeScalar,
    TensorValue,
    sym,
)
from ._lower_random import SEED_CELL, SeedCell, draw_seed
from ._mutation import returns_alias
from ._printer import PYTHON
from ._scheduler import Kernel, extern_reads, output_buffers, step_readers
from .cpp._kernel import ERROR_PARAM
from .triton._launch import Launch, launch_state
from .triton._precompile import launch_kinds

__all__ = ["WrapperSource", "render_wrapper", "reusable_buffers"]


pyexpr = PYTHON  # a size expression as Python


def _tuple(exprs: Sequence[Any]) -> str:
    items = [pyexpr(e) for e in exprs]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _reinterpret(t: torch.Tensor, sizes: tuple, strides: tuple, offset: int) -> torch.Tensor:
    return t.as_strided(sizes, strides, t.storage_offset() + offset)


def _to_layout(t: torch.Tensor, sizes: tuple, strides: tuple) -> torch.Tensor:
    out = torch.empty_strided(sizes, strides, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


@dataclass(slots=True)
class WrapperSource:
    code: str
    globals: dict[str, Any] = field(default_factory=dict)


class _Globals:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self._by_id: dict[int, str] = {}

    def ref(self, obj: Any, hint: str) -> str:
        name = self._by_id.get(id(obj))
        if name is None:
            name = f"_{hint}{len(self.values)}"
            self.values[name] = obj
            self._by_id[id(obj)] = name
        return name


def _literal(value: Any, glob: _Globals, by_name: dict[str, Any] | None = None) -> str:
    if isinstance(value, RuntimeScalar):
        return value.name  # the wrapper's argument
    if isinstance(value, SizeScalar):  # computed where it is used, from the sizes bound above
        return SCALAR_OPS[value.op].format(*(_literal(a, glob, by_name) for a in value.args))
    if isinstance(value, (torch.SymFloat, torch.SymBool)):
        # never a constant: the traced object's value is the example's, not this call's
        raise InductorUnsupported(f"a traced number {value!r} the wrapper cannot name")
    if isinstance(value, TensorValue):
        name, strides, offset = value.view
        buffer = (by_name or {}).get(name)
        if buffer is not None and offset == 0 and tuple(value.sizes) == tuple(buffer.sizes) \
                and tuple(strides) == tuple(buffer.strides()):
            return name  # the whole buffer as it is: no view to make (as_strided costs ~1 us)
        return f"_reinterpret({name}, {_tuple(value.sizes)}, {_tuple(strides)}, {pyexpr(offset)})"
    if isinstance(value, (bool, type(None))) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return repr(value) if not (isinstance(value, float) and (value != value or abs(value) == float("inf"))) \
            else f"float({str(value)!r})"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, torch.SymInt):
        return pyexpr(sym(value))
    if isinstance(value, sympy.Basic):
        return pyexpr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v, glob, by_name) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal(v, glob, by_name) for v in value) + ("," if len(value) == 1 else "") + ")"
    return glob.ref(value, type(value).__name__.lower())


def render_wrapper(graph: LoweredGraph, steps: Sequence[Kernel | ExternBuffer], kernels: dict[str, Any],
                   params: dict[str, list[Any]], launches: dict[str, Any] | None = None,
                   twin_of: dict[str, str] | None = None) -> WrapperSource:
    """The source of ``call(args)`` for ``graph`` run as ``steps``; ``kernels``: the loaded
    function of each kernel by name (a C++ function, or a Triton kernel); ``params``: each
    kernel's parameters; ``launches``: the ``triton.TritonKernel`` of each Triton kernel;
    ``twin_of``: for a kernel whose function is an earlier kernel's (``_twins``), that kernel."""
    launches = launches or {}
    twin_of = twin_of or {}
    glob = _Globals()
    glob.values.update({"_reinterpret": _reinterpret, "_to_layout": _to_layout, "_empty": torch.empty_strided,
                        "_threads": torch.get_num_threads, "_error_slots": _error_slots, "_address": _address,
                        "_raise_index_error": _raise_index_error, "_launch_state": launch_state})
    by_name = {b.name: b for b in graph.buffers}
    args = [b.name if isinstance(b, InputBuffer) else f"arg{k}" for k, b in enumerate(graph.inputs)]
    lines = [f"{', '.join(args)}{',' if len(args) == 1 else ''} = args; args.clear()" if args else "args.clear()"]
    flat_args, flat_inputs = [], []
    for arg, inp in zip(args, graph.inputs, strict=True):
        if isinstance(inp, tuple):  # a tuple saved whole: its tensors by name
            names = [b.name if b is not None else "_" for b in inp]
            lines.append(f"{', '.join(names)}{',' if len(names) == 1 else ''} = {arg}; del {arg}")
            flat_args += [b.name for b in inp if b is not None]
            flat_inputs += [b for b in inp if b is not None]
        else:
            flat_args.append(arg)
            flat_inputs.append(inp)
    lines += _bind_sizes(flat_inputs, flat_args, graph)
    lines.append("threads = _threads()")
    lines += _launch_states(launches, {s.name: s.device for s in steps if isinstance(s, Kernel)})
    if any(p.name == SEED.name for ps in params.values() for p in ps):
        # the call's random seed, from torch's default generator (``_lower_random``)
        glob.values["_seed"] = draw_seed
        lines.append(f"{SEED.name} = _seed()")
    seeded = {s.device for s in steps if isinstance(s, Kernel) and any(p.name == SEED_PTR for p in params[s.name])}
    if seeded:  # the seed in device memory (Triton kernels under CUDA graphs: ``_lower_random.SeedCell``)
        if len(seeded) > 1:
            raise AssertionError(f"random kernels on several devices read one seed tensor: {sorted(seeded)}")
        glob.values[SEED_CELL] = SeedCell()
        lines.append(f"{SEED_PTR} = {SEED_CELL}.take({next(iter(seeded))!r})")
    if any(p.name == ERROR_PARAM for ps in params.values() for p in ps):
        # where kernels report an index out of range: one pair of slots for the call (a
        # report raises at once, so the slots are clear again for the next kernel)
        lines.append(f"{ERROR_PARAM} = _error_slots(); {ERROR_PARAM}_at = _address({ERROR_PARAM})")
    for name, tensor in graph.constants.items():
        lines.append(f"{name} = {glob.ref(tensor, 'const')}")
    last = {name: max(at) for name, at in step_readers(steps).items()}
    local = {st.buffer.name for s in steps if isinstance(s, Kernel) for st in s.stages if st.local}
    outputs = output_buffers(graph)
    freed: set[str] = set()
    taken = {st.buffer.storage for s in steps if isinstance(s, Kernel) for st in s.stages if st.buffer.storage}
    pool = _Pool(reusable_buffers(graph, steps) - taken, steps)
    for k, step in enumerate(steps):
        if isinstance(step, ExternBuffer):
            lines += _extern(step, glob, by_name)
        else:
            lines += _kernel_call(step, kernels, params, glob, pool, by_name, launches.get(step.name),
                                  launches.get(twin_of.get(step.name, step.name)))
        pool.allocated(step)
        dead = sorted(n for n, at in last.items() if at == k and n not in outputs and n not in freed
                      and n in by_name and n not in local)
        kept = [n for n in dead if pool.keep(by_name[n])]
        dead = [n for n in dead if n not in kept]
        if dead:
            lines.append(f"del {', '.join(dead)}")
        freed.update(dead, kept)
    lines.append("return " + _tuple_code([_output(o, by_name, glob) for o in graph.outputs]))
    code = "def call(args):\n" + "".join(f"    {line}\n" for line in lines)
    return WrapperSource(code, glob.values)


def _tuple_code(items: list[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _bind_sizes(inputs: list[Any], args: list[str], graph: LoweredGraph) -> list[str]:
    bound: set[sympy.Symbol] = set()
    lines = []
    for arg, inp in zip(args, inputs, strict=True):
        if isinstance(inp, InputBuffer):
            for d, size in enumerate(inp.sizes):
                if isinstance(size, sympy.Symbol) and size not in bound:
                    lines.append(f"{size.name} = {arg}.size({d})")
                    bound.add(size)
            for d, stride in enumerate(inp.stride):
                if isinstance(stride, sympy.Symbol) and stride not in bound:
                    lines.append(f"{stride.name} = {arg}.stride({d})")
                    bound.add(stride)
        elif isinstance(inp, sympy.Symbol) and inp not in bound:
            lines.append(f"{inp.name} = {arg}")
            bound.add(inp)
    needed: set[sympy.Symbol] = set()
    for b in graph.buffers:
        for e in (*b.sizes, *b.strides()):
            needed |= sympy.sympify(e).free_symbols
    missing = needed - bound
    if missing:
        raise ValueError(f"size symbols {sorted(map(str, missing))} are not sizes of any input")
    return lines


class _Pool:
    """Memory planning: buffers past their last use, kept by layout (sizes, strides,
    dtype) for a later buffer of the same layout, which takes one instead of allocating
    (``buf7 = buf3; del buf3``). Only buffers the wrapper allocated for kernels are kept, and
    only those no ATen call may have made a view of (``reusable_buffers``)."""

    def __init__(self, reusable: set[str], steps: Sequence[Kernel | ExternBuffer]) -> None:
        self.reusable = reusable
        self.free: dict[tuple, list[str]] = {}
        # the allocations still to come, by layout: a dead buffer is kept only for one of them
        self.coming: dict[tuple, int] = {}
        for step in steps:
            for buffer in _allocated(step):
                layout = self._layout(buffer)
                self.coming[layout] = self.coming.get(layout, 0) + 1

    @staticmethod
    def _layout(buffer: Any) -> tuple:
        return tuple(buffer.sizes), tuple(buffer.strides()), buffer.dtype

    def allocated(self, step: Kernel | ExternBuffer) -> None:
        """``step``'s allocations are made: they no longer wait for memory."""
        for buffer in _allocated(step):
            self.coming[self._layout(buffer)] -= 1

    def keep(self, buffer: Any) -> bool:
        layout = self._layout(buffer)
        free = self.free.setdefault(layout, [])
        if buffer.name not in self.reusable or self.coming.get(layout, 0) <= len(free):
            return False
        free.append(buffer.name)
        return True

    def take(self, buffer: Any) -> str | None:
        names = self.free.get(self._layout(buffer))
        return names.pop() if names else None


def reusable_buffers(graph: LoweredGraph, steps: Sequence[Kernel | ExternBuffer]) -> set[str]:
    """The kernel buffers whose memory may be handed to another buffer once they are dead:
    allocated by the wrapper (not an input's, not an ATen result, not a register), not an
    output, and never an argument of an ATen call whose result may alias its arguments (a
    view of it could still be alive)."""
    names = {b.name for s in steps for b in _allocated(s)}
    for step in steps:
        if isinstance(step, ExternBuffer) and returns_alias(step.node.target, unknown=True):
            names -= set(extern_reads(step))
    return names - output_buffers(graph)


def _allocated(step: Kernel | ExternBuffer) -> list[Any]:
    """The buffers the wrapper allocates for ``step`` (a kernel's stored stages)."""
    if not isinstance(step, Kernel):
        return []
    return [st.buffer for st in step.stages if not st.local and st.buffer.into is None and st.buffer.storage is None]


def _kernel_call(kernel: Kernel, kernels: dict[str, Any], params: dict[str, list[Any]], glob: _Globals,
                 pool: _Pool, by_name: dict[str, Any], launch: Any = None, first: Any = None) -> list[str]:
    """The lines allocating what ``kernel`` writes and calling it: its Triton ``launch`` of
    the function compiled for ``first`` (itself, or the earlier twin whose function it
    calls), or its C++ function."""
    lines = []
    for b in _allocated(kernel):
        reused = pool.take(b)
        if reused is not None:
            lines.append(f"{b.name} = {reused}; del {reused}")
        else:
            device = "" if b.device == "cpu" else f", device={glob.ref(torch.device(b.device), 'device')}"
            lines.append(f"{b.name} = _empty({_tuple(b.sizes)}, {_tuple(b.strides())}, "
                         f"dtype={glob.ref(b.dtype, 'dtype')}{device})")
    for st in kernel.stages:
        if st.buffer.storage is not None:  # written in place of a buffer dying here
            dead, b = by_name[st.buffer.storage], st.buffer
            if tuple(dead.sizes) == tuple(b.sizes) and tuple(dead.strides()) == tuple(b.strides()):
                lines.append(f"{b.name} = {dead.name}")
            else:  # an ATen result of other sizes, the same memory (``_inplace``): viewed as this buffer
                lines.append(f"{b.name} = _reinterpret({dead.name}, {_tuple(b.sizes)}, {_tuple(b.strides())}, 0)")
    if launch is not None:
        return lines + _triton_launch(kernels[kernel.name], launch, first, kernel.device, glob)
    fn = glob.ref(kernels[kernel.name], kernel.name)
    error = next((p for p in params[kernel.name] if p.name == ERROR_PARAM), None)
    call_args = [p.name if p.kind == "size" else f"{ERROR_PARAM}_at" if p is error else f"{p.name}.data_ptr()"
                 for p in params[kernel.name]]
    lines.append(f"{fn}({', '.join([*call_args, 'threads'])})")
    if error is not None:
        checks = ", ".join(f"({c.error!r}, {c.message!r}, {c.dim})" for c in error.checks)
        sizes = ", ".join(pyexpr(c.size) for c in error.checks)
        lines.append(f"if {ERROR_PARAM}[0]: _raise_index_error({ERROR_PARAM}, ({checks},), ({sizes},))")
    return lines


def launch_global(kernel: str) -> str:
    """The wrapper's global holding the ``Launch`` of Triton kernel ``kernel`` (kernel names
    are unique; no other global starts so)."""
    return f"_launch_{kernel}"


def _triton_launch(fn: Any, launch: Any, first: Any, device: str, glob: _Globals) -> list[str]:
    """A Triton kernel's launch (``triton._launch.Launch``, with the call's launch state of
    its device): its program count, its buffers as tensors, its sizes; none where it has no
    program to run (an empty tensor). ``fn`` is the function compiled for ``first`` (the
    launch itself, or its earlier twin): the ``Launch`` takes that function's parameter names,
    the twin's arguments in their positions."""
    args = [p.name for p in launch.params]
    kinds = launch_kinds(launch)
    launcher = launch_global(launch.name)
    launch_meta = launch.launch_meta()
    glob.values[launcher] = Launch(fn, [p.name for p in first.params], kinds, launch_meta)
    programs = sympy.sympify(launch.programs)
    meta = ", ".join(f"{k}={v}" for k, v in launch_meta.items())
    call = f"{launcher}({_state_name(device)}, {', '.join([pyexpr(programs), *args])})  # {meta}"
    if programs.is_Integer:
        return [call] if int(programs) > 0 else []
    return [f"if {pyexpr(programs)} > 0: {call}"]


def _state_name(device: str) -> str:
    """The wrapper's local of the launch state (``triton._launch.launch_state``) of
    ``device``'s Triton kernels; ``None`` on the CPU (triton's interpreter)."""
    d = torch.device(device)
    if d.type != "cuda":
        return "None"
    return f"_cuda_{d.index}" if d.index is not None else "_cuda"


def _launch_states(launches: dict[str, Any], devices: dict[str, str]) -> list[str]:
    """The lines reading each CUDA device's launch state, once per call."""
    lines = []
    for device in sorted({devices[name] for name in launches}):
        name = _state_name(device)
        if name != "None":
            lines.append(f"{name} = _launch_state({torch.device(device).index!r})")
    return lines


_ErrorSlots = ctypes.c_int64 * 2


def _error_slots() -> Any:
    """Where a kernel reports an index out of range: which check (from 1; 0: none) and its value."""
    return _ErrorSlots()


def _address(slots: Any) -> int:
    return ctypes.addressof(slots)


def _raise_index_error(slots: Any, checks: tuple, sizes: tuple) -> None:
    """Raise what eager raises for the index a kernel found out of range."""
    error, message, dim = checks[slots[0] - 1]
    text = message.format(index=slots[1], dim=dim, size=sizes[slots[0] - 1])
    raise (IndexError if error == "IndexError" else RuntimeError)(text)


def _extern(buffer: ExternBuffer, glob: _Globals, by_name: dict[str, Any]) -> list[str]:
    node = buffer.node
    op = glob.ref(node.target, str(node.target).replace(".", "_"))
    args, kwargs = node.meta["inductor_args"]
    named = {k: _literal(v, glob, by_name) for k, v in kwargs.items()}
    # an argument named by a Python keyword (``uniform``'s ``from``) goes in a ``**`` dict
    keywords = {k: v for k, v in named.items() if keyword.iskeyword(k)}
    call = ", ".join([*(_literal(a, glob, by_name) for a in args),
                      *(f"{k}={v}" for k, v in named.items() if k not in keywords),
                      *([f"**{{{', '.join(f'{k!r}: {v}' for k, v in keywords.items())}}}"] if keywords else [])])
    if buffer.item is None:
        lines = [f"{buffer.name} = {op}({call})"]
    else:
        items = sorted((b.item, b.name) for b in by_name.values() if isinstance(b, ExternBuffer) and b.node is node)
        result = f"{items[0][1]}_all"
        lines = [f"{result} = {op}({call})"] if buffer.item == items[0][0] else []
        lines.append(f"{buffer.name} = {result}[{buffer.item}]")
        if buffer.item == items[-1][0]:
            lines.append(f"del {result}")
    strides = _tuple(buffer.stride)
    # an item the trace saw as a tensor may be None at run time (CUDA attention's logsumexp when
    # no gradient needs it): nothing reads it then
    guard = f"{buffer.name} is not None and " if buffer.item is not None else ""
    lines.append(f"if {guard}{buffer.name}.stride() != {strides}: "
                 f"{buffer.name} = _to_layout({buffer.name}, {_tuple(buffer.sizes)}, {strides})")
    return lines


def _output(out: Any, by_name: dict[str, Any], glob: _Globals) -> str:
    if out.items is not None:
        return _tuple_code([_output(o, by_name, glob) for o in out.items])
    if out.buffer is None:
        value = out.constant
        if isinstance(value, sympy.Basic):
            return pyexpr(value)
        return _literal(value, glob)
    buffer = by_name[out.buffer]
    if (tuple(out.sizes) == tuple(buffer.sizes) and tuple(out.strides) == tuple(buffer.strides())
            and out.offset == 0):
        return out.buffer
    return f"_reinterpret({out.buffer}, {_tuple(out.sizes)}, {_tuple(out.strides)}, {pyexpr(out.offset)})"

