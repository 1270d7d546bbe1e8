"""Torch functions and torch's global-state context managers.

``TorchFunctionVariable`` wraps anything callable from torch (``torch.relu``,
``torch.nn.functional.gelu``, ``torch.Tensor.add``): a call becomes one graph node, run on fake
tensors for its result's metadata. A few functions answer questions about global state or
metadata instead and are evaluated at trace time (the global-state guard covers them);
``torch.compiler.is_compiling()`` and its relatives answer True.
``GradModeVariable`` models ``torch.no_grad()``, ``torch.enable_grad()`` and
``torch.set_grad_enabled(b)`` in a ``with`` block: entering and exiting put
``torch._C._set_grad_enabled`` nodes into the graph and switch the mode the fake tensors
see, so ``requires_grad`` of results is right.
"""

from __future__ import annotations

import functools
import types
from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable, is_constant_value

if TYPE_CHECKING:
    from .._translator import Translator

__all__ = ["AutocastVariable", "ContextManagerVariable", "ExitVariable", "GradModeExit", "GradModeVariable",
           "TorchFunctionVariable", "grad_mode_instance", "is_context_manager_class", "is_torch_function"]


@functools.cache
def _trace_time_functions() -> frozenset[Any]:
    import torch

    return frozenset({
        torch.is_grad_enabled, torch.is_inference_mode_enabled, torch.get_default_dtype,
        torch.is_tensor, torch.is_floating_point, torch.is_complex, torch.numel,
        torch.is_autocast_enabled, torch.are_deterministic_algorithms_enabled,
        torch.device, torch.Size, torch.finfo, torch.iinfo, torch.promote_types,
        torch.result_type, torch.can_cast,
    })


@functools.cache
def _global_state_functions() -> frozenset[Any]:
    """torch functions that change (or read a copy of) torch's process-wide state: seeds and
    generator states, the default dtype and device, determinism, precision and print
    settings, thread counts. Recorded in a graph they would run once at trace time (on the
    real process) and never again; a call to one is a graph break, so it runs eagerly on
    every call, in order."""
    import torch

    names = ("manual_seed", "seed", "get_rng_state", "set_rng_state", "set_default_dtype", "set_default_device",
             "set_default_tensor_type", "use_deterministic_algorithms", "set_deterministic_debug_mode",
             "set_float32_matmul_precision", "set_printoptions", "set_warn_always", "set_num_threads",
             "set_num_interop_threads", "set_flush_denormal", "set_anomaly_enabled")
    found = {getattr(torch, n) for n in names if hasattr(torch, n)}
    found |= {getattr(torch.random, n) for n in ("manual_seed", "seed", "get_rng_state", "set_rng_state", "fork_rng")
              if hasattr(torch.random, n)}
    for n in ("manual_seed", "manual_seed_all", "seed", "seed_all", "get_rng_state", "get_rng_state_all",
              "set_rng_state", "set_rng_state_all"):
        if hasattr(torch.cuda, n):
            found.add(getattr(torch.cuda, n))
    return frozenset(found)


@functools.cache
def _autograd_engine_functions() -> frozenset[Any]:
    """torch functions that run the autograd engine on the tensors' graph (accumulating into
    ``.grad``): a side effect on tensors outside the captured graph, which a recorded op
    would lose. A call to one is a graph break, as under torch.compile."""
    import torch

    return frozenset({torch.autograd.backward, torch.Tensor.backward})


_COMPILING_ELSEWHERE = (("torch._dynamo", "is_compiling"), ("torch._dynamo.external_utils", "is_compiling"),
                       ("torch._utils", "is_compiling"))


def _compiling_answers() -> dict[Any, bool]:
    """"Am I being compiled?" functions and what they answer inside a trace: the captured
    code is what runs compiled, so library code takes its compile-friendly branches. Some
    live in modules that are never imported just to look; the table is rebuilt only when
    which of them are imported changes."""
    import sys

    return _compiling_table(tuple(module in sys.modules for module, _ in _COMPILING_ELSEWHERE))


