"""``compile_graph``: an ATen graph (aotgrad's forward or backward) to the callable that
runs it as C++ kernels and ATen calls. The pipeline, in order:

1. ``lower_graph``: ATen nodes to loop-level buffers (``_graph``);
2. ``schedule``: buffers to kernels and ATen calls (``_scheduler``), then stages that can
   write in place of a buffer dying at their kernel do (``_inplace``);
3. ``render_kernel``: each kernel to a C++ function, all in one translation unit
   (``cpp._kernel``), built and loaded through the disk cache (``cpp._build``);
4. with ``config.max_autotune``, each Triton kernel's launch measured among candidates
   (``triton._autotune``), and in step 1 matrix products made template kernels where
   measured faster than the vendor library (``triton._template_choice``);
5. ``render_wrapper``: the Python function calling them (``_wrapper``);
6. with ``config.cudagraphs``, that function replayed from CUDA graphs (``_cudagraphs``),
   where the graph's facts (``_cudagraph_plan.cudagraph_facts``, found before step 1) allow.

With ``config.graph_cache``, the graph's cache key (``_graph_cache.graph_key``) is looked up
first: a graph compiled before, by this process or another, is rebuilt from its record
(wrapper and C++ source; the library from the kernel cache) without steps 1 to 5, and a
graph compiled here is recorded.

``KILN_LOGS=output_code`` logs the wrapper and the C++ source of every graph.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from kiln.fxgraph import GraphModule

from ._config import InductorConfig, cache_root
from ._cudagraph_plan import cudagraph_facts
from ._cudagraphs import CudagraphGroup, with_cudagraphs
from ._entries import EntryStore
from ._graph import InductorUnsupported, LoweredGraph, lower_graph, shape_env
from ._graph_cache import (
    CompiledGraph,
    bind_libraries,
    builder_of,
    exec_wrapper,
    graph_key,
    kernel_params,
    load_compiled,
    seed_launches,
    seeds_in_memory,
    store_compiled,
    triton_functions,
)
from ._inplace import take_dead_buffers
from ._layout import changed_strides
from ._lower_random import SEED_CELL
from ._policy import FusionPolicy
from ._scheduler import Kernel, schedule
from ._twins import twins
from ._wrapper import render_wrapper, reusable_buffers
from .cpp import HEADER, render_kernel
from .cpp._libraries import build_jobs, split_kernels
from .triton import render_kernel as render_triton
from .triton._runtime import interpreting, module_source

__all__ = ["CompiledGraph", "InductorUnsupported", "cache_root", "compile_graph", "start_compile_workers"]

_code_log = logging.getLogger("kiln.output_code")
_log = logging.getLogger("kiln")


def compile_graph(gm: GraphModule, config: InductorConfig | None = None,
                  builders: dict[str, Any] | None = None, group: CudagraphGroup | None = None) -> CompiledGraph:
    """Compile the ATen graph ``gm`` (placeholders carry ``meta["val"]``: fake tensors with
    the traced sizes and strides), or load it from the whole-graph cache
    (``config.graph_cache``). ``builders``: the kernel libraries loaded so far, by cache
    directory (kiln's Session's; without it, the disk cache only). ``group``: under
    ``config.cudagraphs``, the CUDA graph runners of the same captured graph (its forward's
    and backward's: ``_cudagraph_lend``)."""
    config = config or InductorConfig()
    builders = builders if builders is not None else {}
    key = graph_key(gm, config) if config.graph_cache else None
    if key is not None:
        cached = load_compiled(key, config, builders, group)
        if cached is not None:
            return cached
    facts = cudagraph_facts(gm)  # before the lowering, which may rewrite gm
    start_compile_workers(config, _placeholder_values(gm))  # they start triton while the graph is lowered
    templates = "off" if not config.max_autotune or config.matmul_templates == "never" else config.matmul_templates
    policy = FusionPolicy(fuse=config.fuse, random_in_kernels=config.random_in_kernels,
                          layout_optimization=config.layout_optimization, cpu_backend=config.cpu_backend,
                          matmul_templates=templates)
    graph = lower_graph(gm, policy, _matmul_chooser(gm, config) if templates == "auto" else None)
    steps = schedule(graph, policy)
    take_dead_buffers(graph, steps, reusable_buffers(graph, steps))
    dtypes = {b.name: b.dtype for b in graph.buffers}
    kernels = [s for s in steps if isinstance(s, Kernel)]
    if seeds_in_memory(config) and len({k.device for k in kernels if _language(k, policy) == "triton"}) == 1:
        # under CUDA graphs the random kernels read the seed from memory (one tensor: one device;
        # a graph of several devices is never recorded)
        policy = dataclasses.replace(policy, seeds_in_memory=True)
    sources = [render_kernel(s, policy, dtypes) for s in kernels if _language(s, policy) == "cpp"]
    launches = {s.name: render_triton(s, policy, dtypes) for s in kernels if _language(s, policy) == "triton"}
    _unallocate(kernels, launches)
    # one function per program (``_twins``): a kernel with an earlier twin is not compiled
    twin_of = {**twins({k.name: k.code for k in sources}, "//"),
               **twins({name: launch.code for name, launch in launches.items()}, "#")}
    unique_sources = [k for k in sources if k.name not in twin_of]
    unique_launches = {name: launch for name, launch in launches.items() if name not in twin_of}
    if twin_of:
        _log.debug("kiln.inductor: %d kernels compiled as %d functions (twins: %s)", len(sources) + len(launches),
                   len(unique_sources) + len(unique_launches), ", ".join(f"{n} -> {t}" for n, t in twin_of.items()))
    # the C++ kernels in several libraries compiled at once (``cpp._libraries``)
    chunks = split_kernels(unique_sources, build_jobs())
    libraries = [HEADER + "".join(f"\n{k.code}\n" for k in chunk) for chunk in chunks]
    params = [kernel_params(chunk) for chunk in chunks]  # per library
    functions = bind_libraries(builder_of(config, builders).load_many(libraries), params) if libraries else {}
    triton_code = module_source([k.code for k in unique_launches.values()]) if launches else ""
    if launches:
        functions.update(triton_functions(triton_code, config))
    # every kernel's function by name (the record names only the functions compiled: ``functions``)
    called = {**functions, **{name: functions[twin] for name, twin in twin_of.items()}}
    tuned = _autotune(gm, graph, kernels, launches, called, twin_of, config) \
        if config.max_autotune and launches else []
    precompiled: dict[str, tuple[tuple, Any]] = {}
    if launches and config.compile_threads != 1 and not interpreting():
        precompiled = _precompile(gm, graph, kernels, launches, called, config)
    wrapper = render_wrapper(graph, steps, called,
                             {**{k.name: k.params for k in sources}, **{n: k.params for n, k in launches.items()}},
                             launches, twin_of)
    seed_launches(wrapper.globals, precompiled)
    call = exec_wrapper(wrapper.code, wrapper.globals)
    if _code_log.isEnabledFor(logging.INFO):
        _code_log.info("wrapper:\n%s\nkernels:\n%s", wrapper.code, ("".join(libraries) + triton_code) or "(none)")
    fused = {k.name: tuple(dict.fromkeys(o for s in k.stages for o in s.buffer.origins)) for k in kernels}
    compiled = CompiledGraph(call, wrapper.code, tuple(libraries), len(kernels),
                             sum(1 for s in steps if not isinstance(s, Kernel)), graph.fallbacks,
                             output_strides=changed_strides(gm, graph), triton_code=triton_code,
                             autotuned=tuned, cudagraph_facts=facts, fused=fused,
                             seed=wrapper.globals.get(SEED_CELL))
    if key is not None and store_compiled(key, compiled, wrapper.globals, functions, params, config,
                                          precompiled):
        compiled.cache_key = key
    return with_cudagraphs(compiled, config, group)


def _unallocate(kernels: list[Kernel], launches: dict[str, Any]) -> None:
    """Stages a Triton kernel kept in registers (``TritonKernel.registers``) become ``local``:
    the wrapper allocates nothing for them, unless a later buffer was planned into their
    memory (``take_dead_buffers``)."""
    taken = {st.buffer.storage for k in kernels for st in k.stages if st.buffer.storage}
    for kernel in kernels:
        launch = launches.get(kernel.name)
        if launch is None or not launch.registers:
            continue
        for stage in kernel.stages:
            name = stage.buffer.name
            if name in launch.registers and stage.buffer.storage is None and name not in taken:
                stage.local = True


def _language(kernel: Kernel, policy: FusionPolicy) -> str:
    """The code generator of ``kernel``: C++ for CPU tensors (unless ``policy.cpu_backend``
    says Triton), Triton for CUDA tensors."""
    if kernel.device == "cpu" and policy.cpu_backend == "cpp":
        return "cpp"
    if kernel.device == "cpu" and not interpreting():
        raise InductorUnsupported("inductor.cpu_backend='triton' runs Triton kernels on CPU tensors only in "
                                  "triton's interpreter: set TRITON_INTERPRET=1")
    return "triton"


def _autotune(gm: GraphModule, graph: LoweredGraph, kernels: list[Kernel], launches: dict[str, Any],
              functions: dict[str, Any], twin_of: dict[str, str], config: InductorConfig) -> list[Any]:
    """``config.max_autotune``: each Triton kernel's launch measured (``triton._autotune``),
    ``launches``' meta set to the fastest; what was done, per kernel. A kernel whose
    measuring fails keeps its heuristic launch (logged), never breaks the compile. A twin
    (``twin_of``: the same program, the same launch sizes) takes its first's launch unmeasured."""
    from .triton._autotune import size_hint, tune

    store = EntryStore(cache_root(config), "autotune")
    hint = size_hint(shape_env(gm))
    buffers = {b.name: b for b in graph.buffers}
    devices = {k.name: k.device for k in kernels}
    results = []
    for name, launch in launches.items():
        heuristic = dict(launch.meta)
        first = launches.get(twin_of.get(name, ""))
        if first is not None and _same_launch_sizes(launch, first):
            launch.meta = dict(first.meta)
            continue
        try:
            result = tune(launch, functions[name], devices[name], buffers, hint, store)
        except Exception:  # an error of kiln's: the heuristic's launch is as correct
            launch.meta = heuristic
            _log.warning("kiln.inductor: autotuning %s failed; it keeps the heuristic launch", name, exc_info=True)
            continue
        if result is not None:
            results.append(result)
    return results


def _same_launch_sizes(a: Any, b: Any) -> bool:
    """Whether Triton kernels ``a`` and ``b`` launch over the same sizes (their candidates,
    and so their measured launch, are the same)."""
    return (a.shape, a.xnumel, a.width, a.tiles, a.columns, a.dot_dtype) == \
        (b.shape, b.xnumel, b.width, b.tiles, b.columns, b.dot_dtype)


def _matmul_chooser(gm: GraphModule, config: InductorConfig) -> Any:
    """``matmul_templates='auto'``: whether a product becomes a template kernel, measured
    against the vendor library on its device (``triton._template_choice``); a measurement
    that fails keeps the ATen call (logged)."""
    from .triton._autotune import size_hint
    from .triton._template_choice import template_wins

    store = EntryStore(cache_root(config), "autotune")
    hint = size_hint(shape_env(gm))

    def choose(body: Any, sizes: Any, dtype: Any, device: str, epilogue: bool) -> bool:
        try:
            return template_wins(body, sizes, dtype, device, hint, store, config, epilogue)
        except Exception:  # an error of kiln's: the ATen call is as correct
            _log.warning("kiln.inductor: measuring a matmul template failed; the product stays an ATen call",
                         exc_info=True)
            return False

    return choose


def start_compile_workers(config: InductorConfig, inputs: Iterable[Any]) -> None:
    """Start the Triton compile workers (``triton._compile_pool``) for the device of the first
    CUDA tensor among ``inputs`` (a graph's example inputs), if the config has them and an
    input is one; already started, nothing more is done."""
    if not config.compile_processes or config.compile_threads == 1 or interpreting():
        return
    device = next((v.device for v in inputs if isinstance(v, torch.Tensor) and v.device.type == "cuda"), None)
    if device is None:
        return
    from .triton._precompile import start_workers

    try:
        start_workers(config.compile_threads or None,
                      device.index if device.index is not None else torch.cuda.current_device())
    except Exception:  # compiled in this process instead
        _log.warning("kiln.inductor: starting the Triton compile workers failed", exc_info=True)


def _placeholder_values(gm: GraphModule) -> Iterator[Any]:
    """The example values of ``gm``'s inputs (``meta["val"]``; a list's items), read only as
    far as the caller goes (none where the workers are off)."""
    for node in gm.graph.find_nodes("placeholder"):
        val = node.meta.get("val")
        yield from val if isinstance(val, (list, tuple)) else (val,)


def _precompile(gm: GraphModule, graph: LoweredGraph, kernels: list[Kernel], launches: dict[str, Any],
                functions: dict[str, Any], config: InductorConfig) -> dict[str, tuple[tuple, Any]]:
    """The Triton kernels compiled for the first call, in parallel (``triton._precompile``):
    by name, the ``Launch`` key of the first call's arguments and the loaded kernel. A failure
    here leaves each kernel to compile at its launch, never breaks the compile."""
    from .triton._autotune import size_hint
    from .triton._precompile import precompile

    try:
        seconds, compiled = precompile(launches, functions, {k.name: k.device for k in kernels},
                                       {b.name: b for b in graph.buffers}, size_hint(shape_env(gm)),
                                       config.compile_threads or None, config.compile_processes)
    except Exception:
        _log.warning("kiln.inductor: compiling the Triton kernels ahead failed; each compiles at its launch",
                     exc_info=True)
        return {}
    _log.debug("kiln.inductor: %d Triton kernels compiled ahead in %.2f s", len(launches), seconds)
    return compiled
