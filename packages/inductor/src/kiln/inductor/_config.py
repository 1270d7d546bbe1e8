"""``InductorConfig``: kiln.inductor's stage config, the fields ``kiln.compile``'s ``options``
may set as ``"inductor.<field>"`` (the umbrella builds it; ``compile_graph`` reads it).
Imports nothing heavy: the umbrella builds it at every ``kiln.compile``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["InductorConfig", "cache_root"]


@dataclass(frozen=True, slots=True)
class InductorConfig:
    """kiln.inductor's."""

    fuse: bool = field(default=True, metadata={
        "help": "fuse buffers that share a loop into one kernel (False: one kernel per buffer, to "
                "bisect numerics)"})
    cudagraphs: bool = field(default=False, metadata={
        "help": "record each compiled graph of CUDA tensors into a CUDA graph per input shape set and replay "
                "it (one launch per call instead of one per kernel; kiln.compile's mode='reduce-overhead'). "
                "Inputs other than parameters are copied into static buffers and outputs copied out after "
                "each replay (an output stays valid whatever is called after it); a graph that cannot be "
                "recorded (a CPU tensor, a random op, an op waiting for the host) runs as plain launches, the "
                "reason logged once to kiln.perf_hints (the package README, 'CUDA graphs')"})
    cudagraph_max_shapes: int = field(default=8, metadata={
        "help": "with cudagraphs: the most input shape sets (sizes, strides, dtypes, number inputs) one compiled "
                "graph records; further ones run as plain launches (logged once)"})
    max_autotune: bool = field(default=False, metadata={
        "help": "measure each Triton kernel's launch configurations (block sizes, warps, pipeline stages "
                "of looped rows) at compile time on the real sizes, on scratch tensors, and keep the fastest; "
                "the choice is kept in <cache_dir>/autotune (keyed by the kernel's source, the sizes, the GPU "
                "and triton's version), so no later compile measures it again. Under TRITON_INTERPRET=1 each "
                "candidate runs once and is checked instead. With it, matrix products may become Triton "
                "template kernels with their pointwise readers fused (matmul_templates). False: the sizes' "
                "heuristic launch, and matrix products are ATen calls"})
    matmul_templates: str = field(default="auto", metadata={
        "choices": ("auto", "always", "never"),
        "help": "with max_autotune: mm, addmm and bmm of float32/bfloat16/float16 CUDA tensors as Triton template "
                "kernels (tiles of tl.dot) with the pointwise ops reading their result fused in: 'auto' where "
                "the template, its tiles measured, is faster than the vendor library's (cuBLAS) on the example "
                "sizes (the choice kept in <cache_dir>/autotune; under TRITON_INTERPRET=1, where nothing can "
                "be timed, always), 'always', 'never' (ATen calls)"})
    compile_threads: int = field(default=0, metadata={
        "help": "threads compiling a new graph's Triton kernels at once, before its first call "
                "(0: one per CPU, at most 8; 1: each kernel compiled by triton at its first launch, one after another)"})
    compile_processes: bool = field(default=False, metadata={
        "help": "worker processes (python -m kiln.inductor.triton._compile_worker, compile_threads of them, "
                "started when a graph on a CUDA device is first compiled, each warmed up by a first compile) "
                "share a new graph's Triton kernels with this process's threads: a ready worker compiles one into "
                "triton's cache, which the threads then load from, while the threads compile others themselves "
                "(nothing waits for a worker still starting). Off by default until this sharing is measured and "
                "tested on a GPU. False: the threads of this process compile them all"})
    cache_dir: str = field(default="", metadata={
        "help": "where compiled kernels and graphs are kept across processes; empty: $KILN_CACHE_DIR, "
                "else ~/.cache/kiln"})
    graph_cache: bool = field(default=True, metadata={
        "help": "keep whole compiled graphs (wrapper and kernel source) in the cache directory, keyed "
                "by a hash of the ATen graph, so that a new process skips lowering and code generation "
                "for graphs compiled before (False: only kernel libraries are kept)"})
    layout_optimization: bool = field(default=True, metadata={
        "help": "run 2-D convolutions (forward and backward) channels-last where it pays (4-D float "
                "CPU tensors of static sizes with enough channels; FusionPolicy's rule), and store the "
                "values between them channels-last; the graph's outputs keep eager's strides (False: "
                "every buffer in eager's layout)"})
    cpu_backend: str = field(default="cpp", metadata={
        "choices": ("cpp", "triton"),
        "help": "the code generator for CPU tensors: 'cpp' (C++ with OpenMP), or 'triton' (the Triton kernels "
                "CUDA tensors get, run by triton's interpreter: TRITON_INTERPRET=1; for testing the Triton code "
                "generator without a GPU)"})
    random_in_kernels: bool = field(default=False, metadata={
        "help": "compute random ops (rand, randn and their _like forms, bernoulli, dropout) inside the "
                "kernels, C++ and Triton alike, fused with their neighbours, from a counter-based generator "
                "(Philox4x32-10) seeded once per graph call from torch's default generator: reproducible under "
                "torch.manual_seed, the same numbers on CPU and CUDA tensors for one seed (uniform numbers and "
                "masks bit for bit, normal ones to the rounding of log and cos), but other numbers than eager's "
                "(False: they are ATen calls, with eager's numbers, like torch's fallback_random)"})


def cache_root(config: InductorConfig) -> Path:
    """The cache directory of ``config``: its ``cache_dir``, else ``$KILN_CACHE_DIR`` (read at
    each call), else ``~/.cache/kiln``."""
    if config.cache_dir:
        return Path(config.cache_dir)
    env = os.environ.get("KILN_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "kiln"
