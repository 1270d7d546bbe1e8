"""``aot_compile``: a torch-level GraphModule to a callable running functional ATen graphs.

Steps: fresh fake inputs (the compile context's, with their symbolic sizes, or made from the
real example inputs), ``trace`` (forward only when no input requires grad or grad mode is
off, else the joint graph), ``partition``, a compiler for each half (default: the graph's
own generated Python, which is the ``aot_eager`` backend; the backward's boxed: it takes one
list and frees each saved tensor after its last use; the forward's compiler may lay out the
saved values its output node lists as ``meta["free_layout"]`` as it likes and report the strides
as its callable's ``output_strides``, which the backward's placeholders then get), ``make_runtime``. The callable returned
carries its ``RuntimeMeta`` as ``runtime_meta``: with the two compiled halves it is all a
cache needs to rebuild the callable (``make_runtime``) without tracing again.

The trace must not decide anything about a symbolic size that the frame's guards do not
check: a relation it decided beyond them is offered to ``accept_guards`` (kiln's backend adds
it to the frame's guards through the CompileContext's guard sink); refused, or without a
taker, the trace raises ``AotUnsupported`` rather than compile a graph that would be wrong
for sizes the guards admit.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from typing import Any

import torch

from kiln.fxgraph import GraphModule
from kiln.symshapes import GuardOnDataDependentError, ShapeEnv, ShapeEnvConfig
from kiln.symshapes.bridge import FakeStorage, FakeTensor, FakeTensorMode, to_torch

from ._functional import AotUnsupported
from ._partition import partition
from ._runtime import RuntimeMeta, make_runtime
from ._trace import trace

__all__ = ["aot_compile"]

_graphs_log = logging.getLogger("kiln.aot_graphs")

Compiler = Callable[[GraphModule], Callable[..., Any]]


def _generated_code(gm: GraphModule) -> Callable[..., Any]:
    return gm.forward


def _boxed_generated_code(gm: GraphModule) -> Callable[..., Any]:
    # takes the list of saved tensors and tangents, freeing each after its last use
    return gm.boxed_forward()


def aot_compile(gm: GraphModule, example_inputs: list[Any], context: Any = None, *,
                fw_compiler: Compiler = _generated_code, bw_compiler: Compiler = _boxed_generated_code,
                partitioner: str = "min_cut",
                accept_guards: Callable[[list[Any]], bool] | None = None,
                decompositions: dict | None = None,
                on_graphs: Callable[..., None] | None = None) -> Callable[..., tuple]:
    """A callable equivalent to ``gm`` (see the module docstring). ``context``: kiln's
    CompileContext of the graph (its ShapeEnv and fake inputs), or None for static fakes of
    ``example_inputs``. ``partitioner``: ``"min_cut"`` or ``"save_all"`` (``partition``).
    ``accept_guards(exprs)``: offered the relations on symbolic sizes the ATen trace decided
    beyond the frame's guards (sympy expressions over the frame's symbols); True when it made
    them guards of the frame, else (or without it) the trace is refused. ``decompositions``:
    composite ops traced as the ops they are made of (``core_aten_decompositions``).
    ``on_graphs(joint=, forward=, backward=, saved=)``, when given, is called once with the
    joint graph, the forward and backward graphs (``backward`` None without gradients) and the
    joint graph's nodes the forward saves for the backward, before either half is compiled
    (kiln's trace records them; the graphs must not be changed)."""
    fakes = _fresh_fakes(example_inputs, context)
    env = next((f.fake_mode.shape_env for f in fakes if isinstance(f, FakeTensor)), None)
    guards_before = len(env.guards) if env is not None else 0
    asserts_before = len(env.runtime_asserts) if env is not None else 0
    needs_grad = torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)
    final_grad_mode = _global_effects(gm)
    try:
        result, constants = trace(gm, fakes, backward=needs_grad, decompositions=decompositions)
    except GuardOnDataDependentError as e:
        raise AotUnsupported(f"a decision on a data-dependent size: {e}") from e
    if env is not None and len(env.runtime_asserts) > asserts_before:
        raise AotUnsupported("tracing the ATen graph assumed data-dependent sizes the graph does not check")
    if env is not None and len(env.guards) > guards_before:
        new = [g.expr for g in env.guards[guards_before:]]
        if accept_guards is None or not accept_guards(new):
            raise AotUnsupported("tracing the ATen graph decided on symbolic sizes the frame does not guard: "
                                 f"{[str(e) for e in new]}")
    split = partition(result, partitioner)
    if _graphs_log.isEnabledFor(logging.INFO):
        _graphs_log.info("joint graph:\n%s", result.graph.python_code().src)
        _graphs_log.info("forward graph:\n%s", split.forward.python_code().src)
        if split.backward is not None:
            _graphs_log.info("backward graph:\n%s", split.backward.python_code().src)
    if on_graphs is not None:
        on_graphs(joint=result.graph, forward=split.forward, backward=split.backward, saved=list(split.saved))
    if split.backward is not None:
        split.forward.output_node.meta["free_layout"] = _free_layout(split)
    forward = fw_compiler(GraphModule(dict(constants), split.forward, class_name="AotForward"))
    backward = None
    if split.backward is not None:
        _restride_saved(split, getattr(forward, "output_strides", None))
        backward = bw_compiler(GraphModule(dict(constants), split.backward, class_name="AotBackward"))
    mutated = [i for i, _ in result.mutated]
    meta = RuntimeMeta(
        num_inputs=len(fakes),
        num_outputs=len(result.outputs),
        output_aliases=tuple(result.output_aliases),
        alias_layouts=tuple(_alias_layout(result, k, mutated, fakes) for k in range(len(result.outputs))),
        grad_inputs=tuple(result.grad_inputs) if backward is not None else (),
        diff_outputs=tuple(result.diff_outputs) if backward is not None else (),
        saved_tensor=tuple(isinstance(n.meta.get("val"), torch.Tensor) for n in split.saved),
        final_grad_mode=final_grad_mode,
    )
    runtime = make_runtime(forward, backward, meta)
    runtime.runtime_meta = meta  # type: ignore[attr-defined]
    return runtime


