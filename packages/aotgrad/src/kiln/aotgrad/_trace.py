"""Tracing a torch-level graph to a functional ATen graph, forward and (optionally) backward.

``trace(gm, fake_inputs, ...)`` runs the GraphModule's own code on fake tensors under
``_Recorder``, a ``__torch_dispatch__`` mode above kiln's FakeTensorMode: every ATen op the
program reaches (after autograd, composite ops already decomposed by torch) becomes a node
of a new kiln.fxgraph Graph whose target is the overload (``aten.mm.default``). With
``backward=True`` it then calls ``torch.autograd.grad`` of the differentiable outputs with
tangents as extra placeholders, so the backward's ops land in the same (joint) graph.

Functionalization happens while recording (see ``_functional.py`` for the op variants):
an op that writes one of its arguments is recorded as its functional variant, and the
value it wrote becomes the tensor's current node. Writes through a view reach its base as
``as_strided_scatter`` on the storage's base value; every other tensor of that storage is
regenerated from the base (``as_strided``) the next time it is used. So the graph holds no
in-place op and no aliasing that matters: the only effects left are the final values of
the graph inputs that were written, returned as ``TraceResult.mutated``.

Invariants:
- Node order is execution order; every node's ``meta["val"]`` is its fake value and
  ``meta["phase"]`` is ``"forward"`` or ``"backward"``.
- Placeholders: the graph inputs in order (``primals``), then the tangents (``tangents``).
- A symbolic size an op needs is computed in the graph from the inputs (``sym_size`` of the
  input dim it came from, then Python arithmetic), so the graph serves every size the
  frame's guards admit.
- Anything the recorder cannot express (a write to a tensor whose base is not dense, an
  op that resizes or re-views a graph input in place, a size with no source) raises
  ``AotUnsupported`` naming it; nothing is silently dropped.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kiln.fxgraph import Graph, GraphModule, Interpreter, Node
from kiln.symshapes.bridge import FakeTensor, FakeTensorMode, reshape_plan

from ._functional import AotUnsupported, functional_variant

__all__ = ["TraceResult", "trace"]

_aten = torch.ops.aten


@dataclass
class TraceResult:
    """The joint (or forward-only) graph and what the runtime needs to know about it."""

    graph: Graph
    num_inputs: int
    outputs: list[Any]  # per graph output: its Node, or a constant
    output_fakes: list[Any]
    # graph inputs written by the program: (input index, Node of the final value); the graph
    # writes each with ``copy_`` where the program wrote it
    mutated: list[tuple[int, Node]]
    # per output: the input index whose storage it shares (a view of that input), or None
    output_aliases: list[int | None]
    # backward only: the inputs that get gradients, the outputs that take tangents, the
    # gradient Nodes (None where an input gets no gradient), the tangent placeholders
    grad_inputs: list[int] = field(default_factory=list)
    diff_outputs: list[int] = field(default_factory=list)
    grads: list[Node | None] = field(default_factory=list)
    tangents: list[Node] = field(default_factory=list)


@dataclass
class _Storage:
    base: FakeTensor  # the first tensor seen on this storage
    node: Node  # the current value of ``base``
    version: int = 0
    input_node: Node | None = None  # the placeholder, for a graph input's storage


class _Recorder(TorchDispatchMode):
    """Records each ATen op as a functional node (see the module docstring)."""

    def __init__(self, graph: Graph, shape_env: Any, decompositions: dict | None = None) -> None:
        super().__init__()
        self.graph = graph
        self.decompositions = decompositions or {}
        self.shape_env = shape_env
        self.phase = "forward"
        self._nodes: dict[int, tuple[Node, int]] = {}  # id(fake) -> (node, storage version)
        self._storages: dict[int, _Storage] = {}  # id(FakeStorage) -> state
        self._alive: list[Any] = []  # keeps every mapped fake alive, so ids stay unique
        self._symbols: dict[sympy.Symbol, Any] = {}  # symbol -> Node, or (input node, dim)
        self._constants: dict[int, Node] = {}
        self.constant_values: dict[str, torch.Tensor] = {}
        self.input_storages: set[int] = set()  # id of each graph input's FakeStorage

    # -- values ---------------------------------------------------------------------------
    def bind(self, fake: Any, node: Node) -> None:
        """``node`` is the current value of ``fake`` (a new tensor, or a new value of it)."""
        self._alive.append(fake)
        storage = self._storages.get(id(fake.fake_storage))
        if storage is None:
            storage = self._storages[id(fake.fake_storage)] = _Storage(fake, node)
            self._alive.append(fake.fake_storage)
        self._nodes[id(fake)] = (node, storage.version)

    def bind_symbols(self, fake: Any, node: Node, data_dependent: bool = False) -> None:
        """The symbols among ``fake``'s sizes are ``sym_size`` of ``node`` (made when used);
        ``data_dependent``: only those no input has (``u0``: an op's result, ``nonzero``'s
        size). A size of the inputs is read from an input, never from an op's result: one of
        the backward would be read in the forward (the sizes of ``tangents * x``, where the
        shape env renamed ``x``'s sizes to those of a dead input)."""
        if isinstance(fake, torch.Tensor):
            for d, size in enumerate(fake.shape):
                if isinstance(size, torch.SymInt):
                    expr = size.node.expr
                    if isinstance(expr, sympy.Symbol) and expr not in self._symbols \
                            and (not data_dependent or self._data_dependent(expr)):
                        self._symbols[expr] = (node, d)
        elif isinstance(fake, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            expr = fake.node.expr
            if isinstance(expr, sympy.Symbol) and expr not in self._symbols \
                    and (not data_dependent or self._data_dependent(expr)):
                self._symbols[expr] = node

    def _data_dependent(self, sym: sympy.Symbol) -> bool:
        """Whether ``sym`` is a size no input has (an unbacked symbol: ``u0``, ``u1``...)."""
        is_unbacked = getattr(self.shape_env, "is_unbacked", None)
        return is_unbacked(sym) if is_unbacked is not None else sym.name.startswith("u")

    def node_of(self, value: Any) -> Any:
        """The graph value for an argument: a Node for a tensor or symbolic number, the
        value itself otherwise (lists and tuples element by element)."""
        if isinstance(value, torch.Tensor):
            return self._tensor_node(value)
        if isinstance(value, (list, tuple)):
            mapped = [self.node_of(v) for v in value]
            return type(value)(mapped) if isinstance(value, tuple) else mapped
        if isinstance(value, dict):
            return {k: self.node_of(v) for k, v in value.items()}
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return self._expr_node(value.node.expr, type(value))
        return value

    def _tensor_node(self, fake: Any) -> Node:
        entry = self._nodes.get(id(fake))
        if entry is None:
            return self._constant(fake)
        node, version = entry
        storage = self._storages.get(id(fake.fake_storage))
        if storage is not None and version < storage.version:
            # written through another tensor of its storage since: rebuild from the base
            node = storage.node if fake is storage.base else self._view_of_base(storage, fake)
            self._nodes[id(fake)] = (node, storage.version)
        return node

    def _constant(self, value: torch.Tensor) -> Node:
        if isinstance(value, FakeTensor):
            raise AotUnsupported(f"a fake tensor of shape {tuple(value.shape)} that no op of the graph made "
                                 "and no input holds")
        node = self._constants.get(id(value))
        if node is None:
            name = f"tensor_constant{len(self.constant_values)}"
            self.constant_values[name] = value
            with self.graph.inserting_before(self._first_op()):
                node = self._constants[id(value)] = self.graph.get_attr(name)
            self._alive.append(value)
        return node

    def _first_op(self) -> Node | None:
        return next((n for n in self.graph.nodes if n.op != "placeholder"), None)

    def _view_of_base(self, storage: _Storage, fake: Any) -> Node:
        base = storage.base
        offset = fake.storage_offset() - base.storage_offset()
        node = self._call(_aten.as_strided.default,
                          (storage.node, self.node_of(list(fake.shape)), self.node_of(list(fake.stride())),
                           self.node_of(offset)), {}, fake)
        # ``fake`` as it is now, which an earlier node may hold too (the op that wrote it in
        # place): not the record of an in-place view op, whose earlier nodes' sizes would not
        # be their own (kiln.inductor refuses those)
        node.meta["view_of_base"] = True
        return node

    def _expr_node(self, expr: sympy.Basic, kind: type) -> Any:
        """A Node computing ``expr`` from the inputs' sizes (a constant stays a number)."""
        expr = self.shape_env.simplify(expr) if self.shape_env is not None else expr
        if expr.is_Integer:
            return int(expr)
        if expr.is_Float or expr.is_Rational:
            return float(expr)
        if expr is sympy.true or expr is sympy.false:
            return expr is sympy.true
        return _ExprBuilder(self, integer=kind is not torch.SymFloat).build(expr)

    def symbol_node(self, sym: sympy.Symbol) -> Node:
        source = self._symbols.get(sym)
        if source is None:
            source = self._symbols[sym] = self._replaced_by(sym)
        if isinstance(source, Node):
            return source
        tensor_node, dim = source
        with self.graph.inserting_after(tensor_node):
            node = self.graph.call_function(_aten.sym_size.int, (tensor_node, dim))
        node.meta["phase"] = "forward"
        self._symbols[sym] = node
        return node

    def _replaced_by(self, sym: sympy.Symbol) -> Any:
        """The source of an input's size that the shape env replaced with ``sym``: a guard made
        them equal (``x + y``, sizes ``s0`` and ``s2``: ``s2`` is ``s0`` from then on), and the
        ops after it name ``sym``, whose own input may not be in the graph (a dead ``x``)."""
        if self.shape_env is not None:
            for known, source in self._symbols.items():
                if self.shape_env.simplify(known) == sym:
                    return source
        raise AotUnsupported(f"the size {sym} comes from no input of the graph")

    # -- ops ------------------------------------------------------------------------------
    def _call(self, target: Any, args: tuple, kwargs: dict, val: Any) -> Node:
        node = self.graph.call_function(target, args, kwargs)
        node.meta["val"] = val
        node.meta["phase"] = self.phase
        return node

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        decomposition = self.decompositions.get(func)
        if decomposition is not None:
            with self:  # the ops it is made of are recorded (and decomposed) in its place
                out = decomposition(*args, **kwargs)
            if out is not NotImplemented:
                return out
        out = func(*args, **kwargs)
        self.record(func, args, kwargs, out)
        return out

    def record(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        schema = func._schema
        written = [i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
        if not written:
            node = self._call(func, self.node_of(args), self.node_of(kwargs), out)
            self._bind_outputs(node, out)
            return
        variant = functional_variant(func)
        values = _arguments(schema, args, kwargs)
        targets = [values[schema.arguments[i].name] for i in written]
        if not variant.inplace_view:
            _check_no_overlap(func, targets, values)
        if variant.inplace_view:
            # t_, squeeze_, ...: only the tensor's metadata changes; its new value is a view
            fake = targets[0]
            if self._is_input(fake):
                raise AotUnsupported(f"{func} changes the sizes or strides of a graph input in place")
            f_args = {k: v for k, v in values.items() if k in variant.argument_names}
            node = self._call(variant.op, (), self.node_of(f_args), fake)
            self._nodes[id(fake)] = (node, self._storages[id(fake.fake_storage)].version)
            return
        f_kwargs = {k: v for k, v in values.items() if k in variant.argument_names}
        node = self._call(variant.op, (), self.node_of(f_kwargs), None)
        results = [node] if variant.num_returns == 1 else [
            self._getitem(node, i) for i in range(variant.num_returns)]
        vals: list[Any] = [None] * variant.num_returns
        for fake, index in zip(targets, variant.written_results, strict=True):
            vals[index] = fake
        for result, index in zip(_flat_outputs(out), variant.returned_results, strict=False):
            if index is not None and vals[index] is None:
                vals[index] = result
        for r, val in zip(results, vals, strict=True):
            r.meta["val"] = val
        node.meta["val"] = tuple(vals) if variant.num_returns > 1 else vals[0]
        for fake, index in zip(targets, variant.written_results, strict=True):
            self._write(fake, results[index], func)
        for result, index in zip(_flat_outputs(out), variant.returned_results, strict=False):
            if isinstance(result, torch.Tensor) and index is not None and id(result) not in self._nodes:
                self.bind(result, results[index])

    def _getitem(self, node: Node, i: int) -> Node:
        item = self.graph.call_function(operator.getitem, (node, i))
        item.meta["phase"] = self.phase
        return item

    def _write(self, fake: Any, value: Node, func: Any) -> None:
        """``value`` is the new content of ``fake``; its storage's base follows."""
        storage = self._storages.get(id(fake.fake_storage))
        if storage is None:
            raise AotUnsupported(f"{func} writes a tensor that no op of the graph made and no input holds")
        if fake is not storage.base and not _covers_same_memory(fake, storage.base):
            base = storage.base
            if not _dense(base, self.shape_env):
                raise AotUnsupported(f"{func} writes through a view of a tensor that is not dense "
                                     f"(sizes {tuple(base.shape)}, strides {tuple(base.stride())})")
            current = self._tensor_node(base)
            offset = fake.storage_offset() - base.storage_offset()
            value = self._call(_aten.as_strided_scatter.default,
                               (current, value, self.node_of(list(fake.shape)), self.node_of(list(fake.stride())),
                                self.node_of(offset)), {}, base)
        storage.node = value
        storage.version += 1
        if storage.input_node is not None:
            # A graph input: written at this point, as in eager, so that an op raising later
            # leaves it as eager would (the graph's own values stay functional).
            self._call(_aten.copy_.default, (storage.input_node, value), {}, storage.base)
        if fake is not storage.base:
            self._nodes[id(fake)] = (self._view_of_base(storage, fake), storage.version)
        self._nodes[id(storage.base)] = (value, storage.version)

    def _is_input(self, fake: Any) -> bool:
        return id(fake.fake_storage) in self.input_storages

    def _bind_outputs(self, node: Node, out: Any) -> None:
        if isinstance(out, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            self.bind_symbols(out, node, True)  # a data-dependent number (``.item()``) is this node
        if isinstance(out, torch.Tensor):
            self.bind(out, node)
            self.bind_symbols(out, node, True)  # data-dependent sizes (``nonzero``) are read from it
        elif isinstance(out, (tuple, list)):
            for i, item in enumerate(out):
                if isinstance(item, torch.Tensor):
                    value = self._getitem_val(node, i, item)
                    self.bind(item, value)
                    self.bind_symbols(item, value, True)
                elif isinstance(item, (list, tuple)):
                    inner = self._getitem_val(node, i, item)
                    for j, t in enumerate(item):
                        if isinstance(t, torch.Tensor):
                            self.bind(t, self._getitem_val(inner, j, t))

    def _getitem_val(self, node: Node, i: int, val: Any) -> Node:
        item = self._getitem(node, i)
        item.meta["val"] = val
        return item

    # -- the end ----------------------------------------------------------------------------
    def input_writes(self, inputs: list[Any]) -> list[tuple[int, Node]]:
        """The inputs whose storage was written, with the final value of each."""
        writes = []
        for i, fake in enumerate(inputs):
            if not isinstance(fake, torch.Tensor):
                continue
            storage = self._storages.get(id(fake.fake_storage))
            if storage is not None and storage.version > 0:
                if fake is not storage.base:
                    raise AotUnsupported(f"input {i} shares its storage with an earlier input and is written")
                writes.append((i, storage.node))
        return writes


class _Runner(Interpreter):
    """Runs the torch-level graph on the fakes. A ``reshape`` that is a view (or a copy) for
    every size runs as that view (copy), as kiln.symexec traced it (torch's reshape kernel
    would ask about each size being 1, guards the frame does not have)."""

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Any:
        if target == "reshape":
            view = _reshape_as_view(args, kwargs)
            if view is not None:
                return view
        return super().call_method(target, args, kwargs)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        if target is torch.reshape or target is torch.Tensor.reshape:
            view = _reshape_as_view(args, kwargs)
            if view is not None:
                return view
        return super().call_function(target, args, kwargs)


def _reshape_as_view(args: tuple, kwargs: dict) -> Any:
    if kwargs or len(args) < 2 or not isinstance(args[0], FakeTensor):
        return None
    sizes = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list)) else args[1:]
    if not all(isinstance(v, (int, torch.SymInt)) for v in sizes):
        return None
    plan = reshape_plan(args[0], sizes)
    if plan == "view":
        return args[0].view(sizes)
    if plan == "copy":  # what torch's reshape does when there is no view
        return torch.ops.aten._unsafe_view(args[0].clone(memory_format=torch.contiguous_format), sizes)
    return None


class _ExprBuilder:
    """Nodes computing a sympy expression over size symbols (Python int semantics)."""

    _FOLD = {sympy.Add: operator.add, sympy.Mul: operator.mul}

    def __init__(self, recorder: _Recorder, *, integer: bool = True) -> None:
        self.recorder = recorder
        self.integer = integer  # a size (exact division where there is a denominator)

    def build(self, expr: sympy.Basic) -> Any:
        if expr.is_Integer:
            return int(expr)
        if expr.is_Float and not self.integer:  # a float's constant (``2.0 / (s0 - 1)``: a variance's gradient)
            return float(expr)
        if isinstance(expr, sympy.Symbol):
            return self.recorder.symbol_node(expr)
        numerator, denominator = sympy.fraction(sympy.together(expr))
        if denominator != 1:
            # an integer the ShapeEnv knows to be one (a size divided by a divisor of it):
            # exact floor division; a float: true division
            op = operator.floordiv if self.integer else operator.truediv
            return self._op(op, self.build(numerator), self.build(denominator))
        name = type(expr).__name__
        args = [self.build(a) for a in expr.args]
        if type(expr) in self._FOLD:
            result = args[0]
            for a in args[1:]:
                result = self._op(self._FOLD[type(expr)], result, a)
            return result
        if name == "FloorDiv":
            return self._op(operator.floordiv, *args)
        if name in ("Mod", "PythonMod"):
            return self._op(operator.mod, *args)
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
            return self._op(operator.pow, args[0], int(expr.exp))
        if name in ("Max", "Min"):
            fn = torch.sym_max if name == "Max" else torch.sym_min
            result = args[0]
            for a in args[1:]:
                result = self._op(fn, result, a)
            return result
        raise AotUnsupported(f"a size expression kiln cannot compute in the graph: {expr}")

    def _op(self, fn: Any, *args: Any) -> Any:
        if all(isinstance(a, int) for a in args):
            return fn(*args)
        node = self.recorder.graph.call_function(fn, tuple(args))
        node.meta["phase"] = self.recorder.phase
        return node


def _check_no_overlap(func: Any, targets: list[Any], values: dict[str, Any]) -> None:
    """Eager raises when a write reaches one memory location twice (an expanded target) or
    reads, through another argument, memory it writes partly; the functional variant would
    not. Such writes are refused (decided on expressions: any doubt refuses)."""
    tensors = [v for v in _flat(list(values.values())) if isinstance(v, torch.Tensor)]
    for target in targets:
        if not isinstance(target, torch.Tensor):
            continue
        if any(sympy.expand(_expr(st)) == 0 and not (type(sz) is int and sz == 1)
               for sz, st in zip(target.shape, target.stride(), strict=True)):
            raise AotUnsupported(f"{func} writes a tensor whose elements share memory (an expanded tensor)")
        for other in tensors:
            if other is not target and getattr(other, "fake_storage", None) is target.fake_storage \
                    and not _covers_same_memory(other, target):
                raise AotUnsupported(f"{func} reads, through another argument, memory that it writes")


def _flat(values: list[Any]) -> list[Any]:
    out = []
    for v in values:
        out.extend(_flat(list(v)) if isinstance(v, (list, tuple)) else [v])
    return out


def _arguments(schema: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Each argument of the call by name: those given, and the schema's default of the others
    (torch's C++ leaves a defaulted ``p`` out of ``bernoulli_(x, 0.5)``'s call; the functional
    variant, called by name, needs it)."""
    values = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(args):
            values[arg.name] = args[i]
        elif arg.name in kwargs:
            values[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            values[arg.name] = arg.default_value
    return values


def _flat_outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _expr(value: Any) -> sympy.Basic:
    return value.node.expr if isinstance(value, torch.SymInt) else sympy.Integer(value)


def _dense(t: Any, env: Any) -> bool:
    """Whether ``t``'s elements fill its memory exactly: in some order its dims have strides
    1, size, size * size, ... as expressions (true for every size; no guard). Then
    ``as_strided_scatter`` on its value reaches every view of it."""
    dims = [d for d, s in enumerate(t.shape) if not (type(s) is int and s == 1)]
    strides = [_expr(s) for s in t.stride()]
    expected: sympy.Basic = sympy.Integer(1)
    while dims:
        matches = [d for d in dims if _equal(strides[d], expected, env)]
        if len(matches) != 1:
            return False
        dims.remove(matches[0])
        expected = expected * _expr(t.shape[matches[0]])
    return True


def _equal(a: sympy.Basic, b: sympy.Basic, env: Any) -> bool:
    """Equal as expressions, with what the ShapeEnv knows (``Max(1, s0)`` is ``s0``)."""
    difference = sympy.expand(a - b)
    return difference == 0 or (env is not None and env.simplify(difference) == 0)


def _covers_same_memory(a: Any, b: Any) -> bool:
    """Same sizes, strides and offset, as expressions (no guard)."""
    if a.dim() != b.dim():
        return False
    pairs = [*zip(a.shape, b.shape, strict=True), *zip(a.stride(), b.stride(), strict=True),
             (a.storage_offset(), b.storage_offset())]
    return all(sympy.expand(_expr(x) - _expr(y)) == 0 for x, y in pairs)


def trace(gm: GraphModule, fake_inputs: list[Any], *, backward: bool,
          decompositions: dict | None = None) -> tuple[TraceResult, dict[str, Any]]:
    """The functional ATen graph of ``gm`` on ``fake_inputs`` (kiln fakes of one mode, or
    numbers): forward only, or joint forward and backward; ops in ``decompositions``
    (``_decompositions``) recorded as the ops their function calls. Returns the result and
    the constant tensors its ``get_attr`` nodes name."""
    mode = next((f.fake_mode for f in fake_inputs if isinstance(f, FakeTensor)), None)
    if mode is None:
        mode = FakeTensorMode()
    graph = Graph()
    recorder = _Recorder(graph, mode.shape_env, decompositions)
    primals = []
    for i, fake in enumerate(fake_inputs):
        node = graph.placeholder(f"primals_{i + 1}")
        node.meta["val"] = fake
        node.meta["phase"] = "forward"
        primals.append(node)
        if isinstance(fake, torch.Tensor):
            recorder.bind(fake, node)
            recorder.input_storages.add(id(fake.fake_storage))
            storage = recorder._storages[id(fake.fake_storage)]
            if storage.base is fake:
                storage.input_node = node
        recorder.bind_symbols(fake, node)
    inputs_storage = {id(f.fake_storage): i for i, f in enumerate(fake_inputs) if isinstance(f, torch.Tensor)}
    # the graph's own set_grad_enabled calls run for real while it runs on the fakes
    with torch.set_grad_enabled(torch.is_grad_enabled()), mode, recorder:
        outs = _Runner(gm).run(*fake_inputs)
        if not isinstance(outs, (tuple, list)):
            raise AotUnsupported(f"the graph returns a {type(outs).__name__}, not a tuple")
        for o in outs:
            if isinstance(o, torch.Tensor) and o.requires_grad and o.grad_fn is None \
                    and not any(o is f for f in fake_inputs):
                raise AotUnsupported("an output is a tensor the graph made that requires grad (a leaf)")
        if not backward and any(isinstance(o, torch.Tensor) and o.requires_grad for o in outs):
            raise AotUnsupported("an output requires grad, but no backward is traced (no input requires "
                                 "grad, or grad mode was off when the graph was compiled)")
        outputs = [recorder.node_of(o) for o in outs]
        aliases = [inputs_storage.get(id(o.fake_storage)) if isinstance(o, FakeTensor) else None for o in outs]
        mutated = recorder.input_writes(list(fake_inputs))
        result = TraceResult(graph, len(fake_inputs), outputs, list(outs), mutated, aliases)
        if backward:
            _trace_backward(recorder, result, fake_inputs, mode)
    graph.output((*result.outputs, *result.grads))
    return result, recorder.constant_values


def _trace_backward(recorder: _Recorder, result: TraceResult, fake_inputs: list[Any], mode: Any) -> None:
    """Gradients of the differentiable outputs with respect to the inputs that require grad,
    with a contiguous tangent placeholder per differentiable output."""
    graph = recorder.graph
    result.grad_inputs = [i for i, f in enumerate(fake_inputs) if isinstance(f, torch.Tensor) and f.requires_grad]
    result.diff_outputs = [i for i, o in enumerate(result.output_fakes)
                           if isinstance(o, torch.Tensor) and o.requires_grad and result.output_aliases[i] is None]
    if not result.grad_inputs or not result.diff_outputs:
        result.grads = [None] * len(result.grad_inputs)
        return
    tangents = []
    first_op = recorder._first_op()
    for k, i in enumerate(result.diff_outputs):
        out = result.output_fakes[i]
        fake = FakeTensor.of_metadata(mode, list(out.shape), _contiguous(out.shape), 0, out.dtype, out.device)
        with graph.inserting_before(first_op):
            node = graph.placeholder(f"tangents_{k + 1}")
        node.meta["val"] = fake
        node.meta["phase"] = "backward"
        recorder.bind(fake, node)
        tangents.append((node, fake))
    result.tangents = [n for n, _ in tangents]
    recorder.phase = "backward"
    try:
        grads = torch.autograd.grad([result.output_fakes[i] for i in result.diff_outputs],
                                    [fake_inputs[i] for i in result.grad_inputs],
                                    grad_outputs=[f for _, f in tangents], allow_unused=True)
    except AotUnsupported:
        raise
    except RuntimeError as e:
        # e.g. a saved tensor written in place since: eager raises this at backward() time
        raise AotUnsupported(f"the backward fails on the traced values: {e}") from e
    result.grads = [None if g is None else recorder.node_of(g) for g in grads]


def _contiguous(shape: Any) -> list[Any]:
    strides, product = [], 1
    for size in reversed(list(shape)):
        strides.append(product)
        product = product * size
    return strides[::-1]
