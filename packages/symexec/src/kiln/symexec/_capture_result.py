"""Capture: what tracing one frame gives the compile pipeline, and the questions about it that
symexec answers itself, so that no caller inspects guard kinds or graph nodes.

``capture`` (``_capture``) makes a Capture: the torch-level GraphModule with its example
inputs and their sources, the guards, and the recipe of the replacement code
(``replacement(compiled)``). Its answers, each with the invariant the caller may rely on:

- ``fake_inputs``: per graph input, the fake value the trace ran it as; ``fake_inputs[i]``
  stands for ``example_inputs[i]``.
- ``may_start_user_frames``: whether running the graph's generated code can start a Python
  frame of code other than torch's own (``may_start_user_frames``). False is a promise (the
  code calls only C functions and Python functions of torch, ``operator`` and ``math``, with
  no callable argument); True may be cautious.
- ``specializations``: the numbers and tensor sizes the guards fix that a later capture of
  the same code may take as varying (``Specializations``): the sources
  ``capture(dynamic_numbers=)`` can make graph inputs and ``capture(dynamic_dims=)`` symbols.
- ``op_names``: the graph's operations in graph order, by name (``op_name``).
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from kiln.fxgraph import Graph, GraphModule, Node, map_aggregate
from kiln.guards import EqualsMatch, GuardSet, Source, TensorMatch, is_module_tensor

from ._codegen import ReplacementSource, build_replacement, replacement_template
from ._unsupported import Unsupported

if TYPE_CHECKING:
    from ._breaks import ResumeInputs

__all__ = ["Capture", "Specializations", "may_start_user_frames", "op_name"]

_OPS = ("call_function", "call_method", "call_module")


@dataclass(slots=True)
class Capture:
    """The result of tracing one frame, and its answers; see the module docstring."""

    code: types.CodeType
    graph_module: GraphModule
    example_inputs: list[Any]
    input_sources: list[Source]
    guards: GuardSet
    op_count: int
    body: ReplacementSource
    graph_name: str
    graph_break: Unsupported | None = None  # set when the capture ends at a graph break
    # each call of a resume function the replacement makes: what its arguments are (_breaks)
    resumes: tuple[ResumeInputs, ...] = ()
    shape_env: Any = None  # the ShapeEnv of the graph's symbolic sizes (kiln.symshapes)
    # every code object the trace ran: the frame's own and each function it inlined
    traced_codes: tuple[types.CodeType, ...] = ()
    # each symbolic size the traced Python needed as a value: (its symbols, the user's line)
    size_specializations: tuple[tuple[frozenset, Any], ...] = ()

    def replacement(self, compiled: Any, template: types.CodeType | None = None) -> types.CodeType:
        """The replacement code object calling ``compiled`` for the graph; ``template``: what
        ``replacement_template()`` gave (then it is not compiled again)."""
        body = ReplacementSource(list(self.body.lines), dict(self.body.objects))
        body.objects[self.graph_name] = compiled
        return build_replacement(self.code, body, template)

    def replacement_template(self) -> types.CodeType:
        """The replacement compiled with a placeholder for each object, the graph's included
        (``_codegen.replacement_template``): what ``replacement`` binds, and what a disk cache
        keeps."""
        objects = {**self.body.objects, self.graph_name: None}
        return replacement_template(self.code, ReplacementSource(list(self.body.lines), objects))

    @property
    def source_text(self) -> str:
        """The replacement's body as text (for logs)."""
        return "\n".join(self.body.lines)

    @property
    def fake_inputs(self) -> tuple[Any, ...]:
        """Per graph input, in order, the value the trace ran it as (``fake_inputs[i]`` stands
        for ``example_inputs[i]``): a kiln FakeTensor whose sizes and strides are ints or
        ``torch.SymInt`` over ``shape_env``'s symbols, or a graph-input number's example."""
        return tuple(node.meta.get("val") for node in self.graph_module.graph.find_nodes("placeholder"))

    @property
    def may_start_user_frames(self) -> bool:
        """Whether running the graph's generated code can start a Python frame of code other
        than torch's own (``may_start_user_frames``; False is a promise)."""
        return may_start_user_frames(self.graph_module.graph)

    @property
    def specializations(self) -> Specializations:
        """The numbers and tensor sizes the guards fix that a later capture of the code may
        take as varying (a view of ``guards``: ``Specializations``)."""
        return Specializations(self.guards)

    @property
    def op_names(self) -> list[str]:
        """The graph's operations (function, method and module calls) in order, by name."""
        return [op_name(node) for node in self.graph_module.graph.nodes if node.op in _OPS]


class Specializations:
    """The values a capture's guards fix that a later capture of the same code may take as
    varying: ints and floats fixed by value, and tensor sizes.

    A view of the capture's GuardSet, read when asked (in the order the guards were added):
    a guard added to that set after the capture (kiln's policy adds its stages' guard sink
    to it) counts as the capture's own. It holds nothing of the frame but the guards."""

    __slots__ = ("_guards",)

    def __init__(self, guards: GuardSet) -> None:
        self._guards = guards

    def numbers(self) -> Iterator[tuple[Source, int | float]]:
        """Each int or float the guards fix by value (``L['n'] == 3``), with that value: a
        source ``capture(dynamic_numbers=)`` takes as a graph input. Bools stay constants
        and are never here."""
        for guard in self._guards:
            if type(guard) is EqualsMatch and type(guard.value) in (int, float):
                yield guard.source, guard.value

    def tensor_sizes(self) -> Iterator[tuple[Source, tuple[int | None, ...]]]:
        """Each tensor the guards fix (its tensor guard), with the sizes fixed (None: a
        symbol, free): a source ``capture(dynamic_dims=)`` makes symbols in. A module's
        parameters and buffers stay static and are never here."""
        for guard in self._guards:
            if type(guard) is TensorMatch and not is_module_tensor(guard.source):
                yield guard.source, guard.sizes


# Python functions of these modules (and of torch) start no frame of user code.
_TRUSTED_MODULES = ("operator", "math", "builtins")


def may_start_user_frames(graph: Graph) -> bool:
    """Whether running ``graph``'s generated code can start Python frames of code other than
    torch's own: a submodule call, a call of anything but a C function or a Python function
    of torch (or ``operator``/``math``), such as an autograd.Function's ``apply`` or a custom
    op whose kernel is Python, or a callable passed to a torch function."""
    for node in graph.nodes:
        if node.op == "call_module":
            return True
        if node.op not in ("call_function", "call_method"):
            continue
        if any(callable(a) and not isinstance(a, (type, torch.Tensor)) for a in _constant_args(node)):
            return True
        if node.op == "call_method":
            continue  # a Tensor method: C, or torch's own Python
        target = node.target
        if isinstance(target, (types.BuiltinFunctionType, types.BuiltinMethodType)):
            continue
        module = getattr(target, "__module__", None) or ""
        if isinstance(target, types.FunctionType) and (
                module == "torch" or module.startswith("torch.") or module in _TRUSTED_MODULES):
            continue
        return True
    return False


def _constant_args(node: Node) -> list[Any]:
    """The constant leaves of a node's arguments (a node is a value the graph computes)."""
    out: list[Any] = []
    map_aggregate((node.args, node.kwargs), lambda a: None if isinstance(a, Node) else out.append(a))
    return out


def op_name(node: Node) -> str:
    """A readable name of what ``node`` calls: a method's or submodule's name, a function's
    qualified name."""
    target = node.target
    return target if isinstance(target, str) else getattr(target, "__qualname__", None) or repr(target)
