"""capture: trace one frame into a graph, its guards, and a recipe for its replacement code.

``capture(code, L, f_globals)`` runs the Translator over ``code`` with the frame's arguments
``L`` (as kiln.frameeval passes them) and returns a ``Capture`` (``_capture_result``): the
torch-level GraphModule with its example inputs, the guards, and ``replacement(compiled)``
which builds the code object that loads the graph inputs from the frame, calls ``compiled``
(whatever the backend made of the graph), replays side effects on real objects (list and
dict mutations) and rebuilds the Python return value.

The replacement's order: read every graph input from the frame; replay the side effects eager
made before the graph's first op that may raise at run time (``_split_effects``,
``_run_time_errors``), so that they happen even when the graph raises (an index out of range,
overlapping memory); run the graph; replay the other side effects; build the return value.
An effect made after such an op, or storing a value the graph computes, is replayed after
the graph: when the graph raises, it is lost (eager made it if it came before the op that
raised).
"""

from __future__ import annotations

import functools
import inspect
import keyword
import math
import operator
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from kiln.fxgraph import GraphModule, Node, eliminate_dead_code
from kiln.guards import LocalSource, Source
from kiln.symshapes.bridge import hide_user_state, no_frontend_import

from . import _opcodes  # noqa: F401  (registers the opcode rules)
from ._autocast_state import autocast_state, restore_autocast
from ._breaks import ResumeInputs, break_point, break_tail
from ._caches import SymexecCaches
from ._capture_result import Capture
from ._codegen import ReplacementSource, render_source
from ._opcodes import MethodOf
from ._output_graph import MUTATES, OutputGraph
from ._run_time_errors import may_raise
from ._translator import NULL, CellVariable, LazyVariable, StopTracing, Translator, lazy_local
from ._unsupported import Unsupported
from .variables._base import VariableTracker
from .variables._constant import ConstantVariable
from .variables._containers import (
    DictVariable,
    IteratorVariable,
    ListVariable,
    RangeVariable,
    TupleVariable,
)
from .variables._dict_views import DictViewVariable
from .variables._functions import NestedFunctionVariable, make_function
from .variables._functools import PartialVariable
from .variables._objects import NewObjectVariable, SuperVariable, lookup_class_attribute, new_object
from .variables._symnumber import SymNumberVariable
from .variables._tensor import TensorMethodVariable, TensorVariable
from .variables._torch import ExitVariable

_SET_GRAD = torch._C._set_grad_enabled
_ENTER_AUTOCAST = torch.amp.autocast_mode._enter_autocast

__all__ = ["Capture", "capture"]


def capture(code: types.CodeType, L: dict[str, Any], f_globals: dict[str, Any], *,
            graph_breaks: bool = False, dynamic_numbers: frozenset[Source] = frozenset(),
            dynamic_shapes: bool = False, dynamic_dims: Mapping[Source, frozenset[int]] | None = None,
            caches: SymexecCaches | None = None) -> Capture:
    """Trace ``code`` called with the arguments ``L``; raises Unsupported when it cannot.

    With ``graph_breaks``, a failure at an instruction where a graph break is possible (see
    ``_breaks``) gives a capture of what comes before it, whose replacement runs the
    instruction and resumes after it (``Capture.graph_break`` holds the failure). Floats
    read from ``dynamic_numbers`` are graph inputs (``variables._symnumber``). With
    ``dynamic_shapes`` every dimension of a tensor argument is a symbol, and with
    ``dynamic_dims`` the dimensions listed per source (``OutputGraph``). ``caches`` are the
    caches shared with other captures (``SymexecCaches``: decoded code, fake-op results,
    resume functions); None: a fresh set for this capture alone.
    """
    options = (dynamic_numbers, dynamic_shapes, dynamic_dims)
    caches = SymexecCaches() if caches is None else caches
    try:
        return _capture(code, L, f_globals, graph_breaks, options, caches, scalar_outputs=True)
    except Unsupported as e:
        if not e.data_dependent:
            raise
        # A value of ``.item()``/``.tolist()`` went where the code needs it as a number at
        # trace time and no graph break is possible there (a slice bound in a loop): trace
        # again with those calls breaking the graph instead, as torch.compile does by default.
        try:
            return _capture(code, L, f_globals, graph_breaks, options, caches, scalar_outputs=False)
        except Unsupported:
            raise e from None


