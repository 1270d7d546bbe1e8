"""The global torch state guard: the process- and thread-wide flags a trace depends on.

``TorchGlobalState.capture()`` records, by name: grad mode, inference mode, the default
dtype, deterministic algorithms (and warn-only), the torch-function switches, autocast
(enabled and dtype for CPU and CUDA, and its cache), the intra-op thread count, the TF32
switches, the types of the torch-function and torch-dispatch modes on their stacks, and the
default saved-tensors hooks (``torch.autograd.graph.saved_tensors_hooks``).

The mode stacks also carry the default device of ``torch.set_default_device`` (a
DeviceContext mode, recorded with its device). The compiled check runs torch's native
snapshot (``_torch_internals.native_global_state``, taken at capture) plus Python checks
for what it does not cover (inference mode, the mode stacks; an empty stack costs one
length check); without the native snapshot it compares every recorded field in Python.
The explanation compares field by field and then consults the native snapshot, so both
views fail on the same states.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kiln.guards import _torch_internals as native
from kiln.guards._base import CodeContext, Guard, safe_repr
from kiln.guards._sources import Source

__all__ = ["TorchGlobalState"]


def _readers() -> dict[str, Any]:
    import torch

    c = torch._C
    return {
        "grad_enabled": torch.is_grad_enabled,
        "inference_mode": torch.is_inference_mode_enabled,
        "default_dtype": torch.get_default_dtype,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled,
        "torch_function_enabled": c._is_torch_function_enabled,
        "torch_function_all_disabled": c._is_torch_function_all_disabled,
        "autocast_cpu": lambda: torch.is_autocast_enabled("cpu"),
        "autocast_cpu_dtype": lambda: torch.get_autocast_dtype("cpu"),
        "autocast_cuda": lambda: torch.is_autocast_enabled("cuda"),
        "autocast_cuda_dtype": lambda: torch.get_autocast_dtype("cuda"),
        "autocast_cache": torch.is_autocast_cache_enabled,
        "num_threads": torch.get_num_threads,
        "matmul_allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
        "function_modes": native.function_mode_types,
        "dispatch_modes": native.dispatch_mode_types,
        "saved_tensors_hooks": native.saved_tensors_hooks_reader(),
        "global_module_hooks": _global_module_hooks,
    }


def _global_hook_dicts() -> tuple[dict, ...]:
    # nn.Module hooks registered for every module (register_module_forward_hook & co.);
    # traced module calls only run the ones present when they were traced.
    from torch.nn.modules import module as m

    names = ("_global_forward_pre_hooks", "_global_forward_hooks",
             "_global_backward_pre_hooks", "_global_backward_hooks")
    return tuple(getattr(m, n) for n in names if hasattr(m, n))


def _global_module_hooks() -> tuple[int, ...]:
    return tuple(len(d) for d in _global_hook_dicts())


# Fields the native snapshot does not cover; the compiled check reads these in Python.
_NOT_NATIVE = ("inference_mode", "function_modes", "dispatch_modes", "saved_tensors_hooks",
               "global_module_hooks")


@dataclass(frozen=True, slots=True)
class TorchGlobalState(Guard):
    """The global torch state equals the captured one, field by field."""

    state: tuple[tuple[str, Any], ...]
    native_snapshot: Any = field(default=None, compare=False, hash=False)
    cost = 8

    @classmethod
    def capture(cls) -> TorchGlobalState:
        """The guard that the current thread's torch state satisfies."""
        snapshot = native.native_global_state()
        return cls(tuple((name, read()) for name, read in _readers().items()), snapshot)

    @property
    def sources(self) -> tuple[Source, ...]:
        return ()

    def describe(self) -> str:
        return "global torch state: " + ", ".join(f"{k}={v!r}" for k, v in self.state)

    def emit(self, ctx: CodeContext) -> list[str]:
        readers = _readers()
        if self.native_snapshot is not None and ctx.native:
            names = [(k, v) for k, v in self.state if k in _NOT_NATIVE]
            conds = [f"{ctx.const(self.native_snapshot, 'torch_state')}.check()"]
        else:
            names, conds = list(self.state), []
        depth = native.mode_stack_length_readers()
        for name, value in names:
            if name == "global_module_hooks" and not any(value):
                # the usual case, as cheap as it gets: each hook dict is empty
                conds += [f"not {ctx.const(d, 'module_hooks')}" for d in _global_hook_dicts()]
                continue
            if name in depth and value == ():
                conds.append(f"{ctx.const(depth[name], name)}() == 0")
                continue
            read = ctx.const(readers[name], name)
            if value is None or type(value) is bool:
                conds.append(f"{read}() is {value}")
            else:
                conds.append(f"{read}() == {ctx.const(value, name)}")
        return conds

    def explain(self) -> str | None:
        readers = _readers()
        for name, expected in self.state:
            found = readers[name]()
            if found != expected:
                return (f"global torch state {name}: expected {safe_repr(expected)}, "
                        f"got {safe_repr(found)}")
        if self.native_snapshot is not None and not self.native_snapshot.check():
            reason = self.native_snapshot.reason().strip() or "changed"
            return f"global torch state (native check): {reason}"
        return None
