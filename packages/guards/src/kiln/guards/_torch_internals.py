"""The one place kiln.guards touches torch internals (``torch._C`` private functions).

Why: measured on the dev machine (see README), checking one tensor's metadata field by field
in Python costs about 0.7 µs (dispatch keys alone 0.27 µs), while torch's C++
``torch._C._dynamo.guards.TensorGuards`` checks type, dispatch keys, dtype, device,
requires_grad, sizes and strides of a tensor in about 80 ns, and all tensors of a frame in
one call. Likewise ``GlobalStateGuard`` checks the global flags (grad mode, autocast,
default dtype, deterministic algorithms, torch-function state, threads, TF32) in one call.
Both are built from values kiln records (never from the user's tensors, which guards must
not keep alive), and both are optional: when any of this is missing the callers fall back
to plain Python code with the same meaning.

Invariant: every function here either returns a working object or None; none raises
because an internal moved.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "dispatch_key_text",
    "dispatch_keys",
    "dispatch_mode_types",
    "function_mode_types",
    "mode_stack_length_readers",
    "native_global_state",
    "native_tensor_checker",
    "saved_tensors_hooks_reader",
]


def dispatch_keys(tensor: Any) -> int:
    """The tensor's dispatch key set after the thread-local include/exclude sets, as an int.

    This is what dispatch will see for the tensor, and what TensorGuards compares.
    """
    import torch

    c = torch._C
    keys = (c._dispatch_keys(tensor) | c._dispatch_tls_local_include_set()) - (
        c._dispatch_tls_local_exclude_set()
    )
    return keys.raw_repr()


def dispatch_key_text(raw: int) -> str:
    """A dispatch key set given as an int, as readable text."""
    import torch

    try:
        return str(torch._C.DispatchKeySet.from_raw_repr(raw))
    except Exception:
        return f"DispatchKeySet(raw={raw:#x})"


def function_mode_types() -> tuple[Any, ...]:
    """The torch-function modes on the stack, bottom first: each mode's type, and for the
    mode behind ``torch.set_default_device`` (a DeviceContext) also its device."""
    import torch
    from torch.utils._device import DeviceContext

    c = torch._C
    out: list[Any] = []
    for i in range(c._len_torch_function_stack()):
        mode = c._get_function_stack_at(i)
        out.append((type(mode), str(mode.device)) if isinstance(mode, DeviceContext) else type(mode))
    return tuple(out)


def dispatch_mode_types() -> tuple[type, ...]:
    """Types of the (Python) torch-dispatch modes on the stack, bottom first."""
    import torch

    c = torch._C
    return tuple(type(c._get_dispatch_stack_at(i)) for i in range(c._len_torch_dispatch_stack()))


def mode_stack_length_readers() -> dict[str, Any]:
    """Builtins returning the depth of the torch-function and torch-dispatch mode stacks."""
    import torch

    c = torch._C
    return {"function_modes": c._len_torch_function_stack,
            "dispatch_modes": c._len_torch_dispatch_stack}


def saved_tensors_hooks_reader() -> Any:
    """A callable returning the innermost default saved-tensors hooks (pack, unpack) or None."""
    import functools

    import torch

    return functools.partial(torch._C._autograd._top_saved_tensors_default_hooks, True)


def native_global_state() -> Any | None:
    """torch's C++ snapshot of the global flags, taken now (``.check()`` → bool), or None."""
    try:
        from torch._C._dynamo.guards import GlobalStateGuard

        guard = GlobalStateGuard()
        guard.check()
    except Exception:
        return None
    return guard


def _stand_in(pytype: type, dtype: Any, device: Any, requires_grad: bool) -> Any | None:
    """An empty tensor with the given metadata (TensorGuards reads type, keys, dtype, device
    index and requires_grad from an example; sizes and strides are passed separately)."""
    import torch

    try:
        # Made with the user's torch-function and dispatch modes off: they must not see
        # kiln building guards (the thread-local key sets are unchanged once out).
        with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():
            t = torch.empty(0, dtype=dtype, device=device)
            if pytype is torch.nn.Parameter:
                return torch.nn.Parameter(t, requires_grad=requires_grad)
            if pytype is not torch.Tensor:
                return None
            return t.requires_grad_(requires_grad)
    except Exception:
        return None


def native_tensor_checker(specs: list[tuple[Any, ...]]) -> Any | None:
    """A TensorGuards object checking tensors against ``specs`` in one call, or None.

    Each spec is (pytype, dispatch_keys, dtype, device, layout, requires_grad, sizes,
    strides) with None for a free size or stride. None is returned when torch lacks
    TensorGuards or when some spec cannot be reproduced by a stand-in tensor exactly (a
    tensor subclass, a non-strided layout, extra dispatch keys such as conjugation).
    """
    try:
        import torch
        from torch._C._dynamo.guards import TensorGuards
    except Exception:
        return None
    examples = []
    for pytype, keys, dtype, device, layout, requires_grad, _sizes, _strides in specs:
        if layout is not torch.strided:
            return None
        example = _stand_in(pytype, dtype, device, requires_grad)
        if example is None or dispatch_keys(example) != keys:
            return None
        examples.append(example)
    try:
        checker = TensorGuards(
            *examples,
            dynamic_dims_sizes=[list(s[6]) for s in specs],
            dynamic_dims_strides=[list(s[7]) for s in specs],
        )
    except Exception:
        return None
    return checker
