"""kiln.fxgraph: The graph IR: Graph, Node, GraphModule, Python codegen, Interpreter/Transformer, passes (DCE, CSE, lint), torch.fx interop. (not built yet)."""

__version__ = "0.1.0"
__all__: list[str] = []
