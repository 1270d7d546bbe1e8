"""Lowering one ATen graph: every node to ``TensorValue``s (``lowering_rules``) or to an
ATen call, and the decisions of what lives in memory (realization).

``lower_graph(gm, policy)`` returns a ``LoweredGraph``: the inputs, the buffers in the order
they are computed (``ComputedBuffer``s for kernels, ``ExternBuffer``s for ATen calls), and the
outputs, each a buffer read with the traced sizes and strides (or a plain value).

What is realized (a buffer in memory, computed once): a reduction; the input of an ATen
call; a graph output; a pointwise value read by more than one node when it costs more than
``policy.inline_max_ops`` operations per element, or read inside a reduction's loop by more
than one node; any value whose expression grew past ``policy.realize_ops``. Everything else
is inlined into its readers (recomputed where it is read), which is what fuses chains of
pointwise ops into one loop.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import logging
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from kiln.fxgraph import GraphModule, Node
from kiln.symshapes import FloorDiv, Mod

from . import (  # noqa: F401 - they register their rules
    _lower_concat,
    _lower_indexing,
    _lower_matmul,
    _lower_random,
    _lower_reductions,
    _lower_scan,
    _lower_scatter,
    _lower_views,
)
from ._graph_outputs import GraphOutput, OutputsMixin
from ._ir import (
    SCALAR_OPS,
    Buffer,
    ComputedBuffer,
    ExternBuffer,
    InputBuffer,
    Matmul,
    Pointwise,
    Reduction,
    RuntimeScalar,
    Scan,
    Scatter,
    SizeScalar,
    TensorValue,
    contiguous_strides,
    flat_index,
    loop_vars,
    sym,
)
from ._layout import (
    CHANNELS_LAST,
    LayoutConflict,
    channels_last_call,
    dense_layout,
    follow_order,
    integer_strides,
    ordered_strides,
)
from ._lowering import KERNEL_DTYPES, Fallback, LoweringContext, broadcast, lowering_rules, scalar
from ._mutation import is_input_copy, overwritten_copies, returns_alias, shared_storage_inputs
from ._ops import ReadsOps, has_indirect
from ._policy import FusionPolicy

__all__ = ["GraphOutput", "InductorUnsupported", "LoweredGraph", "lower_graph", "shape_env"]

_log = logging.getLogger("kiln")


@dataclass(slots=True)
class LoweredGraph:
    inputs: list[Any]  # per placeholder: an InputBuffer, a tuple of them (and None), a size symbol, or None
    buffers: list[Buffer]
    outputs: list[GraphOutput]
    constants: dict[str, Any] = field(default_factory=dict)  # get_attr tensors, by buffer name
    fallbacks: dict[str, str] = field(default_factory=dict)  # ATen op -> why it was not lowered


class InductorUnsupported(Exception):
    """kiln.inductor does not take this graph (the reason says why); the backend runs the ATen
    graph as its generated code instead."""


def shape_env(gm: GraphModule) -> Any:
    """The ShapeEnv of ``gm``'s symbolic sizes (None: every size is static)."""
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        for v in val if isinstance(val, (list, tuple)) else (val,):
            sizes = (*v.shape, *v.stride(), v.storage_offset()) if isinstance(v, torch.Tensor) else (v,)
            for size in sizes:
                env = getattr(getattr(size, "node", None), "env", None) if isinstance(size, torch.SymInt) else None
                if env is not None:
                    return env
    return None


@dataclass(eq=False)
class _Call:
    """An ATen call a lowering rule makes that is no node of the graph (``aten_call``): what
    an ``ExternBuffer`` reads of its node."""

    target: Any
    name: str
    meta: dict[str, Any]
    users: tuple = ()

    def format_node(self) -> str:
        return f"{self.name} = {self.target}(...)"


