"""A Triton kernel's launch from a wrapper, past triton's ``JITFunction.run`` where it can be.

``kernel[grid](*args)`` goes through ``JITFunction.run`` at every call: it binds the
arguments, computes their specialization (each tensor's 16-byte alignment, each integer's
type and whether it is 1 or a multiple of 16), builds the cache key, looks the compiled
kernel up and reads triton's knobs, about half of a small model's host time on an H100
(``benchmarks/host_profile.py``). ``Launch`` does that once per specialization and then calls
the compiled kernel's launcher itself, as torch's generated code does: triton's, or, for a
kernel the precompile or ``_static`` loaded as a ``_static_launch.StaticKernel``, torch's
static CUDA launcher (no launcher built per signature). A kernel can also be
handed to it for a key before any call (``Launch.seed``): the one the precompile compiled for
the first call's arguments, or, in a new process, the one ``_static`` loaded from triton's
cache for them; ``fn`` is then possibly a ``_static.Deferred``, whose module is imported only
when a launch needs triton's JIT.

The invariant: a launch reuses a compiled kernel only for arguments whose specialization is
the one triton chose it for. ``Launch`` keys its kernels by a value at least as fine as
triton's specialization of the arguments that change between calls:

- a tensor: its address modulo 16 (triton: whether it is a multiple of 16);
- an integer: its value when in [0, 16], else its residue modulo 16 and its range (32 bits,
  64 bits signed, else unsigned; triton: its type by range, whether it is 1, whether it is a
  multiple of 16);
  a ``do_not_specialize`` integer (the random seed): only its range;
- the CUDA device the kernel runs on.

What the key leaves out is the same at every call of one wrapper: the tensors' dtypes (the
graph's guards fix its inputs' and it makes the rest), the block sizes and the options (the
wrapper's constants). The first call of a key, and every call where the fast path does not
hold, goes through ``JITFunction.run``, which compiles what is missing and returns the kernel
kept for the key. The fast path does not hold (``launch_state`` is None) when triton's
launch hooks call anything (a profiler: they see every launch), under triton's interpreter, or
for a triton older than 3.3 (another launcher calling convention); when the current CUDA device
is not the kernel's, the launch goes through triton with the kernel's device made current.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ._static import Deferred
from ._static_launch import StaticKernel

__all__ = ["Launch", "launch_state"]

_MAX_KERNELS = 64  # per launch site: past it, new specializations take the slow path only


@functools.cache
def _runtime_knobs() -> Any:
    """triton's runtime knobs where its compiled kernels are launched as ``Launch`` calls
    them (3.3 on: ``knobs``, and every bound argument, constexprs included, passed to the
    launcher), else None. Decided once per process: the installed triton."""
    try:
        import triton
        from triton import knobs  # (a submodule the package may not import)
        from triton.compiler import CompiledKernel  # noqa: F401
    except ImportError:
        return None
    major, minor = (int(p) for p in triton.__version__.split(".")[:2])
    return knobs.runtime if (major, minor) >= (3, 3) else None


def launch_state(index: int | None) -> tuple[int, int] | int | None:
    """The device and raw stream for this call's fast launches on CUDA device ``index``
    (None: the current one); None where launches must go through triton (see the module
    docstring); ``index`` itself when it is not the current device: triton launches on the
    current one, so each launch goes through triton with ``index`` made current around it
    (as eager runs an op on its tensors' device). Read once per call of a wrapper."""
    device = torch.cuda.current_device()
    if index is not None and index != device:
        return index
    runtime = _runtime_knobs()
    if runtime is None:
        return None
    if _hooked(runtime.launch_enter_hook) or _hooked(runtime.launch_exit_hook):
        return None
    return device, torch._C._cuda_getCurrentRawStream(device)


def _hooked(hook: Any) -> bool:
    """Whether a triton launch hook knob calls anything: None, or an empty ``HookChain``
    (triton 3.5 on: a chain is always there), does not."""
    return hook is not None and (getattr(hook, "calls", None) != [])


@functools.cache
def _key_function(kinds: tuple[str, ...]) -> Any:
    """``key(device, *args)`` for arguments of kinds ``kinds`` ("tensor", "int", or "seed":
    an integer triton does not specialize): see the module docstring. One function per
    sequence of kinds, shared by the launches that have it (a graph loaded from the cache
    compiles none it already has)."""
    names = [f"a{k}" for k in range(len(kinds))]
    parts = []
    for arg, kind in zip(names, kinds, strict=True):
        if kind == "seed":
            parts.append(f"_int_range({arg})")
        elif kind == "int":
            parts.append(f"_int_class({arg})")
        elif kind == "tensor":
            parts.append(f"{arg}.data_ptr() & 15")
        else:
            raise ValueError(f"unknown argument kind {kind!r}")
    source = f"def key(device, {', '.join(names)}):\n    return (device, {', '.join(parts)})\n"
    namespace: dict[str, Any] = {"_int_class": _int_class, "_int_range": _int_range}
    exec(compile(source, f"<kiln.inductor launch key {','.join(kinds)}>", "exec"), namespace)
    return namespace["key"]


def _int_range(n: int) -> int:
    """Which of triton's integer types ``n`` takes: i32 (0), i64 (1), u64 (2)."""
    if -2147483648 <= n <= 2147483647:
        return 0
    return 1 if -2**63 <= n < 2**63 else 2


def _int_class(n: int) -> int:
    if 0 <= n <= 16:
        return n
    if -2147483648 <= n <= 2147483647:  # triton's i32
        return 17 + (n & 15)
    return (33 if -2**63 <= n < 2**63 else 49) + (n & 15)  # i64, u64


class Launch:
    """The launch of triton function ``fn`` with the arguments ``names`` (in its order; their
    ``kinds``: "tensor", "int" or "seed") and the launch configuration ``meta`` (block
    sizes, ``num_warps``...): ``launch(state, programs, *args)``, ``state`` from
    ``launch_state``."""

    __slots__ = ("__weakref__", "_key", "_tail", "fn", "kernels", "kinds", "meta", "names")

    def __init__(self, fn: Any, names: list[str], kinds: list[str], meta: dict[str, Any]) -> None:
        self.fn, self.names, self.kinds, self.meta = fn, list(names), list(kinds), dict(meta)
        self.kernels: dict[tuple, Any] = {}  # by key: the compiled kernels launched directly
        self._tail: tuple | None = None  # the constexpr arguments after ``names``; None: no fast path
        self._key: Any = None
        arg_names = getattr(fn, "arg_names", None)
        jit = getattr(fn, "device_caches", None) is not None or isinstance(fn, Deferred)
        if not jit or arg_names is None:
            return  # triton's interpreter (an InterpretedFunction) or an unknown object
        n = len(self.names)
        if list(arg_names[:n]) != self.names or any(a not in self.meta for a in arg_names[n:]):
            return
        self._tail = tuple(self.meta[a] for a in arg_names[n:])
        self._key = _key_function(tuple(self.kinds))

    def __call__(self, state: tuple[int, int] | int | None, programs: int, *args: Any) -> None:
        key = None
        if state.__class__ is tuple and self._tail is not None:
            key = self._key(state[0], *args)
            kernel = self.kernels.get(key)
            if kernel is not None:
                if kernel.__class__ is StaticKernel:
                    kernel(programs, state[1], args)
                else:
                    kernel.run(programs, 1, 1, state[1], kernel.function, kernel.packed_metadata, None, None, None,
                               *args, *self._tail)
                return
        elif state.__class__ is int:  # the kernel's device is not the current one
            with torch.cuda.device(state):
                self.fn.run(*args, grid=(programs,), warmup=False, **self.meta)
            return
        kernel = self.fn.run(*args, grid=(programs,), warmup=False, **self.meta)
        if key is not None and len(self.kernels) < _MAX_KERNELS and _compiled(kernel):
            self.kernels[key] = kernel

    def seed(self, key: tuple, kernel: Any) -> bool:
        """Take ``kernel`` (a loaded ``CompiledKernel``, or a ``StaticKernel`` launched with
        this launch's arguments) as the one for arguments of ``key``: what triton compiled for
        them (``_static``); False where this launch has no fast path."""
        if self._tail is None or len(self.kernels) >= _MAX_KERNELS or not _compiled(kernel):
            return False
        if kernel.__class__ is StaticKernel and kernel.declared != len(self.names):
            return False
        self.kernels[tuple(key)] = kernel
        return True

    def __repr__(self) -> str:
        return f"Launch({getattr(self.fn, '__name__', self.fn)!r}, {len(self.kernels)} kernels)"


def _compiled(kernel: Any) -> bool:
    if kernel.__class__ is StaticKernel:
        return True
    from triton.compiler import CompiledKernel

    return isinstance(kernel, CompiledKernel) and getattr(kernel, "function", None) is not None