def _capture(code: types.CodeType, L: dict[str, Any], f_globals: dict[str, Any], graph_breaks: bool,
             options: tuple, caches: SymexecCaches, *, scalar_outputs: bool) -> Capture:
    try:
        return _trace(code, L, f_globals, None, None, *options, caches=caches, scalar_outputs=scalar_outputs)
    except Unsupported as e:
        point = break_point(code, e, caches) if graph_breaks else None
        if point is None:
            raise
        try:
            return _trace(code, L, f_globals, point, e.detached(), *options, caches=caches,
                          scalar_outputs=scalar_outputs)
        except Unsupported as why:
            e.reason = f"{e.reason} (no graph break possible there: {why.reason})"
            e.args = (e.reason,)
            e.data_dependent = e.data_dependent or why.data_dependent
            raise e from None


def _trace(code: types.CodeType, L: dict[str, Any], f_globals: dict[str, Any],
           stop_at: tuple[int, int] | None, graph_break: Unsupported | None,
           dynamic_numbers: frozenset[Source] = frozenset(), dynamic_shapes: bool = False,
           dynamic_dims: Mapping[Source, frozenset[int]] | None = None, *,
           caches: SymexecCaches, scalar_outputs: bool = True) -> Capture:
    output = OutputGraph(f_globals, dynamic_numbers, dynamic_shapes, dynamic_dims, scalar_outputs, caches=caches)
    saved_grad = torch.is_grad_enabled()
    # After OutputGraph took the global-state guard: the user's function modes and
    # saved-tensors hooks see what the compiled code runs, never the trace.
    hidden = hide_user_state(dispatch_modes=False)
    try:
        # torch's meta kernels must not load torch's own frontend (``_frontend``).
        hidden.enter_context(no_frontend_import())
        symbolic_locals: dict[str, VariableTracker] = {}
        for name in code.co_varnames[:_parameter_count(code)]:
            if name in L:
                symbolic_locals[name] = lazy_local(L[name], LocalSource(name))
        cells = {name: CellVariable(lazy_local(L[name], LocalSource(name)) if name in L else None,
                                    free_name=name)
                 for name in code.co_freevars}
        tx = Translator(code, f_globals, output, symbolic_locals, cells)
        tx.stop_at = stop_at
        try:
            result = tx.run()
        except Unsupported as e:
            e.data_dependent = e.data_dependent or output.made_scalar_outputs
            raise
        except StopTracing:
            output.check_assumptions()
            output.finish_inputs()
            output.shape_guards()
            resumes: list[ResumeInputs] = []
            cap = _finish(code, output, break_tail(tx, f_globals, resumes), graph_break)
            cap.resumes = tuple(resumes)  # filled while _finish rendered the tail
            return cap
        output.check_assumptions()
        output.finish_inputs()
        output.shape_guards()
        return _finish(code, output, lambda writer: [f"return {writer.expr(result)}"], None)
    finally:
        try:
            output.close_contexts()
            torch.set_grad_enabled(saved_grad)
        finally:
            hidden.close()