class _Lowering(OutputsMixin, LoweringContext):
    def __init__(self, gm: GraphModule, policy: FusionPolicy,
                 matmul_choice: Callable[[Matmul, tuple[sympy.Expr, ...], torch.dtype, str, bool], bool] | None = None) -> None:
        self.gm = gm
        self.policy = policy
        self._matmul_choice = matmul_choice
        self.buffers: list[Buffer] = []
        self.by_name: dict[str, Buffer] = {}
        self.fallbacks: dict[str, str] = {}
        self.current: Node | None = None
        self.realized: dict[int, tuple[TensorValue, TensorValue]] = {}  # id(value) -> (value, its buffer)
        # id(value) -> (value, strides): the values of outputs, realized in eager's strides (``realize``)
        self.eager_values: dict[int, tuple[TensorValue, tuple[sympy.Expr, ...]]] = {}
        # layout optimization (``_layout``): the memory order of each buffer laid out other than
        # contiguously that values follow (channels-last ones), and which of them this pass laid
        # out so (eager's would be NCHW: nothing may read their storage by eager's strides)
        self.layouts: dict[str, tuple[int, ...]] = {}
        self.moved: set[str] = set()
        self.ordered: dict[tuple[int, tuple[int, ...]], tuple[TensorValue, TensorValue]] = {}
        self.eager_copies: dict[tuple[str, tuple[sympy.Expr, ...]], TensorValue] = {}
        self.direct_views: set[str] = set()  # such buffers outputs the user sees read as they are
        self.device = "cpu"  # the device of the node being lowered: its buffers' (``Buffer.device``)
        self._env: Any = False  # the ShapeEnv of the graph's sizes (``hint``), found at the first use

    @property
    def language(self) -> str:
        """The code generator of the current node's kernels: ``"cpp"`` or ``"triton"``."""
        return "cpp" if self.device == "cpu" and self.policy.cpu_backend == "cpp" else "triton"

    def hint(self, expr: sympy.Expr) -> int | None:
        """A size's value on the example inputs (itself when static); None for one no example
        decides (an unbacked size: a data-dependent count)."""
        if isinstance(expr, (int, sympy.Integer)):
            return int(expr)
        if self._env is False:
            self._env = shape_env(self.gm)
        value = self._env.size_hint(expr) if self._env is not None else None
        return int(value) if value is not None else None

    # ---------------------------------------------------------------- context
    def _new_name(self, prefix: str) -> str:
        return f"{prefix}{len(self.buffers)}"

    def _add(self, buffer: Buffer, value: TensorValue | None = None) -> Buffer:
        """Append ``buffer``; a computed one is on the device of ``value`` (the elements it
        holds), else on the current node's."""
        if isinstance(buffer, ComputedBuffer):
            buffer.device = self.device if value is None else self._device_of(value)
        self.buffers.append(buffer)
        self.by_name[buffer.name] = buffer
        return buffer

    def _origin(self) -> list[str]:
        """The node being lowered, for the comments of the buffers made for it."""
        return [self.current.name] if self.current is not None else []

    def realize(self, value: TensorValue, strides: tuple[sympy.Expr, ...] | None = None) -> TensorValue:
        """``value`` in memory: a buffer computing it, made once per value (the same value
        handed to two ATen calls is computed once; it holds the elements of when it was first
        realized, which is what the value is: a later write of what it reads first computes
        the values still to be read, ``_before_write``)."""
        if value.view is not None:
            return value
        known = self.realized.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        buffer = self._add(ComputedBuffer(self._new_name("buf"), value.sizes, value.dtype, Pointwise(value.loader),
                                          origins=self._origin()), value)
        realized = buffer.value()
        if strides is None:  # an output's value: eager's strides (``eager_values``)
            eager = self.eager_values.get(id(value))
            strides = eager[1] if eager is not None and eager[0] is value else None
        if strides is not None and dense_layout(value.sizes, strides) and strides != contiguous_strides(value.sizes):
            buffer.layout_strides = strides
            realized = TensorValue.strided(buffer.name, value.sizes, strides, sympy.S.Zero, value.dtype)
        self.realized[id(value)] = (value, realized)
        return realized

    def _eager_layouts(self, value: Any, val: Any) -> None:
        """Records the traced strides of an output's value (each item of a tuple's) for
        ``realize``."""
        if isinstance(value, tuple) and isinstance(val, (tuple, list)):
            for v, t in zip(value, val, strict=True):
                self._eager_layouts(v, t)
        elif isinstance(value, TensorValue) and isinstance(val, torch.Tensor):
            self.eager_values[id(value)] = (value, tuple(sym(s) for s in val.stride()))

    def realize_ordered(self, value: TensorValue, order: tuple[int, ...]) -> TensorValue:
        """``value`` in memory with its dimensions laid out in ``order`` (the outermost first):
        a contiguous buffer of the permuted sizes (the scheduler loops over it in memory
        order), read through the permuted view; made once per value and order."""
        strides = ordered_strides(value.sizes, order)
        if value.view is not None and tuple(value.view[1]) == strides and value.view[2] == 0:
            return value
        known = self.ordered.get((id(value), order))
        if known is not None and known[0] is value:
            return known[1]
        load, sizes = value.loader, tuple(value.sizes[d] for d in order)

        def loader(index: Sequence[sympy.Expr], ops: Any) -> Any:
            logical: list[sympy.Expr] = [sympy.S.Zero] * len(order)
            for k, d in enumerate(order):
                logical[d] = index[k]
            return load(logical, ops)

        buffer = self._add(ComputedBuffer(self._new_name("buf"), sizes, value.dtype, Pointwise(loader),
                                          origins=self._origin()), value)
        self.layouts[buffer.name] = order
        self.moved.add(buffer.name)
        realized = TensorValue.strided(buffer.name, value.sizes, strides, sympy.S.Zero, value.dtype)
        self.ordered[(id(value), order)] = (value, realized)
        return realized

    def _channels_last(self, value: Any) -> bool:
        """Whether ``value`` is held channels-last, or would be realized so (``_realize_free``)."""
        if not isinstance(value, TensorValue) or value.ndim != 4:
            return False
        if value.view is not None:
            return self.layouts.get(value.view[0]) == CHANNELS_LAST and value.view[2] == 0 \
                and tuple(value.view[1]) == ordered_strides(value.sizes, CHANNELS_LAST)
        return follow_order(value, self.layouts) == CHANNELS_LAST

    def _realize_free(self, value: TensorValue) -> TensorValue:
        """``value`` in memory where the lowering chooses its layout: that of the channels-last
        buffer it reads elementwise (``_layout.follow_order``), else contiguous."""
        order = follow_order(value, self.layouts)
        return self.realize_ordered(value, order) if order is not None else self.realize(value)

    def reduction(self, sizes: Sequence[sympy.Expr], dtype: torch.dtype, reduction_type: str,
                  reduced: Sequence[sympy.Expr], loader: Callable[..., Any], src_dtype: torch.dtype,
                  online: tuple[str, str] | None = None) -> TensorValue:
        return self._computed(sizes, dtype, Reduction(reduction_type, tuple(reduced), loader, src_dtype, online))

    def matmul(self, sizes: Sequence[sympy.Expr], dtype: torch.dtype, body: Matmul) -> TensorValue:
        """A new matrix product buffer (``_ir.Matmul``)."""
        return self._computed(sizes, dtype, body)

    def _computed(self, sizes: Sequence[sympy.Expr], dtype: torch.dtype, body: Reduction | Matmul | Scan) -> TensorValue:
        """A new buffer of ``sizes`` and ``dtype`` computed by ``body``, as a value."""
        return self._add(ComputedBuffer(self._new_name("buf"), tuple(sizes), dtype, body, origins=self._origin())).value()

    def matmul_choice(self, body: Matmul, sizes: tuple[sympy.Expr, ...], dtype: torch.dtype, epilogue: bool) -> bool:
        """Whether the product ``body`` becomes a template kernel: ``policy.matmul_templates``
        ``"always"``, or ``"auto"`` and the compile's chooser says so (none: always);
        ``epilogue``: an elementwise op reads it (the chooser credits the template)."""
        if self.policy.matmul_templates == "always" or self._matmul_choice is None:
            return True
        return self._matmul_choice(body, sizes, dtype, self.device, epilogue)

    def aten_call(self, target: Any, node: Node, args: tuple, reason: str) -> Any:
        """The result of an ATen call of ``target`` on ``args`` (values) that ``node``'s rule
        makes in its place, with ``node``'s traced result (the same sizes, strides and dtype);
        ``reason``: why ``target`` is no kernel (``fallbacks``)."""
        self.fallbacks.setdefault(str(target), reason)
        return self._extern(_Call(target, f"{node.name}_{target.__name__.split('.')[0]}", {"val": node.meta["val"]}),
                            args, {})

    def fresh(self, value: TensorValue) -> TensorValue:
        """A new buffer holding ``value``'s elements, its own (never shared with another value,
        unlike ``realize``): what a scatter then writes."""
        buffer = self._add(ComputedBuffer(self._new_name("buf"), value.sizes, value.dtype, Pointwise(value.loader),
                                          origins=self._origin()), value)
        return buffer.value()

    def scatter(self, dest: TensorValue, sizes: Sequence[sympy.Expr], loader: Callable[..., Any],
                target: Callable[..., Any], mode: str | None) -> None:
        """A step writing ``dest`` (a buffer of ``fresh``) at ``target`` (``_ir.Scatter``)."""
        buffer = self.by_name[dest.view[0]]
        self._add(ComputedBuffer(self._new_name("buf"), tuple(sizes), buffer.dtype,
                                 Scatter(loader, target, buffer.strides(), mode), origins=self._origin(), into=buffer.name))

    def scan(self, sizes: Sequence[sympy.Expr], dtype: torch.dtype, scan_type: str, dim: int,
             loader: Callable[..., Any], acc_dtype: torch.dtype) -> TensorValue:
        return self._computed(sizes, dtype, Scan(scan_type, dim, loader, acc_dtype))

    def storage_base(self, value: TensorValue) -> tuple[str, sympy.Expr] | None:
        if value.view is None:
            return None
        if value.view[0] in self.moved:
            raise LayoutConflict(f"{self.current} reads the storage of {value.view[0]}, laid out channels-last")
        buffer = self.by_name[value.view[0]]
        if isinstance(buffer, (InputBuffer, ExternBuffer)):
            return buffer.name, buffer.storage_offset
        return buffer.name, sympy.S.Zero

    # ---------------------------------------------------------------- nodes
    def run(self) -> LoweredGraph:
        env: dict[Node, Any] = {}
        self.env = env
        self.overwritten = overwritten_copies(self.gm.graph)
        self.position = {node: k for k, node in enumerate(self.gm.graph.nodes)}
        self.shared_inputs = shared_storage_inputs(self.gm.graph)
        inputs: list[Any] = []
        constants: dict[str, Any] = {}
        reads: dict[Node, int] = {}
        owners: dict[int, Node] = {}
        self.devices = {str(v.device) for node in self.gm.graph.nodes
                        for v in _tensors(node.meta.get("val"))}
        out = self.gm.graph.output_node
        # outputs only the backward reads, whose layout is free (kiln.aotgrad marks them), where
        # another layout can be reported to the backward (``changed_strides``: integer strides)
        free = set(out.meta.get("free_layout", ())) if out is not None else set()
        free = {k for k in free if integer_strides(out.args[0][k].meta.get("val"))}
        # the outputs the caller sees: realized before the output is reached (for other
        # readers), their values take eager's strides (``realize``)
        seen = {v for k, v in enumerate(out.args[0] if out is not None else ()) if k not in free and isinstance(v, Node)}
        for node in self.gm.graph.nodes:
            for inp in node.all_input_nodes:
                reads[inp] = reads.get(inp, 0) + 1
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                if id(val) in owners and _changes_metadata(node) and not node.meta.get("view_of_base"):
                    # aotgrad's record of an in-place view op (unsqueeze_, t_): both nodes hold the
                    # tensor with its final sizes, so the first node's sizes are not its own
                    raise InductorUnsupported(f"{owners[id(val)].name} and {node.name} share one traced tensor")
                owners[id(val)] = node
        for node in self.gm.graph.nodes:
            self.current = node
            if node.op == "placeholder":
                env[node] = self._placeholder(node, inputs)
            elif node.op == "get_attr":
                value = self.gm.get_attr(node.target)
                if not isinstance(value, torch.Tensor):
                    env[node] = value
                    continue
                buffer = self._input_buffer(f"const{len(constants)}", value)
                constants[buffer.name] = value
                env[node] = buffer.value()
            elif node.op == "call_function":
                self.device = next((str(v.device) for v in _tensors(node.meta.get("val"))), self.device)
                env[node] = self._call(node, env)
                if node in seen:
                    self._eager_layouts(env[node], node.meta.get("val"))
                env[node] = self._maybe_realize(env[node], reads.get(node, 0), node)
            elif node.op == "output":
                outputs = [self._output(v, env, k in free) for k, v in enumerate(node.args[0])]
                self._check_output_copies()
                return LoweredGraph(inputs, self.buffers, outputs, constants, self.fallbacks)
            else:
                raise Fallback(f"node kind {node.op}")
        raise AssertionError("graph without output")

    def _input_buffer(self, name: str, val: torch.Tensor) -> InputBuffer:
        buffer = InputBuffer(name, tuple(sym(s) for s in val.shape), val.dtype, device=str(val.device),
                             stride=tuple(sym(s) for s in val.stride()), storage_offset=sym(val.storage_offset()),
                             storage_size=_storage_size(val))
        self._add(buffer)
        if self.policy.layout_optimization and val.ndim == 4 and buffer.stride != contiguous_strides(buffer.sizes) \
                and buffer.stride == ordered_strides(buffer.sizes, CHANNELS_LAST):
            self.layouts[name] = CHANNELS_LAST  # a channels-last input (the forward's, saved): values follow it
        return buffer

    def _placeholder(self, node: Node, inputs: list[Any]) -> Any:
        val = node.meta.get("val")
        k = len(inputs)
        if isinstance(val, torch.Tensor):
            buffer = self._input_buffer(f"arg{k}", val)
            inputs.append(buffer)
            return TensorValue.strided(buffer.name, buffer.sizes, buffer.stride, sympy.S.Zero, buffer.dtype)
        if isinstance(val, (tuple, list)):
            # a multi-output op's result saved whole for backward: one buffer per tensor
            items = tuple(self._input_buffer(f"arg{k}_{i}", v) if isinstance(v, torch.Tensor) else None
                          for i, v in enumerate(val))
            inputs.append(items)
            return tuple(b.value() if b is not None else v for b, v in zip(items, val, strict=True))
        if isinstance(val, (torch.SymFloat, torch.SymBool)):
            # a number made dynamic: its value exists only at run time, in the wrapper's argument
            scalar = RuntimeScalar(f"arg{k}")
            inputs.append(scalar)
            return scalar
        inputs.append(sym(val) if isinstance(val, torch.SymInt) else None)
        return val

    def _call(self, node: Node, env: dict[Node, Any]) -> Any:
        args = _map(node.args, env)
        kwargs = _map(node.kwargs, env)
        if node.target is operator.getitem:
            return args[0][args[1]]
        scalar = _size_scalar(node, args, kwargs)
        if scalar is not None:
            return scalar
        _refuse_unsupported(node)
        if is_input_copy(node):
            if node in self.overwritten:
                return None  # the next write of the input replaces it before anything reads it
            written = self._input_write(node, args, kwargs)
            if written is not None:
                return written
        if not isinstance(getattr(node.target, "_schema", None), torch.FunctionSchema):
            number = _size_arithmetic(node, args, kwargs)
            if number is not None:
                return number
        rule = lowering_rules.get(node.target)
        reason = "no lowering"
        if _runtime_scalars(args, kwargs):
            rule, reason = None, "a number known only at run time"
        if rule is not None and not self._kernel_device(node):
            rule, reason = None, f"tensors on {self.device}: no kernels there, or of several devices"
        if rule is not None and _kernel_operands(args, kwargs):
            try:
                positional, named = _positional(node.target, args, kwargs)
                return rule(self, node, *positional, **named)
            except Fallback as e:
                reason = str(e)
        self.fallbacks.setdefault(str(node.target), reason)
        return self._extern(node, args, kwargs)

    def _kernel_device(self, node: Node) -> bool:
        """Whether ``node``'s tensors (its result's and its tensor inputs') are all on one
        device that has kernels (the CPU; CUDA with triton installed), each of a dtype kernels
        compute in; that device becomes the current one (``self.device``)."""
        devices: set[str] = set()
        for value in [node.meta.get("val"), *(inp.meta.get("val") for inp in node.all_input_nodes)]:
            for v in _tensors(value):
                if v.dtype not in KERNEL_DTYPES:
                    return False
                devices.add(str(v.device))
        if len(devices) > 1:
            return False
        if devices:
            self.device = devices.pop()
        kind = self.device.partition(":")[0]
        return kind == "cpu" or (kind == "cuda" and _has_triton())

    def _input_write(self, node: Node, args: Any, kwargs: dict) -> TensorValue | None:
        """``copy_`` of a whole graph input as a kernel stage storing into the input's memory
        (``ComputedBuffer.into``), or None where it stays an ATen call (another device or
        dtype, an input sharing its storage with another). Values not computed yet that read
        the input's old elements and are still needed are computed first (``_before_write``);
        the value written, when it reads the input only at the element it replaces, is not:
        it is computed in the same loop, and its later readers read the input instead."""
        dst, src = args[0], args[1] if len(args) > 1 else kwargs.get("src")
        target = node.args[0]
        buffer = self.by_name.get(dst.view[0]) if isinstance(dst, TensorValue) and dst.view else None
        if (not isinstance(buffer, InputBuffer) or target in self.shared_inputs or len(args) + len(kwargs) > 3
                or dst.view != (buffer.name, buffer.stride, sympy.S.Zero) or dst.sizes != buffer.sizes
                or not self._kernel_device(node) or not _kernel_operands(args, kwargs)):
            return None
        dtype = buffer.dtype
        try:
            value = broadcast(src if isinstance(src, TensorValue) else scalar(src, dtype), buffer.sizes)
        except Fallback:
            return None
        index = list(loop_vars("x", len(buffer.sizes)))
        store = flat_index(index, buffer.stride)
        reads = ReadsOps()
        value.loader(index, reads)
        if any(r.name == buffer.name and sympy.expand(r.index - store) != 0 for r in reads.reads) \
                or any(has_indirect(r.index) for r in reads.reads):
            # it reads elements the write replaces first, or through an index that may be out of
            # range (eager raises before writing anything): computed before
            value = self.realize(value)
        source = node.args[1] if len(node.args) > 1 else None
        # the value itself (not a conversion, a broadcast or a copy of it): its readers can read the input
        rebind = isinstance(source, Node) and self.env.get(source) is src and value is src and src.view is None \
            and src.dtype == dtype
        self._before_write(buffer.name, node, keep=source if rebind else None)
        load = value.loader

        def loader(idx: Sequence[sympy.Expr], ops: Any) -> Any:
            return ops.to_dtype(load(idx, ops), dtype)

        self._add(ComputedBuffer(self._new_name("buf"), buffer.sizes, dtype, Pointwise(loader),
                                 origins=[node.name], layout_strides=buffer.stride, into=buffer.name))
        written = buffer.value()
        if rebind:
            self.env[source] = written  # the input now holds its elements
        return written

    def _extern(self, node: Node, args: Any, kwargs: Any) -> Any:
        # a convolution (or pooling) run channels-last (``_layout``)
        spec = channels_last_call(node, self.policy, lambda arg: self._channels_last(self.env.get(arg)))

        def in_memory(k: int, arg: Any) -> Any:
            if spec is not None and k in spec.inputs and isinstance(arg, TensorValue) and arg.ndim == 4:
                return self.realize_ordered(arg, CHANNELS_LAST)
            return _map_values(arg, self.realize)

        realized = tuple(in_memory(k, a) for k, a in enumerate(args)), _map_values(kwargs, self.realize)
        if spec is None and returns_alias(node.target, unknown=True):
            found: list[TensorValue] = []
            _map_values(realized, found.append)
            if any(v.view[0] in self.moved for v in found):
                raise LayoutConflict(f"{node.target} may return a view of a buffer laid out channels-last")
        for name in _written_buffers(node.target, *realized):
            self._before_write(name, node)
        node.meta["inductor_args"] = realized
        val = node.meta.get("val")
        if val is None and node.users:
            raise ValueError(f"{node.format_node()}: an ATen call without a traced value, read by other nodes")

        def out(v: Any, item: int | None) -> Any:
            if not isinstance(v, torch.Tensor):
                return v
            sizes, strides = tuple(sym(s) for s in v.shape), tuple(sym(s) for s in v.stride())
            channels_last = spec is not None and item in spec.outputs and v.ndim == 4
            if channels_last:  # what oneDNN returns for channels-last operands (the wrapper checks)
                strides = ordered_strides(sizes, CHANNELS_LAST)
            buffer = self._add(ExternBuffer(self._new_name("buf"), sizes, v.dtype, device=str(v.device), stride=strides,
                                            storage_offset=sym(v.storage_offset()), node=node, item=item))
            if channels_last and strides != contiguous_strides(sizes):
                self.layouts[buffer.name] = CHANNELS_LAST
                self.moved.add(buffer.name)
            return buffer.value()

        if isinstance(val, (tuple, list)):
            return tuple(out(v, i) for i, v in enumerate(val))
        return out(val, None)

    def _before_write(self, name: str, writer: Node, keep: Node | None = None) -> None:
        """Values not computed yet that read buffer ``name``, which ``writer`` (``copy_`` into a
        graph input, ``index_put_``, ...) is about to write, and that a node not lowered yet
        still reads: they are computed now, into buffers of their own, so they see the buffer
        as it was (views included); when the buffer is a graph input, so are values whose
        indices a kernel checks (an index out of range raises before the write, as in eager).
        ``keep``: a node the caller takes care of."""
        for node, value in list(self.env.items()):
            if node is writer or node is keep or node.op == "placeholder":  # an input is what is written
                continue
            if all(user in self.env or user is writer for user in node.users):
                continue  # nothing reads it any more
            if isinstance(value, tuple):
                self.env[node] = tuple(self._snapshot(v, name) for v in value)
            else:
                self.env[node] = self._snapshot(value, name)

    def _snapshot(self, value: Any, name: str) -> Any:
        if not isinstance(value, TensorValue) or (value.view is not None and value.view[0] != name):
            return value
        ops = ReadsOps()
        value.loader(list(loop_vars("x", value.ndim)), ops)
        # a value that reads through loaded indices is computed before a graph input is
        # written too: its index checks come first in the program, and eager raises before
        # writing anything the caller can see
        checked = isinstance(self.by_name.get(name), InputBuffer) and any(has_indirect(r.index) for r in ops.reads)
        if not checked and not any(read.name == name for read in ops.reads):
            return value
        known = self.realized.get(id(value))
        if known is not None and known[0] is value:
            return known[1]  # already in memory, computed before this write
        buffer = self._add(ComputedBuffer(self._new_name("buf"), value.sizes, value.dtype, Pointwise(value.loader),
                                          origins=[f"{self.current.name} (before a write of {name})"]), value)
        return buffer.value()

    def _maybe_realize(self, value: Any, readers: int, node: Node) -> Any:
        if isinstance(value, tuple):
            return tuple(self._maybe_realize(v, readers, node) for v in value)
        if not isinstance(value, TensorValue) or value.view is not None:
            return value
        if value.ops_count > self.policy.realize_ops:
            return self._realize_free(value)
        if readers > 1 and value.ops_count > self.policy.inline_max_ops and not self._stored_first(node):
            return self._realize_free(value)
        if readers > 1 and any(_is_reduction(u) for u in node.users):
            return self._realize_free(value)
        return value

    def _device_of(self, value: TensorValue) -> str:
        """The device of ``value``'s elements: the graph's when it has one, else that of a
        buffer it reads (the current node's when it reads none)."""
        if len(self.devices) <= 1:
            return next(iter(self.devices), "cpu")
        if value.view is not None:
            return self.by_name[value.view[0]].device
        ops = ReadsOps()
        value.loader(list(loop_vars("x", value.ndim)), ops)
        return next((self.by_name[r.name].device for r in ops.reads if r.name in self.by_name), self.device)

    def _stored_first(self, node: Node) -> bool:
        """Whether the first node to read ``node`` copies it into a graph input: then its later
        readers read the input (``_input_write``), and computing it into a buffer of its own
        first would be one more pass over memory."""
        first = min(node.users, key=self.position.__getitem__, default=None)
        return first is not None and is_input_copy(first) and first not in self.overwritten \
            and len(first.args) > 1 and first.args[1] is node and first.args[0] not in self.shared_inputs


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of a traced value (a tensor, or a tuple or list holding some)."""
    items = value if isinstance(value, (tuple, list)) else [value]
    return [v for v in items if isinstance(v, torch.Tensor)]


@functools.cache
def _has_triton() -> bool:
    """Whether triton is importable (kernels for CUDA tensors); else they are ATen calls."""
    return importlib.util.find_spec("triton") is not None


def _refuse_unsupported(node: Node) -> None:
    schema = getattr(node.target, "_schema", None)
    if schema is not None and schema.is_mutable and schema.returns and schema.returns[0].alias_info is not None \
            and schema.name.split("::")[-1].rstrip("_") in _INPLACE_VIEWS:
        # aotgrad records it with the tensor's final metadata on nodes before it too
        raise InductorUnsupported(f"{node.target} changes a tensor's sizes or strides in place")
    val = node.meta.get("val")
    for v in val if isinstance(val, (tuple, list)) else [val]:
        exprs = [sym(s) for s in (*v.shape, *v.stride())] if isinstance(v, torch.Tensor) else \
            [sym(v)] if isinstance(v, torch.SymInt) else []
        if isinstance(v, (torch.SymFloat, torch.SymBool)) or any(
                str(f).startswith("u") for e in exprs for f in getattr(e, "free_symbols", ())):
            raise InductorUnsupported(f"{node.target} gives a data-dependent value or size")


def _changes_metadata(node: Node) -> bool:
    """Whether ``node`` is a view op of the kind aotgrad records for an in-place view op."""
    schema = getattr(node.target, "_schema", None)
    return schema is not None and schema.name.split("::")[-1].rstrip("_") in _INPLACE_VIEWS


_INPLACE_VIEWS = frozenset({"unsqueeze", "squeeze", "transpose", "t", "as_strided", "swapdims", "swapaxes",
                            "resize", "resize_as"})


def _size_scalar(node: Node, args: Any, kwargs: dict) -> SizeScalar | None:
    """A Python operation on numbers whose result is not a size: a float or bool of sizes
    and numbers (``s1 / 3``), or of numbers known only at run time, that the wrapper computes
    (``SizeScalar``); None for anything else (sizes are ``_size_arithmetic``'s). A size
    symbol no input has (data-dependent, ``u0``) is refused as for any node."""
    target = node.target
    name = "sym_float" if target is torch.sym_float else getattr(target, "__name__", None)
    if kwargs or name not in SCALAR_OPS or (target is not torch.sym_float and getattr(operator, name, None)
                                             is not target):
        return None
    if isinstance(node.meta.get("val"), (torch.SymInt, int)) or not all(
            isinstance(a, (int, float, sympy.Basic, torch.SymInt, RuntimeScalar, SizeScalar)) for a in args):
        return None
    if _size_arithmetic(node, args, kwargs) is not None:
        return None  # (a size, or a number the trace knows)
    exprs = [sym(a) if isinstance(a, torch.SymInt) else a for a in args]
    if any(str(f).startswith("u") for e in exprs if isinstance(e, sympy.Basic) for f in e.free_symbols):
        return None
    return SizeScalar(name, tuple(exprs))


def _runtime_scalars(args: Any, kwargs: dict) -> bool:
    """Whether any argument is a ``RuntimeScalar`` or ``SizeScalar`` (then the node is an
    ATen call)."""
    stack: list[Any] = [args, kwargs]
    while stack:
        value = stack.pop()
        if isinstance(value, (RuntimeScalar, SizeScalar)):
            return True
        if isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
    return False


def _kernel_operands(args: Any, kwargs: dict) -> bool:
    """Whether every tensor operand has a dtype the kernels compute in (not complex, not a
    half type yet)."""
    found: list[TensorValue] = []
    _map_values((args, kwargs), found.append)
    return all(v.dtype in KERNEL_DTYPES for v in found)


_SIZE_OPS: dict[Any, Callable[..., Any]] = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul, operator.neg: operator.neg,
    operator.floordiv: lambda a, b: FloorDiv(a, b), operator.mod: lambda a, b: Mod(a, b),
    operator.pow: lambda a, b: a**b if b.is_Integer and b >= 0 else None,
    torch.sym_max: lambda a, b: sympy.Max(a, b), torch.sym_min: lambda a, b: sympy.Min(a, b),
}


def _size_arithmetic(node: Node, args: Any, kwargs: dict) -> Any:
    """A Python operation on sizes (``1 + s0``, ``s0 // 2``): its value as an expression over
    the size symbols (the traced SymInt's, else computed here), or None where it is not one."""
    if kwargs or any(isinstance(a, (TensorValue, tuple, list)) for a in args):
        return None
    val = node.meta.get("val")
    if isinstance(val, torch.SymInt):
        return sym(val)
    if isinstance(val, (int, float)) and not isinstance(val, bool):
        return val
    rule = _SIZE_OPS.get(node.target)
    if rule is None or not all(isinstance(a, (int, sympy.Basic, torch.SymInt)) for a in args):
        return None
    result = rule(*(sym(a) if not isinstance(a, sympy.Basic) else a for a in args))
    return result if result is not None else None


def _written_buffers(target: Any, args: Any, kwargs: dict) -> list[str]:
    """The buffers an ATen call writes: its arguments the schema marks as written."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.is_mutable:
        return []
    names = []
    for k, arg in enumerate(schema.arguments):
        info = arg.alias_info
        if info is None or not info.is_write:
            continue
        value = args[k] if k < len(args) else kwargs.get(arg.name)
        if isinstance(value, TensorValue) and value.view is not None:
            names.append(value.view[0])
    return names


def _positional(target: Any, args: Any, kwargs: dict) -> tuple[list[Any], dict]:
    """The arguments a rule takes: positional arguments given by name moved into place
    (functionalization may record ``self=``), keyword-only ones left as keywords."""
    schema = getattr(target, "_schema", None)
    if schema is None or not kwargs:
        return [*args], kwargs
    args, kwargs = [*args], dict(kwargs)
    for arg in schema.arguments[len(args):]:
        if arg.kwarg_only or arg.name not in kwargs:
            break
        args.append(kwargs.pop(arg.name))
    return args, kwargs


def _is_reduction(node: Node) -> bool:
    target = node.target
    name = getattr(getattr(target, "overloadpacket", None), "__name__", "")
    return name in {"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "var", "var_mean",
                    "_softmax", "_log_softmax", "native_layer_norm", "logsumexp", "any", "all"}


def _map(value: Any, env: dict[Node, Any]) -> Any:
    if isinstance(value, Node):
        return env[value]
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, env) for v in value)
    if isinstance(value, dict):
        return {k: _map(v, env) for k, v in value.items()}
    return value


def _map_values(value: Any, fn: Callable[[TensorValue], Any]) -> Any:
    if isinstance(value, TensorValue):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_values(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map_values(v, fn) for k, v in value.items()}
    return value


def lower_graph(gm: GraphModule, policy: FusionPolicy | None = None,
                matmul_choice: Callable[[Matmul, tuple[sympy.Expr, ...], torch.dtype, str, bool], bool] | None = None
                ) -> LoweredGraph:
    """The loop-level IR of an ATen graph (see the module docstring); lowered again without
    layout optimization where it would change what the graph reads (``_layout``).
    ``matmul_choice(body, sizes, dtype, device, epilogue)``: under ``policy.matmul_templates == "auto"``,
    whether a matrix product becomes a template kernel (``_lower_matmul``)."""
    policy = policy or FusionPolicy()
    try:
        return _Lowering(gm, policy, matmul_choice).run()
    except LayoutConflict as why:
        if not policy.layout_optimization:
            raise
        _log.info("kiln.inductor: the graph keeps eager's layout: %s", why)
        return _Lowering(gm, dataclasses.replace(policy, layout_optimization=False), matmul_choice).run()


def _storage_size(val: torch.Tensor) -> sympy.Expr | None:
    """The number of elements of ``val``'s storage (what max_autotune's scratch copy of an
    input allocates: a kernel may read anywhere in it), or None where it is not known."""
    try:
        return sym(val.untyped_storage().nbytes() // val.element_size())
    except Exception:  # a storage without a size (an exotic tensor subclass): unknown
        return None