# ops that read a tensor's storage by strides (a restrided tensor's storage is not eager's),
# and ``view``, which raises on some strides (a backward that runs as generated Python would)
_STORAGE_READS = frozenset({"as_strided", "as_strided_", "as_strided_scatter", "as_strided_copy", "view",
                            "_unsafe_view"})


def _free_layout(split: Any) -> tuple[int, ...]:
    """The forward's outputs whose layout its compiler may choose (kiln.inductor lays
    convolutions' values out channels-last): the saved values the backward reads only through
    ops that do not read their storage by strides, and does not return (views of them
    included). The compiled forward reports what it chose as its ``output_strides``
    (``_restride_saved``)."""
    placeholders = split.backward.find_nodes("placeholder")
    return tuple(split.num_outputs + k for k in range(len(split.saved)) if _layout_free(placeholders[k]))


def _layout_free(placeholder: Any) -> bool:
    stack, seen = [placeholder], {placeholder}
    while stack:
        for user in stack.pop().users:
            if user.op == "call_function" and user.target is operator.getitem:
                aliases = True  # an item of a saved tuple
            else:
                schema = getattr(user.target, "_schema", None)
                if user.op != "call_function" or schema is None or schema.name.split("::")[-1] in _STORAGE_READS:
                    return False
                aliases = any(r.alias_info is not None for r in schema.returns)
            if aliases and user not in seen:
                seen.add(user)
                stack.append(user)  # a view of it
    return True


def _restride_saved(split: Any, strides: Any) -> None:
    """The saved values the compiled forward returns with other strides than traced
    (``output_strides``: per output, the strides or None, and per item for a tuple) get those
    strides in the backward's placeholders, so that its compiler reads them as they are laid out."""
    if not strides:
        return
    placeholders = split.backward.find_nodes("placeholder")
    for k in range(len(split.saved)):
        val, stride = placeholders[k].meta.get("val"), strides[split.num_outputs + k]
        if isinstance(val, (tuple, list)) and stride is not None:  # a tuple saved whole: per item
            placeholders[k].meta["val"] = type(val)(_restrided(v, s) for v, s in zip(val, stride, strict=True))
        else:
            placeholders[k].meta["val"] = _restrided(val, stride)


