"""CompileContext: what a backend may know about the graph it compiles beyond ``(gm,
example_inputs)``: the ShapeEnv and the fake example inputs, with symbolic sizes.

A callable backend keeps torch's signature ``backend(gm, example_inputs)`` (``example_inputs``
are the real values of the first call, as under torch.compile); while it runs,
``kiln.compile_context()`` returns the context of the graph it was given (as torch's
``TracingContext.get()`` does for torch's backends), and None anywhere else. kiln's own
stages (aotgrad, inductor) will take it as an argument.

Invariants:
- ``fake_inputs[i]`` stands for ``example_inputs[i]``: a kiln FakeTensor whose sizes and
  strides are ints or ``torch.SymInt`` over ``shape_env``'s symbols (``dynamic=True``, marked
  or automatically dynamic dimensions), or the example value itself for a non-tensor input.
- A graph whose ``symbolic`` is True serves every size its guards admit: a backend must not
  compile it for the example sizes only (kiln's eager backend runs the graph's own code).
- The context is set for the duration of one backend call, in that thread only.
"""

from __future__ import annotations

import contextlib
import contextvars
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["CompileContext", "compile_context"]


@dataclass(frozen=True, slots=True)
class CompileContext:
    """The frame a graph comes from, its ShapeEnv and its fake example inputs."""

    code: types.CodeType
    shape_env: Any  # kiln.symshapes.ShapeEnv
    fake_inputs: tuple[Any, ...]

    @property
    def symbolic(self) -> bool:
        """Whether some input size or stride is a symbol (the graph serves many sizes)."""
        return any(_symbolic_tensor(fake) for fake in self.fake_inputs)

    def varying_inputs(self) -> tuple[int, ...]:
        """Positions of the inputs whose value or size may differ between the calls the
        guards admit: tensors with a symbolic size, stride or offset, and numbers (kiln makes
        a number a graph input only when it varies)."""
        return tuple(i for i, fake in enumerate(self.fake_inputs)
                     if _symbolic_tensor(fake) or not (fake is None or isinstance(fake, torch.Tensor)))

    def symbolic_dims(self) -> list[tuple[int, ...]]:
        """Per input, the dimensions whose size is a symbol (empty for non-tensors)."""
        return [tuple(d for d, size in enumerate(fake.shape) if isinstance(size, torch.SymInt))
                if isinstance(fake, torch.Tensor) else () for fake in self.fake_inputs]


def _symbolic_tensor(fake: Any) -> bool:
    return isinstance(fake, torch.Tensor) and any(
        isinstance(v, torch.SymInt) for v in (*fake.shape, *fake.stride(), fake.storage_offset()))


_current: contextvars.ContextVar[CompileContext | None] = contextvars.ContextVar("kiln_compile_context", default=None)


def compile_context() -> CompileContext | None:
    """The CompileContext of the graph whose backend is running now, else None."""
    return _current.get()


@contextlib.contextmanager
def active(context: CompileContext | None) -> Iterator[None]:
    """``context`` is ``compile_context()`` inside."""
    token = _current.set(context)
    try:
        yield
    finally:
        _current.reset(token)


def context_of(cap: Any) -> CompileContext:
    """The context of a kiln.symexec Capture's graph."""
    fakes = tuple(node.meta.get("val") for node in cap.graph_module.graph.find_nodes("placeholder"))
    return CompileContext(cap.code, cap.shape_env, fakes)
