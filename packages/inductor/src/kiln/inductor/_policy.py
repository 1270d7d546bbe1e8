"""``FusionPolicy``: the numbers behind the lowering's and the scheduler's choices, as data
(one object, passed explicitly; no heuristic is buried in the passes)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FusionPolicy"]


@dataclass(frozen=True, slots=True)
class FusionPolicy:
    fuse: bool = field(default=True, metadata={
        "help": "put buffers with the same outer loop into one kernel (False: one kernel per buffer, "
                "to bisect numerics)"})
    inline_max_ops: int = field(default=4, metadata={
        "help": "a pointwise value read by several nodes is recomputed in each while it costs at most "
                "this many operations per element; above, it is computed once into a buffer"})
    realize_ops: int = field(default=64, metadata={
        "help": "a value whose expression grew past this many operations is computed into a buffer"})
    parallel_min_elements: int = field(default=32768, metadata={
        "help": "a kernel's outer loop runs on several threads when it touches at least this many elements"})
    layout_optimization: bool = field(default=True, metadata={
        "help": "run 2-D convolutions and their gradients channels-last where the rule below admits them, "
                "with the values between them stored channels-last (``_layout``; InductorConfig."
                "layout_optimization)"})
    channels_last_min_channels: int = field(default=8, metadata={
        "help": "a convolution runs channels-last only when its input or output has at least this many "
                "channels: measured here (oneDNN, 1 thread), 1->1, 1->4 and 2->2 channels are 5-25% slower "
                "forward channels-last, 1->16, 2->16 and 3->32 are 1.4-7x faster, backward always faster"})
    channels_last_dtypes: tuple[str, ...] = field(default=("float32", "bfloat16", "float16"), metadata={
        "help": "the dtypes a convolution runs channels-last in (float64 is slower so: ATen's own kernels, "
                "not oneDNN's)"})
    random_in_kernels: bool = field(default=False, metadata={
        "help": "random ops are computed in the kernels from the graph call's seed (``_lower_random``); "
                "False: they are ATen calls (InductorConfig.random_in_kernels)"})
    seeds_in_memory: bool = field(default=False, metadata={
        "help": "Triton kernels of random ops load the seed from device memory (``_ir.SEED_PTR``) rather "
                "than take it as an argument: under CUDA graphs, whose replays keep a launch's arguments"})
    triton_persistent_max: int = field(default=32768, metadata={
        "help": "a Triton kernel whose stages' inner ranges are known sizes of at most this many elements "
                "holds a whole row in registers (one pass over memory for a softmax or a norm); above, or for "
                "symbolic sizes, its stages loop over blocks of the row"})
    triton_scan_persistent_max: int = field(default=1024, metadata={
        "help": "a Triton scan (cumsum, cumprod) whose row is a known size of at most this many elements scans "
                "the row as one block; longer rows, or symbolic ones, loop over blocks carrying the fold of "
                "the elements before (one pass over memory either way)"})
    cpu_backend: str = field(default="cpp", metadata={
        "help": "the code generator for CPU tensors: 'cpp', or 'triton' (Triton's interpreter, "
                "TRITON_INTERPRET=1: how CI tests the Triton code generator without a GPU)"})
    matmul_templates: str = field(default="off", metadata={
        "help": "mm/addmm/bmm of Triton tensors as template kernels (``_ir.Matmul``) with their pointwise "
                "readers fused as epilogues: 'off' (ATen calls), 'auto' (where the compile's measurement "
                "says the template is faster than the vendor library; max-autotune), 'always'"})