def _restrided(val: Any, stride: Any) -> Any:
    if stride is None or not isinstance(val, FakeTensor):
        return val
    return FakeTensor.of_metadata(val.fake_mode, list(val.shape), list(stride), 0, val.dtype, val.device)


def _global_effects(gm: GraphModule) -> bool | None:
    """The grad mode the graph leaves set (the argument of its last ``_set_grad_enabled``, or
    None when it sets none): the ATen graphs do not switch modes, the runtime sets it after.
    Autocast regions must close inside the graph (the ATen graph holds their casts)."""
    final, autocast = None, 0
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is torch._C._set_grad_enabled:
            final = bool(node.args[0])
        elif getattr(node.target, "__name__", "") == "_enter_autocast":
            autocast += 1
        elif getattr(node.target, "__name__", "") == "_exit_autocast":
            autocast -= 1
    if autocast:
        raise AotUnsupported("the graph enters an autocast region it does not leave")
    return final


def _alias_layout(result: Any, k: int, mutated: list[int], fakes: list[Any]) -> tuple | None:
    i = result.output_aliases[k]
    if i is None or i not in mutated:
        return None
    out, base = result.output_fakes[k], fakes[i]
    if out.dtype != base.dtype:
        raise AotUnsupported("an output is a view of another dtype of an input the program writes")
    layout = (tuple(out.shape), tuple(out.stride()), out.storage_offset() - base.storage_offset())
    if not all(type(v) is int for v in (*layout[0], *layout[1], layout[2])):
        raise AotUnsupported("an output is a view of an input the program writes, with symbolic sizes")
    return layout


def _symbolic_number(value: Any, mode: Any) -> Any:
    """A plain int or float graph input as a symbol (the graph takes it because it varies:
    the trace must not bake its example value into the ATen graph)."""
    if type(value) is int:
        expr = mode.shape_env.create_symbol(value, None, size_like=False)
        return to_torch(expr, mode.env_view, int)
    if type(value) is float:
        return to_torch(mode.shape_env.create_symfloat(value).expr, mode.env_view, float)
    return value


def _fresh_fakes(example_inputs: list[Any], context: Any) -> list[Any]:
    """Fake inputs for the trace: new FakeTensors with the metadata of the context's (or of
    the real inputs'), sharing storages where those do, requiring grad where the real
    inputs do; numbers as the context has them (a SymInt when the number varies)."""
    if context is not None:
        fakes = list(context.fake_inputs)
        mode = next((f.fake_mode for f in fakes if isinstance(f, FakeTensor)), None)
        if mode is None or mode.shape_env is None:
            mode = FakeTensorMode(ShapeEnv(ShapeEnvConfig(oblivious_one=True)))
    else:
        mode = FakeTensorMode(ShapeEnv(ShapeEnvConfig(oblivious_one=True)))
        fakes = [mode.from_real(x) if isinstance(x, torch.Tensor) else x for x in example_inputs]
    if len(fakes) != len(example_inputs):  # pragma: no cover - the context's own invariant
        raise AotUnsupported(f"{len(example_inputs)} example inputs for {len(fakes)} fake inputs")
    storages: dict[int, FakeStorage] = {}
    fresh = []
    for real, fake in zip(example_inputs, fakes, strict=True):
        if not isinstance(fake, FakeTensor):
            fresh.append(_symbolic_number(fake, mode))
            continue
        storage = storages.setdefault(id(fake.fake_storage), FakeStorage(fake.device))
        new = FakeTensor.of_metadata(mode, list(fake.shape), list(fake.stride()), fake.storage_offset(),
                                     fake.dtype, fake.device, storage)
        if isinstance(real, torch.Tensor) and real.requires_grad:
            new.requires_grad_(True)
        fresh.append(new)
    return fresh
