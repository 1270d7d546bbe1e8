"""Python attributes of traced tensors and the tensor methods answered without the graph.

A tensor is a Python object: code sets attributes on it (``t.tag = "x"``) and reads them
back. A store is an attribute write of the trace (``OutputGraph.store_attribute``): later
reads in the trace see the stored tracker, and the store is replayed on the real tensor
after the graph runs, on the frame's tensor (an input) or on the graph's output (a tensor
the trace made; it becomes an output so that the attribute exists where eager has it). An
attribute an input tensor already had when the frame was called is read through its source
(``L['x'].tag``), so its value is guarded like any other value of the frame.

Only attributes Tensor does not define are stored this way: ``t.grad = ...``, ``t.data =
...`` and other Tensor properties change the tensor itself and are not modelled.

``t.type()`` is the type string eager gives (``'torch.FloatTensor'``), known from the
fake's dtype and device; ``t.type(torch.HalfTensor)`` / ``t.type(torch.float16)`` /
``t.type("torch.HalfTensor")`` become a ``to(dtype)`` node (a no-op for the same dtype, as in
eager).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._constant import ConstantVariable

if TYPE_CHECKING:
    from .._translator import Translator
    from ._base import VariableTracker
    from ._tensor import TensorVariable

__all__ = ["read_set_attribute", "store_tensor_attribute", "tensor_type"]


def store_tensor_attribute(tx: Translator, tensor: TensorVariable, name: str, value: VariableTracker) -> None:
    """``tensor.name = value`` for an attribute Tensor does not define."""
    if any(name in k.__dict__ for k in type(tensor.fake).__mro__) or name.startswith("__"):
        raise Unsupported(f"assigning {name!r} of {tensor.describe()} (a Tensor attribute) is not supported")
    tx.output.store_attribute(tensor, name, value)


def read_set_attribute(tx: Translator, tensor: TensorVariable, name: str) -> VariableTracker | None:
    """The value of an attribute set on ``tensor`` (in this trace, or on the input tensor
    before the call: read through its source, so guarded by value), None when it has none
    that the trace knows of."""
    written = tx.output.written_attribute(tensor, name)
    if written is not None:
        return written
    output = tx.output
    if tensor.source is None or not output.is_input(tensor.source):
        return None
    real = output.example_of(tensor.source)
    if name not in real.__dict__:
        return None
    from kiln.guards import AttrSource

    return tx.builder.wrap(real.__dict__[name], AttrSource(tensor.source, name))


def _type_string(dtype: Any, device: Any) -> str:
    import torch

    name = torch.empty(0, dtype=dtype).type()  # 'torch.FloatTensor'
    if device.type == "cpu":
        return name
    return name.replace("torch.", f"torch.{device.type}.", 1)


def tensor_type(tx: Translator, tensor: TensorVariable, args: list[VariableTracker],
                kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``tensor.type()`` / ``tensor.type(dtype_or_tensor_type)``."""
    import torch

    if kwargs or len(args) > 1:
        raise Unsupported(f"{tensor.describe()}.type() with more than a type argument")
    fake = tensor.fake
    if not args:
        return ConstantVariable(_type_string(fake.dtype, fake.device))
    target = args[0].as_constant()
    if isinstance(target, str):
        if target == _type_string(fake.dtype, fake.device):
            return tensor
        target = _tensor_type_named(target)
    if isinstance(target, torch.dtype):
        dtype = target
    elif isinstance(target, type) and isinstance(getattr(target, "dtype", None), torch.dtype):
        if bool(getattr(target, "is_cuda", False)) != (fake.device.type == "cuda"):
            raise Unsupported(f"{tensor.describe()}.type({target.__name__}) moves the tensor to another device")
        dtype = target.dtype
    else:
        raise Unsupported(f"{tensor.describe()}.type({target!r})")
    if dtype == fake.dtype:
        return tensor  # eager returns the tensor itself
    return tx.output.call_method("to", [tensor, ConstantVariable(dtype)], {})


def _tensor_type_named(name: str) -> Any:
    import torch

    obj: Any = torch
    for part in name.split(".")[1:] if name.startswith("torch.") else ():
        obj = getattr(obj, part, None)
    if obj is torch or obj is None:
        raise Unsupported(f"tensor.type({name!r}): not a tensor type")
    return obj