def _finish(code: types.CodeType, output: OutputGraph, tail: Callable[[_Writer], list[str]],
            graph_break: Unsupported | None) -> Capture:
    graph = output.graph
    params = set(code.co_varnames[:_parameter_count(code)]) | set(code.co_freevars)
    body = ReplacementSource()
    outputs: list[Node] = []
    writer = _Writer(body, outputs, params)
    effects = _effects(output, writer, params, body)
    tail_lines = tail(writer)
    graph.output(tuple(outputs))
    eliminate_dead_code(graph)
    keep_sources, keep_examples = [], []
    for node in list(graph.find_nodes("placeholder")):
        if node.users:
            keep_sources.append(node.meta["source"])
            keep_examples.append(output.example_of(node.meta["source"]))
        else:
            graph.erase_node(node)
    graph.lint()
    ops = [n for n in graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    op_count = len(ops)
    # the first op that may raise at run time: effects made before it are made before the graph
    # (or changes a tensor in place: a replayed print of it must come before that too)
    limit = min((n.meta.get("order", 0) for n in ops if n.meta.get(MUTATES) or may_raise(n, MUTATES)),
                default=None)
    early = _early_objects(writer, limit, output.effect_position)
    before, after = _split_effects(effects, limit, early, writer.prelude)
    for effect in after:
        _check_unchanged_after(graph, effect.tensors_after)
    graph_name = "__kiln_graph"
    # Inputs are read from the frame once, before any side effect is replayed; the values
    # the return value or a replay needs again come from these reads.
    names = writer.input_names
    for node, name in names.items():
        expr = render_source(node.meta["source"], params, body)
        if name != expr:
            body.lines.append(f"{name} = {expr}")
    args = []
    for node in graph.find_nodes("placeholder"):
        arg = names.get(node) or render_source(node.meta["source"], params, body)
        if before and node not in names and arg not in params:  # effects replayed first may change it
            body.lines.append(f"__kiln_in_{node.name} = {arg}")
            arg = f"__kiln_in_{node.name}"
        args.append(arg)
    inputs = ", ".join(args)
    # Effects eager makes before the graph's first op happen before the graph runs: when
    # the graph raises (an index out of range, overlapping memory), they are not lost.
    # Objects the trace made that those effects store are built first.
    if before:
        body.lines += [line for line in writer.prelude if _defined(line) in early]
    body.lines += [line for effect in before for line in effect.lines]
    call = f"__kiln_out = {graph_name}({inputs})" if outputs else f"{graph_name}({inputs})" if op_count else None
    on_error = []
    restore = output.error_grad_mode  # None: no op of the graph may fail at run time
    if call is not None and restore is not None and any(n.target is _SET_GRAD for n in ops):
        # the graph switches grad mode (with blocks): if it raises, leave the mode eager's
        # unwinding would leave (OutputGraph.error_grad_mode)
        on_error.append(f"    {body.ref(_SET_GRAD, 'set_grad')}({restore})")
    if call is not None and restore is not None and any(n.target is _ENTER_AUTOCAST for n in ops):
        # the graph enters autocast blocks: if it raises, the state before it (_autocast_state)
        body.lines.append(f"__kiln_autocast = {body.ref(autocast_state, 'autocast_state')}()")
        on_error.append(f"    {body.ref(restore_autocast, 'restore_autocast')}(__kiln_autocast)")
    if on_error:
        body.lines += ["try:", f"    {call}", "except BaseException:", *on_error, "    raise"]
    elif call is not None:
        body.lines.append(call)
    body.lines += [line for line in writer.prelude if not before or _defined(line) not in early]
    body.lines += [line for effect in after for line in effect.lines]
    body.lines += tail_lines
    gm = GraphModule({}, graph, class_name="GraphModule")
    return Capture(code, gm, keep_examples, keep_sources, output.guards, op_count, body, graph_name,
                   graph_break, shape_env=output.shape_env, traced_codes=tuple(output.traced_codes),
                   size_specializations=tuple(output.specializations))


@dataclass(slots=True)
class _Effect:
    """Replacement lines replaying one Python side effect of the trace.

    ``position``: the ops recorded before the effect was (last) made, None when unknown;
    ``tensors_after``: for a replayed call with a tensor argument, the same count (checked
    by ``_check_unchanged_after`` when the call is replayed after the graph), else None."""

    position: int | None
    lines: list[str]
    tensors_after: int | None = None


def _effects(output: OutputGraph, writer: _Writer, params: set[str], body: ReplacementSource) -> list[_Effect]:
    """The side effects to replay, each with its trace position: mutated containers from
    the frame get their final contents, then attribute stores, global stores, calls."""
    effects = []
    for tracker in output.trackers.values():
        if isinstance(tracker, (ListVariable, DictVariable)) and tracker.mutated and tracker.source is not None:
            effects.append(_Effect(output.effect_position("container", id(tracker)), writer.replay(tracker)))
    for owner, writes in output.attribute_writes.values():
        # a tensor the trace made has no source: the graph's output (made one) is its target
        target = render_source(owner.source, params, body) if owner.source is not None else writer.expr(owner)
        # A class with a Python __setattr__ had it inlined: what is left are its own
        # object.__setattr__ stores, replayed as such.
        raw = isinstance(lookup_class_attribute(owner.python_type(), "__setattr__"), types.FunctionType)
        for name, value in writes.items():
            if raw:
                line = f"object.__setattr__({target}, {name!r}, {writer.expr(value)})"
            elif name.isidentifier() and not keyword.iskeyword(name):
                line = f"{target}.{name} = {writer.expr(value)}"
            else:
                line = f"setattr({target}, {name!r}, {writer.expr(value)})"
            effects.append(_Effect(output.effect_position("attribute", id(owner), name), [line]))
    for name, value in output.global_writes.items():
        effects.append(_Effect(output.effect_position("global", name), [f"globals()[{name!r}] = {writer.expr(value)}"]))
    for i, (callee, args, kwargs, after) in enumerate(output.replayed_calls):
        call_args = [writer.expr(a) for a in args] + [f"{k}={writer.expr(v)}" for k, v in kwargs.items()]
        if isinstance(callee, tuple):
            owner, method = callee
            target = f"{render_source(owner.source, params, body)}.{method}"
        else:
            target = body.ref(callee, "call")
        effects.append(_Effect(output.effect_position("call", i), [f"{target}({', '.join(call_args)})"], after))
    return effects


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# names in replay lines that say nothing about which objects a line reads or writes
_NEUTRAL_NAMES = frozenset({"globals", "object", "setattr", "clear", "update", "__kiln_new"})


def _names(lines: list[str]) -> set[str]:
    return {n for line in lines for n in _NAME.findall(line)} - _NEUTRAL_NAMES


def _defined(prelude_line: str) -> str:
    """The local a prelude line (``name = build``) defines."""
    return prelude_line.split(" = ", 1)[0]


def _early_objects(writer: _Writer, first_op: int | None,
                   position: Callable[..., int | None]) -> set[str]:
    """The locals of the prelude holding lists and dicts the trace made whose contents were
    final before the op ``first_op``: not changed at or after it, built from no graph output
    and only from other such lists and dicts. Other objects the trace made (user objects,
    functions, closure cells) are left out: what they hold may change with no trace position."""
    if first_op is None:
        return set()
    trackers = {name: key for key, name in writer.built.items()}
    early: set[str] = set()
    for line in writer.prelude:  # a prelude line uses only locals defined above it
        name, _, build = line.partition(" = ")
        if name not in trackers or not build.startswith(("[", "{")):
            continue
        changed = position("container", trackers[name])
        if (changed is None or changed < first_op) and all(
                n in early for n in _names([build]) if n.startswith(("__kiln_out", "__kiln_obj"))):
            early.add(name)
    return early


def _split_effects(effects: list[_Effect], first_op: int | None, early: set[str],
                   prelude: list[str]) -> tuple[list[_Effect], list[_Effect]]:
    """(replayed before the graph, after it), each in the order of ``effects``.

    An effect goes before the graph when eager made it (its last write included) before the
    graph's first op that may raise (``first_op``: its ``meta["order"]``; the ops before it
    change nothing and cannot fail, so the effect may as well come before them), its values
    are not made by the graph (no ``__kiln_out``) and are objects the trace made only when
    they were final by then (``early``, built before it), and it names nothing that a line it
    now overtakes reads (a prelude line built from the graph's outputs, an earlier effect
    that stays after): names are compared as text, so a shared name keeps it after (safe).
    When no op of the graph can raise, every effect stays after (as it was).
    """
    if first_op is None:
        return [], list(effects)
    passed = _names([line for line in prelude if _defined(line) not in early])
    before, after = [], []
    for effect in effects:
        names = _names(effect.lines)
        made = {n for n in names if n.startswith(("__kiln_out", "__kiln_obj"))}
        if (effect.position is not None and effect.position < first_op
                and made <= early and not names & passed):
            before.append(effect)
        else:
            after.append(effect)
            passed |= names
    return before, after


_IN_PLACE_OPERATORS = frozenset({operator.setitem, operator.iadd, operator.isub, operator.imul,
                                  operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow,
                                  operator.iand, operator.ior, operator.ixor, operator.ilshift,
                                  operator.irshift, operator.imatmul})


def _check_unchanged_after(graph: Any, after: int | None) -> None:
    """A replayed call shows its tensors as they are at the end: no op recorded after the
    call (``meta["order"] > after``) may change a tensor in place (conservatively: none at
    all). ``after`` is None when the call has no tensor."""
    if after is None:
        return
    for node in graph.nodes:
        if node.op in ("call_function", "call_method") and node.meta.get("order", 0) > after:
            name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
            in_place = (name.endswith("_") and not name.endswith("__")) or node.target in _IN_PLACE_OPERATORS
            if in_place or "out" in node.kwargs or node.meta.get(MUTATES):
                raise Unsupported("a tensor passed to print/warn/log is changed in place later in the "
                                  f"compiled region ({name}), so the replayed call would show the new values")


def _parameter_count(code: types.CodeType) -> int:
    """How many of ``co_varnames`` are parameters (``*args`` and ``**kwargs`` included)."""
    return (code.co_argcount + code.co_kwonlyargcount
            + bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS))