@functools.cache
def _compiling_table(imported: tuple[bool, ...]) -> dict[Any, bool]:
    import sys

    import torch

    answers = {torch.compiler.is_compiling: True, torch.compiler.is_dynamo_compiling: True,
               torch.compiler.is_exporting: False}
    for (module, name), present in zip(_COMPILING_ELSEWHERE, imported, strict=True):
        if present:
            answers[getattr(sys.modules[module], name)] = True
    return answers


@functools.cache
def _autocast_classes() -> tuple[Any, ...]:
    import torch

    return (torch.autocast, torch.amp.autocast, torch.cpu.amp.autocast, torch.cuda.amp.autocast)


@functools.cache
def _context_manager_classes() -> tuple[Any, ...]:
    import torch

    return (torch.no_grad, torch.enable_grad, torch.set_grad_enabled, *_autocast_classes())


def is_context_manager_class(value: Any) -> bool:
    """Whether ``value`` is one of torch's context-manager classes kiln models."""
    return any(value is c for c in _context_manager_classes())


def grad_mode_instance(value: Any) -> GradModeVariable | None:
    """A tracker for an existing ``torch.no_grad()`` / ``torch.enable_grad()`` object (what
    ``@torch.no_grad()`` keeps and enters on every call), or None."""
    import torch

    if type(value) is torch.no_grad:
        return GradModeVariable(False)
    if type(value) is torch.enable_grad:
        return GradModeVariable(True)
    return None


def is_torch_function(value: Any) -> bool:
    """Whether ``value`` is a function (or method descriptor) defined by torch."""
    if isinstance(value, type) or not callable(value):
        return False
    module = getattr(value, "__module__", None) or ""
    if module.startswith("torch"):
        return True
    qualname = getattr(value, "__qualname__", "") or ""
    # methods of torch.Tensor are method descriptors whose __module__ is None
    return module == "" and qualname.startswith(("TensorBase.", "Tensor.", "_TensorBase."))


def _graph_value(v: VariableTracker) -> bool:
    """Whether a graph node can take ``v`` as an argument: a tensor, a number, a constant,
    or a tuple, list or dict of such values."""
    from ._containers import DictVariable, ListVariable, RangeVariable, TupleVariable
    from ._symnumber import SymNumberVariable, SymSliceVariable
    from ._tensor import TensorVariable

    if isinstance(v, (TensorVariable, SymNumberVariable, SymSliceVariable, ConstantVariable, RangeVariable)):
        return True
    if isinstance(v, (TupleVariable, ListVariable)):
        return all(_graph_value(i) for i in v.items)
    if isinstance(v, DictVariable):
        return all(_graph_value(i) for i in v.items.values())
    return False


