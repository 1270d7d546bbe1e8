"""OutputGraph: what one trace produces — the graph, its inputs, and the guards.

The translator asks the OutputGraph to lift frame values into graph inputs (one placeholder
per source, with the real value kept as the example input) and to record torch operations
as nodes. Each operation also runs on fake tensors, so every tensor node carries its fake
value (``node.meta["val"]``) and the trace knows shapes and dtypes without computing
anything. Guards accumulate in ``guards``; the builder adds them as it reads the frame.

Invariants about tensor identity and mutation:

- one tracker per tensor object: a tensor reached through two sources, and an op that gives
  back one of its arguments (``x.add_(1)``, ``out=``, ``inplace=True``), yield the tracker
  already made for that fake tensor, so ``is``, sets and returned values see one object;
- an op that changes a tensor argument in place (its fake's version counter moved, or a
  torch in-place name) is marked ``MUTATES`` and never removed as dead code;
- an in-place change of memory that two distinct inputs share is refused (Unsupported), and
  a graph that changes an input guards that the arguments share no storage.
"""

from __future__ import annotations

import contextlib
import logging
import re
import types
from collections.abc import Iterator
from typing import Any

from kiln.fxgraph import Graph, Node, is_impure, map_aggregate, register_impure_rule
from kiln.guards import (
    GuardSet,
    NoAliasing,
    NoStorageSharing,
    ObjectAliasing,
    Source,
    TensorMatch,
    TensorSizeSource,
    TorchGlobalState,
    is_module_tensor,
)
from kiln.symshapes import ShapeEnv, ShapeEnvConfig
from kiln.symshapes.bridge import FakeTensor, FakeTensorMode, UnsupportedOpError, reshape_plan

from ._assumptions import Assumptions
from ._autocast_state import AUTOCAST_DEVICES
from ._caches import SymexecCaches
from ._handlers import errors_caught
from ._marks import ConstraintViolation, marks_of
from ._run_time_errors import may_raise
from ._torch_internals import version_counter
from ._unsupported import Unsupported
from .variables._base import VariableTracker
from .variables._constant import ConstantVariable
from .variables._containers import DictVariable, ListVariable, RangeVariable, TupleVariable
from .variables._symnumber import SymNumberVariable, SymSliceVariable, keeps_numbers_symbolic
from .variables._tensor import TensorVariable

__all__ = ["MUTATES", "OutputGraph"]

# node.meta key: the node changes one of its tensor arguments in place (seen on the fakes)
MUTATES = "mutates_arguments"


@register_impure_rule
def _changes_arguments(node: Node) -> bool:
    return bool(node.meta.get(MUTATES))

_ROOT = re.compile(r"^([LG])\['([A-Za-z_][A-Za-z0-9_]*)'\]")


_dynamic_log = logging.getLogger("kiln.dynamic")  # KILN_LOGS=dynamic (kiln._logs)
_MODULE_SLOT = re.compile(r"\._(?:modules|parameters|buffers)\[")


def _input_name(source: Source) -> str:
    # L['self']._modules['fc']._parameters['weight'] -> self_fc_weight
    text = _MODULE_SLOT.sub("[", str(source))
    m = _ROOT.match(text)
    if m is not None:
        prefix = "" if m.group(1) == "L" else "G_"
        text = prefix + m.group(2) + text[m.end():]
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_") or "input"
    return "_" + name if name[0].isdigit() else name