def _literal(value: Any) -> bool:
    t = type(value)
    if value is None or t in (bool, int, str, bytes):
        return True
    if t is float:
        return math.isfinite(value)
    if t is tuple:
        return all(_literal(v) for v in value)
    return False


class _Writer:
    """Expressions that rebuild trackers in the replacement body.

    An object the trace created (container, object, function, closure cell) is built once,
    in a local of the prelude, and every later mention of its tracker is that local: the
    identities eager has hold in the replacement too. A closure cell is either the frame's
    own free variable (the very cell the frame runs with) or one the trace made, built empty
    and filled after the functions that close over it exist (a function may close over
    itself)."""

    def __init__(self, body: ReplacementSource, outputs: list[Node], params: set[str]) -> None:
        self.body = body
        self.outputs = outputs
        self.params = params
        self.input_names: dict[Node, str] = {}  # graph inputs the body refers to again
        self.built: dict[int, str] = {}  # objects created by the trace -> their local
        self.prelude: list[str] = []     # lines building them, before effects and return
        self.unfilled: list[tuple[str, CellVariable]] = []  # cells built, contents not yet set

    def input(self, v: TensorVariable) -> str:
        name = self.input_names.get(v.node)
        if name is None:
            direct = render_source(v.source, self.params, self.body)
            # a local parameter stays itself; a global may be rebound by a replayed store
            name = direct if direct in self.params else f"__kiln_in_{v.node.name}"
            self.input_names[v.node] = name
        return name

    def tensor(self, v: TensorVariable) -> str:
        if v.node not in self.outputs:
            self.outputs.append(v.node)
        return f"__kiln_out[{self.outputs.index(v.node)}]"

    def expr(self, v: VariableTracker) -> str:
        if isinstance(v, LazyVariable):  # a frame argument never read: the frame's own value
            return render_source(v.source, self.params, self.body)
        if isinstance(v, TensorVariable):
            if v.node.op == "placeholder" and v.source is not None:
                return self.input(v)  # the caller's own tensor
            return self.tensor(v)
        if isinstance(v, SymNumberVariable):  # a number the graph takes or computes
            if v.node.op == "placeholder":
                return render_source(v.source, self.params, self.body)
            return self.tensor(v)
        if isinstance(v, (ListVariable, DictVariable)) and v.source is not None:
            return render_source(v.source, self.params, self.body)  # identity matters: the real object
        if v.source is None and hasattr(type(v), "rebuild_text"):  # sets, deques: their own code
            return self.hoisted(v, v.rebuild_text(self.expr, self.body.ref))
        if isinstance(v, (ConstantVariable, RangeVariable)):
            value = v.as_constant()
            return repr(value) if _literal(value) else self.body.ref(value)
        if isinstance(v, TupleVariable) and v.source is not None:
            return render_source(v.source, self.params, self.body)  # the frame's own (immutable) tuple
        if isinstance(v, TupleVariable):
            items = [self.expr(i) for i in v.items]
            if v.tuple_type is tuple:
                return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
            ctor = self.body.ref(v.tuple_type, "type")
            if hasattr(v.tuple_type, "_fields"):
                return f"{ctor}({', '.join(items)})"
            return f"{ctor}(({', '.join(items)}{',' if len(items) == 1 else ''}))"
        if isinstance(v, ListVariable):
            return self.hoisted(v, "[" + ", ".join(self.expr(i) for i in v.items) + "]")
        if isinstance(v, DictVariable):
            items = ", ".join(f"{self.key(k)}: {self.expr(i)}" for k, i in v.items.items())
            literal = "{" + items + "}"
            rebuild = getattr(v, "rebuild", None)  # defaultdict, OrderedDict: their own type
            return self.hoisted(v, literal if rebuild is None else rebuild(literal, self.expr, self.body.ref))
        if isinstance(v, NewObjectVariable):
            return self.new_object(v)
        if isinstance(v, NestedFunctionVariable):
            return self.function(v)
        if isinstance(v, PartialVariable) and v.source is None:  # made while tracing
            parts = [self.expr(v.func), *map(self.expr, v.args)]
            parts += [f"**{{{', '.join(f'{k!r}: {self.expr(a)}' for k, a in v.keywords.items())}}}"]
            return self.hoisted(v, f"{self.body.ref(functools.partial, 'type')}({', '.join(parts)})")
        if isinstance(v, IteratorVariable):  # where it is, at a graph break or returned
            return v.reconstruct(self.expr, self.body.ref)
        if isinstance(v, DictViewVariable):  # a live view of the real (or rebuilt) dict
            return f"{self.expr(v.dict)}.{v.kind}()"
        if isinstance(v, TensorMethodVariable):
            return f"{self.expr(v.tensor)}.{v.name}"
        if isinstance(v, MethodOf):
            return f"{self.expr(v.obj)}.{v.name}"
        if isinstance(v, SuperVariable):  # the two-argument form needs no __class__ cell
            return f"super({self.body.ref(v.cls, 'type')}, {self.expr(v.obj)})"
        if isinstance(v, ExitVariable):  # a grad-mode block left open at a graph break
            return self.body.ref(v.runtime_exit(), "exit")
        if v is NULL:
            raise Unsupported("a NULL stack entry has no value")
        if v.source is not None:
            return render_source(v.source, self.params, self.body)
        if v.is_constant():
            return self.body.ref(v.as_constant())
        raise Unsupported(f"returning {v.describe()} from a compiled region")

    def hoisted(self, v: VariableTracker, build: str) -> str:
        """A local holding a container made by the trace, built once (identity kept when
        the same list is returned twice or passed on at a graph break)."""
        name = self.built.get(id(v))
        if name is None:
            name = self.built[id(v)] = f"__kiln_obj{len(self.built)}"
            self.prelude.append(f"{name} = {build}")
        return name

    def new_object(self, v: NewObjectVariable) -> str:
        """A local holding the object, built once before it is used (identity kept)."""
        name = self.built.get(id(v))
        if name is None:
            name = self.built[id(v)] = f"__kiln_obj{len(self.built)}"
            attrs = ", ".join(f"{k!r}: {self.expr(a)}" for k, a in v.attrs.items())
            make = self.body.ref(new_object, "new")
            items = ""
            if v.items is not None:
                items = ", {" + ", ".join(f"{self.key(k)}: {self.expr(i)}" for k, i in v.items.items.items()) + "}"
            self.prelude.append(f"{name} = {make}({self.body.ref(v.cls, 'type')}, {{{attrs}}}{items})")
        return name

    def function(self, v: NestedFunctionVariable) -> str:
        """A local holding the function the trace made (MAKE_FUNCTION), built once: the same
        code, globals, names, defaults, annotations and closure cells as eager's."""
        name = self.built.get(id(v))
        if name is not None:
            return name
        closure = [self.cell(c, v) for c in v.closure]
        defaults = [self.expr(d) for d in v.defaults]
        kwdefaults = [f"{k!r}: {self.expr(d)}" for k, d in v.kwdefaults.items()]
        annotations = "None" if v.annotations is None else self.expr(v.annotations)
        name = self.built.get(id(v))
        if name is not None:  # built meanwhile: a default's closure holds this function
            return name
        parts = [self.body.ref(v.code, "code"), self.body.ref(v.fn_globals, "globals"), repr(v.qualname),
                 self.tuple_text(defaults) if defaults else "None",
                 "{" + ", ".join(kwdefaults) + "}" if kwdefaults else "None",
                 annotations, self.tuple_text(closure) if closure else "None"]
        name = self.built[id(v)] = f"__kiln_obj{len(self.built)}"
        self.prelude.append(f"{name} = {self.body.ref(make_function, 'make')}({', '.join(parts)})")
        while self.unfilled:  # after the function: a cell may hold it
            cell, tracker = self.unfilled.pop()
            if tracker.contents is not None:
                self.prelude.append(f"{cell}.cell_contents = {self.expr(tracker.contents)}")
        return name

    def cell(self, c: CellVariable, fn: NestedFunctionVariable) -> str:
        """A local holding the closure cell ``c`` of ``fn``: the frame's own free variable's
        cell, or a new cell for one the trace made (no code outside the trace can reach that
        one, so its contents at the end are all there is). A cell of a function from outside
        cannot be reached: Unsupported."""
        name = self.built.get(id(c))
        if name is not None:
            return name
        if c.free_name is not None:  # a closure in the replacement shares the frame's cell
            build = f"(lambda: {c.free_name}).__closure__[0]"
        elif c.made:
            build = f"{self.body.ref(types.CellType, 'type')}()"
        else:
            raise Unsupported(f"returning {fn.describe()} from a compiled region: it closes over a "
                              "variable of a function outside the compiled region")
        name = self.built[id(c)] = f"__kiln_obj{len(self.built)}"
        self.prelude.append(f"{name} = {build}")
        if c.free_name is None:
            self.unfilled.append((name, c))
        return name

    @staticmethod
    def tuple_text(items: list[str]) -> str:
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"

    def key(self, k: Any) -> str:
        return repr(k) if _literal(k) else self.body.ref(k)

    def replay(self, v: ListVariable | DictVariable) -> list[str]:
        """Lines giving the real container its traced final contents (values built first)."""
        target = render_source(v.source, self.params, self.body)
        if isinstance(v, ListVariable):
            return [f"{target}[:] = [{', '.join(self.expr(i) for i in v.items)}]"]
        items = ", ".join(f"{self.key(k)}: {self.expr(i)}" for k, i in v.items.items())
        return [f"__kiln_new = {{{items}}}", f"{target}.clear()", f"{target}.update(__kiln_new)"]