class TorchFunctionVariable(VariableTracker):
    """A torch callable; see the module docstring."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any) -> None:
        super().__init__(None)
        self.fn = fn

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.fn

    def python_type(self) -> type:
        return type(self.fn)

    def describe(self) -> str:
        return f"torch function {getattr(self.fn, '__qualname__', self.fn)}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        import torch

        if name in ("__name__", "__qualname__", "__module__") and isinstance(getattr(self.fn, name, None), str):
            return ConstantVariable(getattr(self.fn, name))  # torch's functions are fixed
        if isinstance(self.fn, torch._ops.OpOverloadPacket) and not name.startswith("_"):
            # ``torch.ops.aten.relu.default``: an overload of the op, fixed by torch's registry
            overload = getattr(self.fn, name, None)
            if isinstance(overload, torch._ops.OpOverload):
                return TorchFunctionVariable(overload)
        return super().get_attr(tx, name)

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        import torch

        fn = self.fn
        if fn in (torch.no_grad, torch.enable_grad) and not args and not kwargs:
            return GradModeVariable(fn is torch.enable_grad)
        if fn in _autocast_classes():
            return make_autocast(args, kwargs)
        if fn is torch.set_grad_enabled:
            (mode,) = args
            return GradModeVariable(bool(mode.as_constant()), immediate=True, tx=tx)
        if fn in _global_state_functions():
            raise Unsupported(f"{self.describe()} changes or copies torch's process-wide state: it runs eagerly")
        if fn in _autograd_engine_functions():
            raise Unsupported(f"{self.describe()} runs the autograd engine: it runs eagerly")
        if fn in _trace_time_functions():
            return self._at_trace_time(tx, args, kwargs)
        if isinstance(fn, types.FunctionType) and (fn.__module__ or "").startswith("torch.testing"):
            # torch's test helpers (OpInfo wrappers that seed the generator around an op) are
            # code like the user's: traced, not recorded as one op whose side effects would
            # happen at trace time only
            return tx.inline_function(fn, args, kwargs)
        from ._numpy_trace import NumpyArrayVariable

        if any(isinstance(a, NumpyArrayVariable) for a in [*args, *kwargs.values()]):
            from ._numpy import torch_call_on_arrays

            return torch_call_on_arrays(tx, fn, args, kwargs)  # torch.from_numpy(a), torch.as_tensor(a)
        if fn in (torch._check, torch._check_is_size) and args:
            from ._symnumber import assume

            assume(tx.output, fn, args)  # an assumption the graph checks when it runs
            return ConstantVariable(None)
        answer = _compiling_answers().get(fn)
        if answer is not None and not args and not kwargs:
            return ConstantVariable(answer)
        if isinstance(fn, types.FunctionType) and not all(_graph_value(a) for a in [*args, *kwargs.values()]):
            # a module, a user function or an options object passed to a torch function
            # written in Python (``F.triplet_margin_with_distance_loss(distance_function=m)``):
            # its code is traced, calling the argument like any other value
            return tx.inline_function(fn, args, kwargs)
        return tx.output.call_function(fn, args, kwargs)

    def _at_trace_time(self, tx: Translator, args: list[VariableTracker],
                       kwargs: dict[str, VariableTracker]) -> VariableTracker:
        import torch

        from ._containers import constant_args
        from ._tensor import TensorVariable

        def value(v: VariableTracker) -> Any:
            return v.fake if isinstance(v, TensorVariable) else constant_args(self.describe(), [v])[0]

        result = self.fn(*[value(a) for a in args], **{k: value(v) for k, v in kwargs.items()})
        if isinstance(result, (torch.finfo, torch.iinfo)):
            from ._constant import FrozenObjectVariable

            return FrozenObjectVariable(result)  # read-only: .min, .max, .eps, ...
        if not is_constant_value(result):
            raise Unsupported(f"{self.describe()} returned {type(result).__name__}")
        return ConstantVariable(result)


class ContextManagerVariable(VariableTracker):
    """A context manager kiln models: ``enter`` and ``exit`` change the trace and the graph."""

    __slots__ = ()

    def enter(self, tx: Translator) -> VariableTracker:
        raise NotImplementedError

    def exit(self, tx: Translator) -> None:
        raise NotImplementedError


class ExitVariable(VariableTracker):
    """The bound ``__exit__`` BEFORE_WITH leaves on the stack; calling it exits the block."""

    __slots__ = ("manager", "runtime")

    def __init__(self, manager: ContextManagerVariable) -> None:
        super().__init__(None)
        self.manager = manager
        self.runtime: GradModeExit | None = None

    def describe(self) -> str:
        return f"__exit__ of {self.manager.describe()}"

    def call(self, tx: Translator, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
        self.manager.exit(tx)
        return ConstantVariable(None)

    def runtime_exit(self) -> GradModeExit:
        """A real object doing what this exit does, for code that runs the rest of the block
        for real (a graph break inside it): only grad-mode blocks have one."""
        if isinstance(self.manager, GradModeVariable) and self.manager.previous is not None:
            if self.runtime is None:
                self.runtime = GradModeExit(self.manager.previous)
            return self.runtime
        raise Unsupported(f"a graph break inside a with block on {self.manager.describe()}")


class GradModeExit:
    """The ``__exit__`` of a grad-mode block entered by compiled code: restores the grad mode
    of before the block (``previous``) and lets any exception through. A resume function gets
    it on its value stack where the original had the context manager's ``__exit__``."""

    __slots__ = ("previous",)

    def __init__(self, previous: bool) -> None:
        self.previous = previous

    def __call__(self, *exc_info: Any) -> bool:
        import torch

        torch._C._set_grad_enabled(self.previous)
        return False

    def __repr__(self) -> str:
        return f"GradModeExit(previous={self.previous})"


