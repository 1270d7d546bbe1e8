"""kiln.inductor: Lowering ATen graphs to loop-level IR, fusion, memory planning, Triton and C++ codegen, kernel cache, autotuning, CUDA graphs. (not built yet)."""

__version__ = "0.1.0"
__all__: list[str] = []
