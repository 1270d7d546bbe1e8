"""What a backend needs of kiln.inductor: ``aten_compiler(config)``, the compiler aotgrad
calls on each forward and backward ATen graph, and ``decompositions()``, the table aotgrad
traces with (torch's core ATen map, less the ops inductor lowers whole or calls as ATen)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from ._compile import compile_graph
from ._config import InductorConfig
from ._cudagraphs import CudagraphGroup
from ._graph import InductorUnsupported

__all__ = ["aten_compiler", "backend", "decompositions"]

aten = torch.ops.aten
_log = logging.getLogger("kiln")

# lowered whole (one kernel where torch's decomposition would give several) or an ATen call;
# channel_shuffle: traced through its decomposition, its output was taken for a view of the
# input (a wrong answer; see the closing note of the session that found it)
# attention stays one ATen call (faster, and its decomposition's layout differs from eager's);
# index_add: its decomposition (an index_put) raises another error than eager's for a bad index
_KEEP = (aten.var_mean, aten.var, aten.logsumexp, aten.baddbmm, aten.addmm, aten.index_add, aten.channel_shuffle,
         aten.native_channel_shuffle, aten.scaled_dot_product_attention, aten._scaled_dot_product_attention_math,
         aten._scaled_dot_product_flash_attention_for_cpu)


# composite in torch's full table but not in its core ATen one: decomposed into ops inductor
# lowers (batch norm in evaluation and training, and its backward: pointwise ops and
# per-channel reductions), where an ATen call would be one more pass over the activations
_MORE = (aten._native_batch_norm_legit_no_training.default, aten._native_batch_norm_legit.default,
         aten._native_batch_norm_legit.no_stats, aten._native_batch_norm_legit_functional.default,
         aten.native_batch_norm.default, aten.native_batch_norm_backward.default,
         aten._batch_norm_with_update.default, aten._batch_norm_with_update_functional.default,
         aten.batch_norm_backward.default)


def decompositions() -> dict[Any, Callable[..., Any]]:
    from torch._decomp import get_decompositions

    from kiln.aotgrad import core_aten_decompositions

    return {**core_aten_decompositions(keep=_KEEP), **get_decompositions(list(_MORE))}


def aten_compiler(config: InductorConfig | None = None,
                  builders: dict[str, Any] | None = None) -> Callable[[Any], Callable[..., Any]]:
    """``compiler(gm)``: the compiled callable of an ATen graph, taking one list of inputs
    (``boxed_call``); ``.compiled`` holds the ``CompiledGraph`` (its code, kernel counts).
    ``builders``: the kernel libraries loaded so far, by cache directory (kiln's Session's);
    without it the compiler keeps its own. One compiler serves one captured graph: its
    forward's and backward's CUDA graph runners form one group (``_cudagraph_lend``)."""
    builders = {} if builders is None else builders
    group = CudagraphGroup()  # the forward's and backward's runners of the graph this compiler serves

    def compiler(gm: Any) -> Callable[..., Any]:
        try:
            compiled = compile_graph(gm, config, builders, group)
        except InductorUnsupported as e:
            _log.warning("kiln.inductor does not take this ATen graph (%s); it runs as generated Python", e)
            return gm.forward
        call = compiled.call  # a new function per graph: its attributes are its own
        call.boxed_call = True  # type: ignore[attr-defined]
        call.compiled = compiled  # type: ignore[attr-defined]
        # the strides of outputs returned in a layout other than traced (kiln.aotgrad gives the
        # backward's inputs these strides)
        call.output_strides = compiled.output_strides  # type: ignore[attr-defined]
        return call

    return compiler


def backend(gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
    """kiln's backend behind torch's own frontend: ``torch.compile(model, backend=
    kiln.inductor.backend)``. torch.fx graph → kiln.fxgraph → kiln.aotgrad → kiln.inductor, for
    the example inputs' sizes (torch recompiles for others); inputs that are not plain
    tensors or numbers (torch's symbolic sizes) run the graph as torch gave it."""
    from kiln.aotgrad import aot_compile
    from kiln.fxgraph.torch_fx import from_torch_fx

    def plain(x: Any) -> bool:
        return (type(x) is torch.Tensor or isinstance(x, torch.nn.Parameter)) or type(x) in (int, float, bool)

    if not all(plain(x) for x in example_inputs):
        _log.warning("kiln.inductor.backend: symbolic or fake example inputs; the graph runs as torch gave it")
        return gm.forward
    compiler = aten_compiler()
    compiled = aot_compile(from_torch_fx(gm), list(example_inputs), None, fw_compiler=compiler,
                           bw_compiler=compiler, decompositions=decompositions())

    def run(*args: Any) -> Any:
        return compiled(*args)

    return run