class AutocastVariable(ContextManagerVariable):
    """``torch.autocast(...)`` in a ``with`` block.

    Entering switches autocast on for real while tracing (so the fake tensors get the dtypes
    autocast gives) and records ``torch.amp._enter_autocast(...)`` in the graph; exiting
    records ``_exit_autocast`` on that node and switches the real one off again.
    """

    __slots__ = ("args", "mode_node", "real")

    def __init__(self, args: tuple[Any, ...]) -> None:
        super().__init__(None)
        self.args = args  # device_type, dtype, enabled, cache_enabled
        self.real: Any = None
        self.mode_node: Any = None

    def describe(self) -> str:
        return f"autocast({', '.join(map(repr, self.args))})"

    def enter(self, tx: Translator) -> VariableTracker:
        import torch
        from torch.amp import autocast_mode

        self.real = torch.autocast(*self.args)
        self.real.__enter__()
        tx.output.open_contexts.append(self.real)
        self.mode_node = tx.output.record_effect(autocast_mode._enter_autocast, self.args)
        return ConstantVariable(None)

    def exit(self, tx: Translator) -> None:
        from torch.amp import autocast_mode

        tx.output.record_effect(autocast_mode._exit_autocast, (self.mode_node,))
        tx.output.open_contexts.remove(self.real)
        self.real.__exit__(None, None, None)


def make_autocast(args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> AutocastVariable:
    """An AutocastVariable from ``torch.autocast``'s arguments (all known at trace time)."""
    import inspect

    import torch

    from ._containers import constant_args

    values = constant_args("torch.autocast()", [*args, *kwargs.values()])
    bound = inspect.signature(torch.autocast.__init__).bind(
        None, *values[:len(args)], **dict(zip(kwargs, values[len(args):], strict=True)))
    bound.apply_defaults()
    a = bound.arguments
    return AutocastVariable((a["device_type"], a["dtype"], a["enabled"], a["cache_enabled"]))


class GradModeVariable(ContextManagerVariable):
    """A grad-mode switch used as a context manager (see the module docstring)."""

    __slots__ = ("enabled", "previous")

    def __init__(self, enabled: bool, *, immediate: bool = False, tx: Translator | None = None) -> None:
        super().__init__(None)
        self.enabled = enabled
        self.previous: bool | None = None
        if immediate:
            # torch.set_grad_enabled(b) switches at once, also outside a ``with``.
            assert tx is not None
            self.previous = self._switch(tx, enabled)

    def describe(self) -> str:
        return f"grad mode {'enabled' if self.enabled else 'disabled'}"

    def enter(self, tx: Translator) -> VariableTracker:
        if self.previous is None:
            self.previous = self._switch(tx, self.enabled)
        tx.output.grad_blocks.append(self.previous)
        return ConstantVariable(None)

    def exit(self, tx: Translator) -> None:
        assert self.previous is not None
        tx.output.grad_blocks.pop()
        self._switch(tx, self.previous)

    @classmethod
    def entered(cls, enabled: bool, previous: bool) -> GradModeVariable:
        """A block entered before tracing began (a resume function inside it)."""
        manager = cls(enabled)
        manager.previous = previous
        return manager

    @staticmethod
    def _switch(tx: Translator, enabled: bool) -> bool:
        import torch

        previous = torch.is_grad_enabled()
        tx.output.set_grad_enabled(enabled)
        return previous
