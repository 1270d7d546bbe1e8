"""TensorVariable: a tensor in the graph, with its fake value for metadata.

A tensor tracker pairs the graph node that computes the tensor with a fake tensor (from
kiln.symshapes) holding its dtype, device, sizes, strides and requires_grad. Metadata
queries (``x.shape``, ``x.dim()``, ``x.dtype``) are answered from the fake at trace time —
the tensor-match guards on the inputs make those answers stable. Everything else
(``x.view(...)``, ``x + y``) becomes a graph node whose fake result is computed by running
the op on fake tensors.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from .._unsupported import MissingAttribute, Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable
from ._containers import TupleVariable

if TYPE_CHECKING:
    from kiln.fxgraph import Node
    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["TensorVariable"]

# Attributes answered from the fake tensor at trace time.
_METADATA_ATTRS = frozenset({
    "dtype", "device", "layout", "requires_grad", "is_cuda", "is_cpu", "is_meta",
    "is_sparse", "is_quantized", "is_leaf", "ndim", "is_nested", "itemsize",
})
# Methods answered from the fake tensor at trace time when their arguments are constants.
_METADATA_METHODS = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous",
    "is_floating_point", "is_complex", "element_size", "get_device", "storage_offset",
})
# Metadata whose symbolic answer stays a number the graph computes, even when it depends on
# data (the others, ``is_contiguous()`` of a tensor of data-dependent size, break)
_NUMBER_METADATA = frozenset({"size", "stride", "numel", "nelement", "storage_offset"})
# Methods that would need the tensor's data at trace time.
# methods acting on the autograd engine's state of the tensor object (a graph break each)
_AUTOGRAD_METHODS = frozenset({"backward", "retain_grad", "register_hook", "register_post_accumulate_grad_hook"})
_DATA_METHODS = frozenset({"numpy", "__bool__", "__int__", "__float__", "__index__"})


class TensorVariable(VariableTracker):
    """A graph tensor; see the module docstring."""

    __slots__ = ("fake", "node", "pytype")

    def __init__(self, node: Node, fake: Any, source: Source | None = None,
                 pytype: type | None = None) -> None:
        super().__init__(source)
        self.node = node
        self.fake = fake
        import torch

        self.pytype = pytype or torch.Tensor

    def python_type(self) -> type:
        return self.pytype

    def describe(self) -> str:
        where = str(self.source) if self.source is not None else f"%{self.node.name}"
        return f"tensor {where}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        fake = self.fake
        if name in _METADATA_ATTRS:
            return ConstantVariable(getattr(fake, name))
        if name == "shape":
            return self._metadata(tx, "size", (), fake.shape)
        if name in ("T", "mT", "H", "mH", "real", "imag", "data"):
            # tensor-valued properties: a ``getattr`` node (rendered ``x.T``)
            return tx.output.call_function(getattr, [self, ConstantVariable(name)], {})
        if name == "grad":
            raise Unsupported(f"reading .grad of {self.describe()} inside a compiled region")
        if name == "_base":
            return self._base(tx)
        if name == "__class__":
            return ConstantVariable(self.pytype)
        if not hasattr(type(fake), name):
            from ._tensor_attributes import read_set_attribute

            found_attr = read_set_attribute(tx, self, name)
            if found_attr is not None:
                return found_attr
            self._instance_attribute(tx, name)
        found = next((k.__dict__[name] for k in type(fake).__mro__ if name in k.__dict__), None)
        if found is None or inspect.isdatadescriptor(found):
            # a value, not a method (grad_fn, _version, names, ...): not modelled
            raise Unsupported(f"reading attribute {name!r} of {self.describe()}")
        return TensorMethodVariable(self, name)

    def _base(self, tx: Translator) -> VariableTracker:
        """``x._base``: the tensor a view was made from, when the trace made it (a view made
        from a graph input has the caller's base, which the trace does not know)."""
        from .._torch_internals import view_base

        base = view_base(self.fake)
        root = tx.output.tensors.get(id(base if base is not None else self.fake))
        if root is None or root.node.op == "placeholder":
            raise Unsupported(f"reading ._base of {self.describe()}, which may be a view of a tensor "
                              "made outside the compiled region")
        return ConstantVariable(None) if base is None else root

    def _instance_attribute(self, tx: Translator, name: str) -> None:
        # Not a Tensor attribute: an attribute set on this very tensor is not traced; one
        # that is nowhere is missing (so ``hasattr`` answers False).
        output = tx.output
        if self.source is not None and output.is_input(self.source):
            from kiln.guards import AttrSource, KeyAbsent

            # "missing" holds while nobody sets it on this tensor
            output.guards.add(KeyAbsent(AttrSource(self.source, "__dict__"), name))
        raise MissingAttribute(f"{self.describe()} has no attribute {name!r}")

    def store_attr(self, tx: Translator, name: str, value: VariableTracker) -> None:
        from ._tensor_attributes import store_tensor_attribute

        store_tensor_attribute(tx, self, name, value)

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name == "type":
            from ._tensor_attributes import tensor_type

            return tensor_type(tx, self, args, kwargs)
        if name == "numpy":  # an ndarray over this very tensor (variables._numpy)
            from ._numpy import tensor_to_numpy

            return tensor_to_numpy(tx, self, args, kwargs)
        if name in ("item", "tolist") and not args and not kwargs and tx.output.scalar_outputs:
            if name == "tolist":
                return self._tolist(tx)
            # a number the graph computes (an unbacked symbol: no value at trace time)
            tx.output.made_scalar_outputs = True
            return tx.output.call_method("item", [self], {})
        if name in _AUTOGRAD_METHODS:
            # the autograd engine's state of this tensor object (its .grad, its hooks): a
            # recorded op would change the graph's own traced tensor, not the user's
            raise Unsupported(f"{self.describe()}.{name}() acts on the autograd engine's state: it runs eagerly")
        if name in _DATA_METHODS or name in ("item", "tolist"):
            raise Unsupported(
                f"{self.describe()}.{name}() needs the tensor's data at trace time "
                "(a data-dependent operation)"
            )
        if name in _METADATA_METHODS and all(a.is_constant() for a in [*args, *kwargs.values()]):
            consts = [a.as_constant() for a in args]
            value = getattr(self.fake, name)(*consts, **{k: v.as_constant() for k, v in kwargs.items()})
            if kwargs and not _is_concrete(value):
                _require_concrete(value, f"{self.describe()}.{name}()")
            return self._metadata(tx, name, tuple(consts), value)
        return tx.output.call_method(name, [self, *args], kwargs)

    def _tolist(self, tx: Translator) -> VariableTracker:
        """``t.tolist()`` of a tensor of static shape: nested lists of ``.item()`` numbers."""
        import operator

        from ._containers import ListVariable

        if self.fake.dim() == 0:
            return self.call_method(tx, "item", [], {})
        n = self.fake.shape[0]
        if type(n) is not int:
            raise Unsupported(f"{self.describe()}.tolist() of a tensor of symbolic length")
        rows = [tx.output.call_function(operator.getitem, [self, ConstantVariable(i)], {}) for i in range(n)]
        return ListVariable([row._tolist(tx) for row in rows])

    def _metadata(self, tx: Translator, method: str, args: tuple, value: Any) -> VariableTracker:
        """A metadata answer: constants where the fake's are ints; a symbolic size, stride or
        numel of a dynamic tensor, or one that depends on data (a ``nonzero`` result's),
        becomes a number the graph computes (``x.size(0)``), one per dimension for a whole
        ``size()``/``stride()``."""
        if _is_concrete(value):
            return _size_variable(value) if isinstance(value, tuple) else ConstantVariable(value)
        if method not in _NUMBER_METADATA:
            _require_backed(value, f"{self.describe()}.{method}()")
        if isinstance(value, tuple):
            import torch

            items = [ConstantVariable(v) if type(v) is int
                     else tx.output.metadata_number(self, method, (d,), v) for d, v in enumerate(value)]
            return TupleVariable(items, tuple_type=torch.Size if isinstance(value, torch.Size) else tuple)
        return tx.output.metadata_number(self, method, args, value)

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        if self.fake.dim() == 0:
            raise Unsupported(f"iterating over a 0-d {self.describe()}")
        n = self.fake.shape[0]
        if not isinstance(n, int):
            _require_backed(n, f"iterating over {self.describe()}")
            n = int(n)  # unrolled for this length: a shape guard
        import operator

        return [tx.output.call_function(operator.getitem, [self, ConstantVariable(i)], {})
                for i in range(n)]

    def truth(self, tx: Translator) -> bool:
        raise Unsupported(
            f"the truth value of {self.describe()} depends on its data "
            "(a data-dependent branch)"
        )


class TensorMethodVariable(VariableTracker):
    """``x.view`` before it is called (a bound tensor method)."""

    __slots__ = ("name", "tensor")

    def __init__(self, tensor: TensorVariable, name: str) -> None:
        super().__init__(None)
        self.tensor = tensor
        self.name = name

    def describe(self) -> str:
        return f"method {self.name} of {self.tensor.describe()}"

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return self.tensor.call_method(tx, self.name, args, kwargs)


def _require_concrete(value: Any, what: str) -> None:
    """A size, stride or flag that depends on tensor data (an unbacked symbol from nonzero,
    boolean indexing, an ``.item()`` size, ...) cannot become a trace-time constant: the
    graph would hold a symbol and fail, or be wrong, when it runs. Break there instead."""
    items = value if isinstance(value, tuple) else (value,)
    if not all(isinstance(v, (int, bool, float)) for v in items):
        raise Unsupported(f"{what} depends on tensor data (a data-dependent size)")


def _is_concrete(value: Any) -> bool:
    items = value if isinstance(value, tuple) else (value,)
    return all(isinstance(v, (int, bool, float)) for v in items)


def _require_backed(value: Any, what: str) -> None:
    """Symbolic values of dynamic tensors have an example value (a hint); a data-dependent
    size (an unbacked symbol) does not: break there (see ``_require_concrete``)."""
    from kiln.symshapes.bridge import from_torch

    items = value if isinstance(value, tuple) else (value,)
    for v in items:
        if isinstance(v, (int, bool, float)):
            continue
        sym = from_torch(v)
        if sym.env.size_hint(sym.expr) is None:
            raise Unsupported(f"{what} depends on tensor data (a data-dependent size)")


def _size_variable(size: Any) -> VariableTracker:
    import torch

    if all(isinstance(s, int) for s in size):
        return ConstantVariable(torch.Size(size) if isinstance(size, torch.Size) else tuple(size))
    return TupleVariable([ConstantVariable(s) for s in size],
                         tuple_type=torch.Size if isinstance(size, torch.Size) else tuple)
