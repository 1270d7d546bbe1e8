"""``compile_graph``: an ATen graph (aotgrad's forward or backward) to the callable that
runs it as C++ kernels and ATen calls. The pipeline, in order:

1. ``lower_graph``: ATen nodes to loop-level buffers (``_graph``);
2. ``schedule``: buffers to kernels and ATen calls (``_scheduler``);
3. ``render_kernel``: each kernel to a C++ function, all in one translation unit
   (``cpp._kernel``), built and loaded through the disk cache (``cpp._build``);
4. ``render_wrapper``: the Python function calling them (``_wrapper``).

``KILN_LOGS=output_code`` logs the wrapper and the C++ source of every graph.
"""

from __future__ import annotations

import ctypes
import linecache
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln.fxgraph import GraphModule

from ._config import InductorConfig
from ._graph import InductorUnsupported, lower_graph
from ._policy import FusionPolicy
from ._scheduler import Kernel, schedule
from ._wrapper import render_wrapper
from .cpp import HEADER, render_kernel
from .cpp._build import CppBuilder

__all__ = ["CompiledGraph", "InductorUnsupported", "cache_root", "compile_graph"]

_code_log = logging.getLogger("kiln.output_code")


def cache_root(config: InductorConfig) -> Path:
    if config.cache_dir:
        return Path(config.cache_dir)
    env = os.environ.get("KILN_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "kiln"


def _builder(config: InductorConfig, builders: dict[str, Any]) -> CppBuilder:
    """The builder of ``config``'s cache directory in ``builders`` (the caller's: kiln's
    Session keeps one map per process state), made on first use."""
    root = str(cache_root(config))
    builder = builders.get(root)
    if builder is None:
        builder = builders[root] = CppBuilder(root)
    return builder


@dataclass(slots=True)
class CompiledGraph:
    """The compiled callable (``call(args)``: a list it empties) and what it is made of."""

    call: Callable[[list[Any]], tuple]
    wrapper_code: str
    cpp_code: str
    kernels: int
    externs: int
    fallbacks: dict[str, str]


_ARGTYPES = {"in": ctypes.c_void_p, "out": ctypes.c_void_p, "size": ctypes.c_int64}


def compile_graph(gm: GraphModule, config: InductorConfig | None = None,
                  builders: dict[str, Any] | None = None) -> CompiledGraph:
    """Compile the ATen graph ``gm`` (placeholders carry ``meta["val"]``: fake tensors with
    the traced sizes and strides) for CPU tensors. ``builders``: the kernel libraries loaded
    so far, by cache directory (kiln's Session's; without it, the disk cache only)."""
    config = config or InductorConfig()
    policy = FusionPolicy(fuse=config.fuse)
    graph = lower_graph(gm, policy)
    steps = schedule(graph, policy)
    dtypes = {b.name: b.dtype for b in graph.buffers}
    sources = [render_kernel(s, policy, dtypes) for s in steps if isinstance(s, Kernel)]
    cpp_code = HEADER + "".join(f"\n{k.code}\n" for k in sources) if sources else ""
    functions: dict[str, Any] = {}
    if sources:
        library = _builder(config, builders if builders is not None else {}).load(cpp_code)
        for k in sources:
            argtypes = [_ARGTYPES[p.kind] for p in k.params] + [ctypes.c_int64]
            functions[k.name] = library.function(k.name, argtypes)
    wrapper = render_wrapper(graph, steps, functions, {k.name: k.params for k in sources})
    filename = f"<kiln.inductor wrapper {abs(hash(wrapper.code)):x}>"
    linecache.cache[filename] = (len(wrapper.code), None, wrapper.code.splitlines(True), filename)
    namespace = dict(wrapper.globals)
    exec(compile(wrapper.code, filename, "exec"), namespace)
    if _code_log.isEnabledFor(logging.INFO):
        _code_log.info("wrapper:\n%s\nkernels:\n%s", wrapper.code, cpp_code or "(none)")
    return CompiledGraph(namespace["call"], wrapper.code, cpp_code, len(sources),
                         sum(1 for s in steps if not isinstance(s, Kernel)), graph.fallbacks)
