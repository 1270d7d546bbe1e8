"""The variants the demo compares, and what it reads of each compile.

A variant is a name and a way of compiling the model. ``kiln`` (``kiln.compile(model)``: its
default backend, "inductor" = kiln.aotgrad + kiln.inductor, C++ kernels for CPU tensors) and
``torch.compile`` (``torch.compile(model)``: torch's Inductor) compare the two stacks, code
generation included. The same two with ``backend="eager"`` compare the frontends alone:
capture, guards and per-call cost, the captured graph run as Python.

Both stacks keep compiled code on disk, so a first call costs what the cache holds.
``cold_caches()`` gives each an empty cache directory for the demo's run (kiln:
``KILN_CACHE_DIR``; torch: ``torch._inductor.utils.fresh_cache``, which also clears torch's
in-process caches): the first calls are those of a first run, whatever ran before.

``count_code(variant)``: what a code-generating variant made in a block (graphs, kernels, and
the ATen or library calls left between them). kiln keeps no stat of these yet
(``kiln.session()`` counts captures and the graph cache only); the callables that the public
compiler factory ``kiln.inductor.aten_compiler`` returns carry their ``CompiledGraph`` as
``.compiled``, so the block wraps that factory, which kiln's inductor backend looks up on each
captured graph it compiles. torch's figures come from the hook its own tests use to read the
generated wrapper (``GraphLowering.save_output_code``: one wrapper per graph, one definition
per kernel) and its counter of ATen and library calls. This is the only module of the demo
that touches torch's private modules.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

import kiln

__all__ = ["COMPARISONS", "KILN", "KILN_EAGER", "TORCH", "TORCH_EAGER", "VARIANTS", "CodeCounts", "Variant", "cold_caches", "count_code", "warm_imports"]


@dataclass(frozen=True)
class Variant:
    """One way of compiling the model: ``stack`` is "kiln" or "torch"; ``backend`` None is
    the stack's default (no backend argument)."""

    name: str
    stack: str
    backend: str | None = None

    def compile(self, model: torch.nn.Module) -> Callable[..., Any]:
        """``model`` compiled the way this variant says."""
        kwargs = {} if self.backend is None else {"backend": self.backend}
        return (kiln.compile if self.stack == "kiln" else torch.compile)(model, **kwargs)

    @property
    def generates_code(self) -> bool:
        return self.backend is None


KILN = Variant("kiln", "kiln")
TORCH = Variant("torch.compile", "torch")
KILN_EAGER = Variant("kiln (backend='eager')", "kiln", "eager")
TORCH_EAGER = Variant("torch.compile (backend='eager')", "torch", "eager")
VARIANTS = (KILN, TORCH, KILN_EAGER, TORCH_EAGER)
# Each comparison: kiln's variant and torch's, compiled and timed together (one after the other:
# kiln's compiled code for a function serves every later kiln.compile of it, whatever backend)
COMPARISONS = {"backends": (KILN, TORCH), "frontends": (KILN_EAGER, TORCH_EAGER)}


@dataclass
class CodeCounts:
    """What a compile made: ATen graphs compiled (kiln: forward and backward), generated
    kernels, and the ATen or library calls (matmuls, ops without a lowering) between them."""

    graphs: int = 0
    kernels: int = 0
    externs: int = 0


@contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


@contextmanager
def cold_caches() -> Iterator[None]:
    """Empty, temporary cache directories for kiln and torch's Inductor during the block
    (removed after it)."""
    from torch._inductor.utils import fresh_cache

    with tempfile.TemporaryDirectory(prefix="kiln-demo-") as directory, \
            _environ("KILN_CACHE_DIR", directory), fresh_cache():
        yield


def warm_imports() -> None:
    """Import what each stack's first compile would import, so that the first calls time
    capture and compilation, not imports."""
    import torch._dynamo
    import torch._inductor.compile_fx  # noqa: F401

    import kiln.aotgrad
    import kiln.inductor

    kiln.aotgrad.aot_compile  # noqa: B018  (loads the module on first use)
    kiln.inductor.aten_compiler  # noqa: B018


@contextmanager
def count_code(variant: Variant) -> Iterator[CodeCounts | None]:
    """The code ``variant`` generates during the block (filled in when it ends); None for a
    variant that generates none."""
    if not variant.generates_code:
        yield None
        return
    counting = _count_kiln if variant.stack == "kiln" else _count_torch
    with counting() as counts:
        yield counts


@contextmanager
def _count_kiln() -> Iterator[CodeCounts]:
    import kiln.inductor

    counts = CodeCounts()
    factory = kiln.inductor.aten_compiler

    def counting_factory(*args: Any, **kwargs: Any) -> Callable[[Any], Callable[..., Any]]:
        compile_aten = factory(*args, **kwargs)

        def compiler(gm: Any) -> Callable[..., Any]:
            compiled = compile_aten(gm)
            graph = getattr(compiled, "compiled", None)  # None: the graph runs as generated Python
            if graph is not None:
                counts.graphs += 1
                counts.kernels += graph.kernels
                counts.externs += graph.externs
            return compiled

        return compiler

    kiln.inductor.aten_compiler = counting_factory
    try:
        yield counts
    finally:
        kiln.inductor.aten_compiler = factory


# a kernel's definition in torch Inductor's generated wrapper (C++ or Triton)
_TORCH_KERNEL = re.compile(r"^\w+ = async_compile\.(?:cpp_pybinding|cpp|triton)\(", re.MULTILINE)


@contextmanager
def _count_torch() -> Iterator[CodeCounts]:
    from unittest import mock

    from torch._dynamo.utils import counters
    from torch._inductor.graph import GraphLowering

    counts = CodeCounts()

    def save_output_code(code: str) -> None:  # each graph's wrapper, as it is generated
        counts.graphs += 1
        counts.kernels += len(_TORCH_KERNEL.findall(code))

    externs = counters["inductor"]["extern_calls"]
    # torch's hook for its own tests (torch._inductor.utils.run_and_get_code patches it too);
    # torch.compile's own kernel counter (metrics.generated_kernel_count) also counts the
    # scalar and vectorized variants of one C++ kernel
    with mock.patch.object(GraphLowering, "save_output_code", save_output_code):
        try:
            yield counts
        finally:
            counts.externs = counters["inductor"]["extern_calls"] - externs