class OutputGraph:
    """The graph under construction; see the module docstring."""

    def __init__(self, f_globals: dict[str, Any], dynamic_numbers: frozenset[Source] = frozenset(),
                 dynamic_shapes: bool = False, dynamic_dims: Any = None, scalar_outputs: bool = True, *,
                 caches: SymexecCaches) -> None:
        self.graph = Graph()
        self.caches = caches  # shared with other captures (decoded code, fake ops, resume functions)
        # ``.item()``/``.tolist()`` give numbers the graph computes (unbacked symbols); when
        # False they need the tensor's data (a graph break there), see ``capture``
        self.scalar_outputs = scalar_outputs
        self.made_scalar_outputs = False  # some ``.item()`` became a graph op
        # ints and floats read from these sources are graph inputs, not constants
        # (SymNumberVariable)
        self.dynamic_numbers = dynamic_numbers
        # every dimension of a tensor argument is a ShapeEnv symbol bound to its
        # TensorSizeSource (parameters, buffers and tensor subclasses stay static: the shape
        # guards read Tensor.size/stride as ints); see ``shape_guards``
        self.dynamic_shapes = dynamic_shapes
        self.dynamic_dims = dynamic_dims or {}  # source -> dims: symbols for these only
        self.dynamic_inputs: list[tuple[Source, FakeTensor]] = []
        # dimensions the user marked dynamic (kiln.mark_dynamic): specializing one is an error
        self.marked_dynamic: list[tuple[Source, int, FakeTensor]] = []
        # (symbols, user location) of each symbolic size the traced Python needed as a value
        self.specializations: list[tuple[frozenset, Any]] = []
        # No duck sizing: two dimensions that happen to be equal in the traced call (a batch
        # of 5 tokens x 5) are not one symbol; an equality the code relies on is a guard.
        self.shape_env = ShapeEnv(ShapeEnvConfig(duck_shape=False, oblivious_one=True))
        self.fake_mode = FakeTensorMode(self.shape_env, cache=caches.fake_op_cache())
        # the symbols graph nodes compute, for run-time checks of data-dependent assumptions
        self.assumptions = Assumptions()
        self.guards = GuardSet([TorchGlobalState.capture()])
        # every code object the trace ran (the root's and each inlined function's), in order
        self.traced_codes: dict[types.CodeType, None] = {}
        self.f_globals = f_globals
        self._examples: dict[Source, Any] = {}  # input source -> its example value
        self.tensor_inputs: dict[int, TensorVariable] = {}   # id(real tensor) -> tracker
        # id(fake tensor) -> the one tracker of that tensor object: an op that returns one
        # of its arguments (``x.add_(1)``, ``out=``, ``F.relu(x, inplace=True)``,
        # ``x.contiguous()`` of a contiguous x) gives back that argument's tracker, so
        # ``is``, sets and dicts see one object, as in eager
        self.tensors: dict[int, TensorVariable] = {}
        # graph-input trackers some recorded op changed in place (the tensor or a view of it)
        self.mutated_inputs: dict[int, TensorVariable] = {}
        # id(fake storage) -> the distinct tensor inputs over that memory (views of one base)
        self._inputs_by_storage: dict[int, list[TensorVariable]] = {}
        self.trackers: dict[Source, VariableTracker] = {}    # the builder's cache
        # id(real object) -> its tracker, for mutable objects reached through several
        # sources (every layer's ``config``): one tracker, the other paths guarded by identity
        self.objects: dict[int, VariableTracker] = {}
        # Stores to replay on real objects after the graph runs (in the order first made).
        self.attribute_writes: dict[int, tuple[VariableTracker, dict[str, VariableTracker]]] = {}
        self.global_writes: dict[str, VariableTracker] = {}
        # calls made for their output only (print, warnings.warn, a logger's methods), replayed
        # after the graph in trace order: (callee, args, kwargs, ops recorded before the call
        # when a tensor is among the arguments, else None)
        self.replayed_calls: list[tuple[Any, list[VariableTracker], dict[str, VariableTracker], int | None]] = []
        # effect key -> ops recorded before its last write (``effect_position``); an effect
        # made before every op of the graph can be replayed before the graph runs
        self._effect_positions: dict[tuple[Any, ...], int] = {}
        # Context managers entered for real while tracing (autocast, so fakes get its dtypes),
        # innermost last; whatever is still open when tracing ends is exited then.
        self.open_contexts: list[Any] = []
        self._first_op: Node | None = None
        self._ops = 0  # nodes recorded so far; each op node's meta["order"]
        # the innermost Translator running (None outside a walk): ops that may fail at run
        # time are refused where its code could catch the error (``_handlers``)
        self.active: Any = None
        # The grad mode before each grad-mode ``with`` block open now, outermost first
        # (blocks a resume function was called inside of come first). When an op of the
        # graph raises, eager's unwinding leaves the mode of before the outermost block
        # open at that op (or the mode there when none is): ``error_grad_mode``, the same
        # for every op that may raise in one graph; the replacement restores it.
        self.grad_blocks: list[bool] = []
        self._outer_grad_blocks = 0
        self.error_grad_mode: bool | None = None
        self._input_names: set[str] = set()
        import torch

        # Autocast adds thread-local dispatch keys that tensor guards would record; guards
        # are taken as at entry even when a tensor is first read inside an autocast region.
        self._entry_autocast = {d: torch.is_autocast_enabled(d) for d in AUTOCAST_DEVICES}

    def close_contexts(self) -> None:
        """Exit the real context managers a trace that stopped early left open."""
        while self.open_contexts:
            self.open_contexts.pop().__exit__(None, None, None)

    # -- inputs ------------------------------------------------------------------------------

    def add_tensor_input(self, source: Source, real: Any) -> TensorVariable:
        """The placeholder for the real tensor at ``source`` (one per distinct tensor)."""
        known = self.tensor_inputs.get(id(real))
        if known is not None:
            # the same tensor reached two ways (tied weights): one input, and a guard that
            # both ways still lead to one object; the same tracker, so ``x is y`` holds
            if known.source is not None and known.source != source:
                self.guards.add(ObjectAliasing(known.source, source))
            return known
        import torch

        if real.layout != torch.strided:
            # fake tensors model strided memory only (a sparse tensor has no strides or storage)
            raise Unsupported(f"{source} is a {real.layout} tensor; kiln traces strided tensors only")
        node = self._placeholder(source, real)

        dims = set(range(real.dim()) if self.dynamic_shapes else self.dynamic_dims.get(source, ()))
        marks = marks_of(real)
        if marks:  # the user's marks win over the compile's setting
            dims |= {d for d, m in marks.items() if m.kind != "static"}
            dims -= {d for d, m in marks.items() if m.kind == "static"}
        if dims and real.dim() and type(real) is torch.Tensor and not is_module_tensor(source):
            ranges = {d: (m.min, m.max) for d, m in marks.items()
                      if m.kind == "dynamic" and (m.min is not None or m.max is not None)}
            fake = self.fake_mode.from_real(real, name=node.name, dynamic_dims=sorted(dims),
                                            size_source=lambda d: TensorSizeSource(source, d), dim_ranges=ranges)
            self.dynamic_inputs.append((source, fake))
            self.marked_dynamic += [(source, d, fake) for d, m in marks.items() if m.kind == "dynamic"]
            if _dynamic_log.isEnabledFor(logging.INFO):
                for d in sorted(dims):
                    _dynamic_log.info("%s is %s (example %d)", TensorSizeSource(source, d), fake.shape[d],
                                      real.shape[d])
        else:
            fake = self.fake_mode.from_real(real, name=node.name)
        node.meta["val"] = fake
        self.assumptions.note(node, fake)
        tracker = TensorVariable(node, fake, source, type(real))
        self.tensor_inputs[id(real)] = tracker
        self.tensors[id(fake)] = tracker
        if _storage_bytes(real):  # empty storages share nothing (one fake stands for all)
            self._inputs_by_storage.setdefault(id(fake.fake_storage), []).append(tracker)
        return tracker

    def add_number_input(self, source: Source, value: int | float) -> SymNumberVariable:
        """The placeholder for a number the graph takes as an input (a dynamic number)."""
        node = self._placeholder(source, value)
        node.meta["val"] = value
        return SymNumberVariable(node, value, self, source=source)

    def _placeholder(self, source: Source, example: Any) -> Node:
        """A new graph input read from ``source`` (a unique name; placed before every op)."""
        name = _input_name(source)
        base, i = name, 0
        while name in self._input_names:
            i += 1
            name = f"{base}_{i}"
        self._input_names.add(name)
        anchor = self._first_op
        if anchor is None:
            node = self.graph.placeholder(name)
        else:
            with self.graph.inserting_before(anchor):
                node = self.graph.placeholder(name)
        node.meta["source"] = source
        self._examples.setdefault(source, example)
        return node

    def is_input(self, source: Source) -> bool:
        """Whether a graph input is read from ``source``."""
        return source in self._examples

    def example_of(self, source: Source) -> Any:
        """The example value of the graph input read from ``source`` (KeyError if none)."""
        return self._examples[source]

    def metadata_number(self, tensor: TensorVariable, method: str, args: tuple, value: Any) -> SymNumberVariable:
        """A symbolic size, stride or numel of a dynamic tensor or of one whose size depends
        on data (``value``, a torch.SymInt): the graph computes it with ``tensor.method(*args)``."""
        node = self._new_node("call_method", method, (tensor.node, *args))
        node.meta["val"] = value
        self.assumptions.note(node, value)
        return SymNumberVariable(node, value, self, inputs=())

    def compute(self, target: Any, args: tuple) -> Node:
        """A node computing ``target(*args)`` (a method name: ``args[0].target(*args[1:])``)
        from values of other nodes when the graph runs; not run on fakes."""
        return self._new_node("call_method" if isinstance(target, str) else "call_function", target, tuple(args))

    def check_assumptions(self) -> list[Node]:
        """Check nodes for the data-dependent assumptions made since the last call
        (``_assumptions``); they may raise when the graph runs."""
        checks = self.assumptions.check_new(self)
        if checks:
            self._note_may_raise("a run-time check of a data-dependent value")
        return checks

    def number_op(self, fn: Any, args: list[VariableTracker]) -> SymNumberVariable:
        """``fn(*args)`` on numbers, computed by the graph (an argument is a SymNumberVariable,
        the others numbers known at trace time)."""
        node_args, examples, inputs = [], [], []
        for a in args:
            if isinstance(a, SymNumberVariable):
                node_args.append(a.node)
                examples.append(a.example)
                inputs += [i for i in a.inputs if i not in inputs]
            else:
                node_args.append(a.as_constant())
                examples.append(a.as_constant())
        node = self._new_node("call_function", fn, tuple(node_args))
        example = fn(*examples)
        node.meta["val"] = example
        return SymNumberVariable(node, example, self, inputs=tuple(inputs))

    def store_attribute(self, owner: VariableTracker, name: str, value: VariableTracker) -> None:
        """``owner.name = value``: seen by later reads in the trace, replayed after the graph."""
        # a tensor the trace made: replayed on the graph's output (variables._tensor_attributes)
        if owner.source is None and not isinstance(owner, TensorVariable):
            raise Unsupported(f"assigning attribute {name!r} of {owner.describe()}")
        self.attribute_writes.setdefault(id(owner), (owner, {}))[1][name] = value
        self._effect_positions[("attribute", id(owner), name)] = self._ops

    def store_global(self, name: str, value: VariableTracker) -> None:
        """``global name; name = value``: seen by later reads in the trace, replayed after the graph."""
        self.global_writes[name] = value
        self._effect_positions[("global", name)] = self._ops

    def note_mutation(self, container: VariableTracker) -> None:
        """``container`` (a list or dict tracker) was just changed in place."""
        self._effect_positions[("container", id(container))] = self._ops

    def effect_position(self, *key: Any) -> int | None:
        """How many ops the trace had recorded when the effect ``key`` was last made: the
        effect comes before every graph node whose ``meta["order"]`` is greater. Keys:
        ``("container", id(tracker))``, ``("attribute", id(owner), name)``, ``("global", name)``,
        ``("call", index in replayed_calls)``. None when unknown (replay it after the graph)."""
        return self._effect_positions.get(key)

    def replay_call(self, callee: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> None:
        """A call with no effect on the trace (``print``, a warning, a log line) that the
        compiled code makes after the graph. ``callee``: a function, or ``(owner, method)``.
        Its arguments must be values the replacement can rebuild as they were at the call:
        constants, and tensors that nothing changes in place afterwards (checked at the end)."""
        from .variables._containers import TupleVariable

        def leaves(values: list[VariableTracker]) -> list[VariableTracker]:
            return [leaf for v in values
                    for leaf in (leaves(v.items) if isinstance(v, TupleVariable) else [v])]

        found = leaves([*args, *kwargs.values()])
        for v in found:
            if not (v.is_constant() or isinstance(v, TensorVariable)):
                raise Unsupported(f"passing {v.describe()} (it may change before the call is replayed) "
                                  "to a print, warning or log call")
        tensors = any(isinstance(v, TensorVariable) for v in found)
        self._effect_positions[("call", len(self.replayed_calls))] = self._ops
        self.replayed_calls.append((callee, list(args), dict(kwargs), self._ops if tensors else None))

    def written_attribute(self, owner: VariableTracker, name: str) -> VariableTracker | None:
        """The value this trace stored into ``owner.name``, if it did."""
        entry = self.attribute_writes.get(id(owner))
        return None if entry is None else entry[1].get(name)

    @contextlib.contextmanager
    def entry_state(self) -> Iterator[None]:
        """Torch's autocast switches as they were when tracing began, for the duration."""
        import torch

        now = {d: torch.is_autocast_enabled(d) for d in AUTOCAST_DEVICES}
        changed = {d: v for d, v in self._entry_autocast.items() if now[d] != v}
        for d, v in changed.items():
            torch.set_autocast_enabled(d, v)
        try:
            yield
        finally:
            for d in changed:
                torch.set_autocast_enabled(d, now[d])

    def shape_guards(self) -> None:
        """Guards on the symbolic sizes of dynamic inputs (called once, at the end): every
        relation the trace relied on (``ShapeEnv.produce_guards``, over symbols created
        dynamic), and each stride the fakes wrote in size symbols (a dense layout) checked
        against the real stride."""
        if not self.dynamic_inputs:
            return
        import sympy

        self._check_marks()

        from kiln.guards import ShapeRelation, TensorStrideSource
        from kiln.symshapes.bridge import from_torch

        env = self.shape_env
        produced = env.produce_guards()
        for expr in produced.guards:
            if any(env.is_dynamic(sym) for sym in expr.free_symbols):
                try:
                    guard = ShapeRelation(expr, {sym: produced.sources[sym] for sym in expr.free_symbols})
                except (TypeError, ValueError) as e:  # a relation the checker cannot compute
                    raise Unsupported(f"a shape guard kiln cannot check yet: {expr} ({e})") from None
                self.guards.add(guard)
        for source, fake in self.dynamic_inputs:
            for d, stride in enumerate(fake.stride()):
                if type(stride) is int:
                    continue
                expr = env.simplify(from_torch(stride).expr)
                if expr.is_Integer:
                    self.guards.add(ShapeRelation(sympy.Eq(sympy.Symbol("stride"), expr),
                                                  {sympy.Symbol("stride"): TensorStrideSource(source, d)}))
                    continue
                bound = {sym: env.source_of(sym) for sym in expr.free_symbols}
                here = sympy.Symbol(f"stride{d}")
                self.guards.add(ShapeRelation(sympy.Eq(here, expr), {here: TensorStrideSource(source, d), **bound}))

    def note_specialization(self, value: Any) -> None:
        """The traced Python needed the value of symbolic ``value`` here (for error messages)."""
        from kiln.symshapes.bridge import from_torch

        where = self.active.location() if self.active is not None else None
        symbols = frozenset(from_torch(value).expr.free_symbols)
        self.specializations.append((symbols, where))
        if _dynamic_log.isEnabledFor(logging.INFO):
            names = ", ".join(f"{s} = {self.shape_env.source_of(s)}" for s in sorted(symbols, key=str))
            _dynamic_log.info("specialized %s to %s (%s) at %s", from_torch(value).expr, int(value), names, where)

    def _check_marks(self) -> None:
        """A dimension marked dynamic that became one value is the user's error, named."""
        from kiln.symshapes.bridge import from_torch

        env = self.shape_env
        for source, d, fake in self.marked_dynamic:
            size = fake.shape[d]
            expr = env.simplify(from_torch(size).expr) if type(size) is not int else None
            if expr is not None and not expr.is_Number:
                continue
            value = size if expr is None else int(expr)
            symbol = next((s for s in env.symbols if env.source_of(s) == TensorSizeSource(source, d)), None)
            lines = [str(where) for syms, where in self.specializations if symbol in syms and where is not None]
            at = f"; the code needs its value at {lines[0]}" if lines else \
                " (a size of 0 is specialized: empty tensors take other paths)" if value == 0 and expr is None else ""
            raise ConstraintViolation(f"{TensorSizeSource(source, d)} was marked dynamic (kiln.mark_dynamic) "
                                      f"but the compiled code specializes it to {value}{at}")

    def finish_inputs(self) -> None:
        """Guard that distinct tensor inputs stay distinct objects (called once, at the end).

        Parameters and buffers are compared only with the other inputs whose tensor guards
        admit the same tensor (``TensorMatch.admits_same_tensor``): they are fixed parts of
        a module's structure, and checking them all on every call would cost more than the
        rest of the guards, while an argument that is a module's tensor (``f(m.weight)``)
        has its exact metadata. When the graph changes an input in place, no two arguments
        may be views of one memory (``NoStorageSharing``).
        """
        inputs = [t for t in self.tensor_inputs.values() if t.source is not None]
        free = [t.source for t in inputs if not is_module_tensor(t.source)]
        owned = [t.source for t in inputs if is_module_tensor(t.source)]
        matches = {g.source: g for g in self.guards if isinstance(g, TensorMatch)}

        def may_alias(a: Source, b: Source) -> bool:
            ga, gb = matches.get(a), matches.get(b)
            return ga is None or gb is None or ga.admits_same_tensor(gb)

        sources = free + [o for o in owned if any(may_alias(o, f) for f in free)]
        if len(sources) > 1:
            self.guards.add(NoAliasing(tuple(sources)))
        if self.mutated_inputs and len(free) > 1:
            # module tensors are left out here too (a training BatchNorm changes its buffers
            # on every call; checking the storage of each would cost more than the graph)
            self.guards.add(NoStorageSharing(tuple(free)))
        # A frame object the trace changed must not be, at the next call, the same object as
        # another one of its type the trace read separately: the change would show there.
        changed = [t for t in self.objects.values() if getattr(t, "mutated", False)]
        changed += [owner for owner, _ in self.attribute_writes.values() if owner.source is not None]
        # Objects of a user class hash by identity: a set or dict the trace built may have
        # told them apart (``a in {b}``, ``len({a, b})``), which must hold at the next call.
        from .variables._objects import UserDefinedObjectVariable

        changed += [t for t in self.objects.values() if isinstance(t, UserDefinedObjectVariable)]
        for tp in dict.fromkeys(t.python_type() for t in changed):
            same_type = tuple(o.source for o in self.objects.values() if o.python_type() is tp)
            if len(same_type) > 1:
                self.guards.add(NoAliasing(same_type))

    def assume_distinct(self, a: VariableTracker, b: VariableTracker) -> None:
        """The trace answered that ``a`` and ``b`` (different trackers) are different objects
        (``a is b``, ``a in [b]``): when both came from the frame, that is guarded."""
        if a is b or a.source is None or b.source is None or a.source == b.source:
            return
        try:
            if a.python_type() is not b.python_type():
                return  # their type guards already keep them apart
        except Unsupported:
            pass
        self.guards.add(NoAliasing((a.source, b.source)))

    def record_effect(self, fn: Any, args: tuple[Any, ...]) -> Node:
        """A node calling ``fn(*args)`` for its effect on global state (not run on fakes)."""
        return self._new_node("call_function", fn, tuple(args))

    def _new_node(self, op: str, target: Any, args: tuple, kwargs: dict | None = None) -> Node:
        node = self.graph.create_node(op, target, args, kwargs)
        self._ops += 1
        node.meta["order"] = self._ops
        if self._first_op is None:
            self._first_op = node
        return node

    def enter_outer_grad_block(self, previous: bool) -> None:
        """A grad-mode block entered before tracing began (its ``GradModeExit`` is an input)."""
        self.grad_blocks.insert(self._outer_grad_blocks, previous)
        self._outer_grad_blocks += 1

    def _note_error_grad_mode(self, what: str) -> None:
        import torch

        mode = self.grad_blocks[0] if self.grad_blocks else torch.is_grad_enabled()
        if self.error_grad_mode is None:
            self.error_grad_mode = mode
        elif self.error_grad_mode != mode:
            raise Unsupported(f"{what} may fail on run-time values with another grad mode to restore "
                              "on error than an earlier op of the graph")

    def set_grad_enabled(self, enabled: bool) -> None:
        """Switch grad mode here and in the graph (the fake tensors see the new mode)."""
        import torch

        torch.set_grad_enabled(enabled)
        self.record_effect(torch._C._set_grad_enabled, (enabled,))

    # -- operations --------------------------------------------------------------------------

    def call_function(self, fn: Any, args: list[VariableTracker],
                      kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``fn(*args, **kwargs)`` as a node; the result is tracked from its fake value."""
        return self._record("call_function", fn, args, kwargs)

    def call_method(self, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``args[0].name(*args[1:], **kwargs)`` as a node."""
        return self._record("call_method", name, args, kwargs)

    def _record(self, op: str, target: Any, args: list[VariableTracker],
                kwargs: dict[str, VariableTracker]) -> VariableTracker:
        what = target if isinstance(target, str) else getattr(target, "__name__", repr(target))
        numbers = keeps_numbers_symbolic(op, target)
        node_args = tuple(_unwrap(a, _node_of, what, numbers) for a in args)
        node_kwargs = {k: _unwrap(v, _node_of, what, numbers) for k, v in kwargs.items()}
        fake_args = tuple(_unwrap(a, _fake_of, what, numbers) for a in args)
        fake_kwargs = {k: _unwrap(v, _fake_of, what, numbers) for k, v in kwargs.items()}
        fakes = _fakes_in((fake_args, fake_kwargs))
        versions = [version_counter(f) for f in fakes]

        def run() -> Any:
            if [version_counter(f) for f in fakes] != versions:  # a second run would change them twice
                raise Unsupported(f"{what} failed on the traced values after changing a tensor in place")
            as_view = _reshape_as_view(op, target, fake_args, fake_kwargs)
            if as_view is not None:
                return as_view()
            if op == "call_function":
                return target(*fake_args, **fake_kwargs)
            return getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)

        try:
            with self.fake_mode:
                # a composite kernel may check what one of its ops assumed of a size that
                # may be 1: the whole call again, deciding such sizes by their examples
                out = self.fake_mode.run_by_hints_if_contradicted(run)
        except UnsupportedOpError as e:
            raise Unsupported(str(e)) from e
        except Unsupported:
            raise
        except Exception as e:
            raise Unsupported(f"{what} failed on the traced values: {type(e).__name__}: {e}") from e
        changed = [f for f, v in zip(fakes, versions, strict=True) if version_counter(f) != v]
        if not changed and what.endswith("_") and not what.endswith("__") and fake_args:
            # torch's in-place naming: some kernels (the _foreach_*_ family) change their
            # first argument without bumping a fake's version counter
            changed = _fakes_in(fake_args[0])
        if changed:
            self._check_mutation(changed, what)
        node = self._new_node(op, target, node_args, node_kwargs)
        if changed:
            node.meta[MUTATES] = True  # kept by dead-code elimination, whatever its name
        result = self._wrap_result(node, out, what)
        if (_holds_fake(out) or _is_number(out) or is_impure(node)) and may_raise(node, MUTATES):
            self._note_may_raise(what)
        self.check_assumptions()
        return result

    def _note_may_raise(self, what: str) -> None:
        """An op just recorded may raise when the graph runs."""
        if self.active is not None and errors_caught(self.active):
            # the graph would raise outside the user's try: the op must run inside it
            raise Unsupported(f"{what} may fail on run-time values inside a try block (or a with "
                              "block that may suppress errors); it runs outside the graph")
        self._note_error_grad_mode(what)

    def _check_mutation(self, changed: list[FakeTensor], what: str) -> None:
        """Note the graph inputs an in-place op changed (through views too: a view shares its
        base's version counter). Inputs that are distinct tensors over one memory (views of
        one base passed separately) cannot be changed in place in a graph: the backend would
        treat them as independent, so tracing stops there (a graph break, or eager)."""
        sharing = {id(t): t for f in changed for t in self._inputs_by_storage.get(id(f.fake_storage), ())}
        for t in sharing.values():
            over = self._inputs_by_storage[id(t.fake.fake_storage)]
            if len(over) > 1:
                names = ", ".join(o.describe() for o in over)
                raise Unsupported(f"{what} changes in place memory shared by several inputs ({names}): "
                                  "distinct tensors over one storage cannot be changed in place in a graph")
        self.mutated_inputs.update(sharing)

    def _wrap_result(self, node: Node, out: Any, what: str) -> VariableTracker:
        import operator

        if isinstance(out, FakeTensor):
            node.meta["val"] = out
            self.assumptions.note(node, out)
            known = self.tensors.get(id(out))
            if known is not None:
                return known  # the op gave back one of its arguments (in place, out=)
            tracker = self.tensors[id(out)] = TensorVariable(node, out)
            return tracker
        if isinstance(out, (tuple, list)) and any(isinstance(o, FakeTensor) for o in out):
            node.meta["val"] = out
            items = []
            for i, o in enumerate(out):
                item = self._new_node("call_function", operator.getitem, (node, i))
                items.append(self._wrap_result(item, o, what))
            if isinstance(out, list):
                return ListVariable(items)
            return TupleVariable(items, tuple_type=type(out))
        if _is_number(out):
            # a number the graph computes (``t.item()``: a data-dependent symbol)
            node.meta["val"] = out
            self.assumptions.note(node, out)
            return SymNumberVariable(node, out, self, inputs=())
        if not _holds_fake(out):
            # no tensor in the result (a size, a flag, a tuple of ints from a torch helper):
            # a trace-time constant, and the node computing it is not needed
            if not node.users and node.op != "placeholder" and not is_impure(node):
                self.graph.erase_node(node)
                if self._first_op is node:
                    self._first_op = None
            from .variables._wrap import wrap_trace_value

            return wrap_trace_value(out)
        raise Unsupported(f"{what} returned a {type(out).__name__}, which kiln cannot track yet")


def _fakes_in(value: Any) -> list[FakeTensor]:
    """The fake tensors among a call's (nested) arguments, each once."""
    found: dict[int, FakeTensor] = {}
    map_aggregate(value, lambda v: found.setdefault(id(v), v) if isinstance(v, FakeTensor) else None)
    return list(found.values())


def _storage_bytes(real: Any) -> int:
    try:
        return real.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested: no plain storage
        return 0


def _is_number(value: Any) -> bool:
    """A symbolic number (torch.SymInt/SymFloat/SymBool) an op gave."""
    import torch

    return isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))


def _holds_fake(value: Any) -> bool:
    if isinstance(value, FakeTensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(_holds_fake(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_fake(v) for v in value.values())
    return False


def _rebuild_tuple(tuple_type: type, items: list[Any]) -> tuple:
    # namedtuples keep their type (torch.return_types, user records); torch.Size and other
    # tuple subclasses become plain tuples, which every torch op accepts in their place.
    return tuple_type(*items) if hasattr(tuple_type, "_fields") else tuple(items)


def _unwrap(v: VariableTracker, leaf: Any, what: str, numbers: bool = False) -> Any:
    """The value a torch call receives for ``v``: containers rebuilt, constants as they are,
    tensors (and, where ``numbers``, graph-input numbers) through ``leaf`` (the graph node,
    or the fake tensor / example value); a graph-input number elsewhere is specialized."""
    if isinstance(v, TensorVariable):
        return leaf(v)
    if isinstance(v, SymNumberVariable):
        # a symbolic size goes to every op as itself (the fake op computes symbolic shapes)
        return leaf(v) if numbers or v.symbolic else v.as_constant()
    if isinstance(v, SymSliceVariable):
        return slice(*[_unwrap(p, leaf, what, numbers) for p in v.parts])
    if isinstance(v, (ConstantVariable, RangeVariable)):
        return v.as_constant()
    if isinstance(v, TupleVariable):
        return _rebuild_tuple(v.tuple_type, [_unwrap(i, leaf, what, numbers) for i in v.items])
    if isinstance(v, ListVariable):
        return [_unwrap(i, leaf, what, numbers) for i in v.items]
    if isinstance(v, DictVariable):
        return {k: _unwrap(i, leaf, what, numbers) for k, i in v.items.items()}
    raise Unsupported(f"passing {v.describe()} to {what} is not supported")


def _node_of(v: TensorVariable | SymNumberVariable) -> Any:
    return v.node


def _fake_of(v: TensorVariable | SymNumberVariable) -> Any:
    return v.fake if isinstance(v, TensorVariable) else v.example


def _reshape_as_view(op: str, target: Any, fake_args: tuple, fake_kwargs: dict) -> Any:
    """For ``reshape`` of a fake with symbolic sizes that is a view for every size the
    symbols may take, or a copy for every size: a call computing it as ``view``, or as the
    contiguous copy torch's reshape makes then (the node stays ``reshape``), sparing the
    guards torch's reshape kernel takes on each size being 1; else None."""
    import torch

    if op == "call_method":
        if target != "reshape":
            return None
    elif target not in (torch.reshape, torch.Tensor.reshape):
        return None
    if fake_kwargs or len(fake_args) < 2 or not isinstance(fake_args[0], FakeTensor):
        return None
    fake = fake_args[0]
    sizes = fake_args[1] if len(fake_args) == 2 and isinstance(fake_args[1], (tuple, list)) else fake_args[1:]
    if not all(isinstance(v, (int, torch.SymInt)) for v in sizes):
        return None
    plan = reshape_plan(fake, sizes)
    if plan == "view":
        return lambda: fake.view(sizes)
    if plan == "copy":  # what torch's reshape does when there is no view
        return lambda: torch.ops.aten._unsafe_view(fake.clone(memory_format=torch.contiguous_format), sizes)
    return None
