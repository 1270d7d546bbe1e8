"""Compiled Triton kernels launched through torch's static CUDA launcher, not triton's.

Triton (3.6, the GPU machine's) launches a compiled kernel through a launcher module it
writes in C for each argument signature and builds with the C compiler on the kernel's first
load (``CudaLauncher``): about 0.2 s of the compiler each, ten or more for a transformer
block's training step, in a cold start; and in a warm one, triton's cached launcher module is
found and imported for each kernel. torch (2.8 on, CUDA builds) carries a launcher compiled
once with torch, ``torch._C._StaticCudaLauncher``, which loads a cubin (``_load_kernel``) and
launches it with the arguments described by a string of type codes (``_launch_kernel``), as
torch.compile's own generated code does. ``StaticKernel`` is a compiled kernel loaded and
launched that way: no launcher is built or imported.

The invariant: a kernel is launched here only when its launch is what triton's launcher would
do for it. Its parameters, as the compiled kernel takes them, are the launch's arguments, in
order (none of them compiled in as a constexpr), then one pointer for each scratch area the
metadata names (global, profile), passed as null since their sizes are 0. So a kernel is
refused (``static_form`` is None, triton's launcher is used) when any of this may not hold:

- an argument compiled in as a constant (an integer triton specialized as 1: the H100's
  test of such a launch, with the argument left out, failed, for a reason its output did not
  show; so none is tried);
- an argument type outside pointers, integers of 8-64 bits and fp32/fp64 (a bool, a tensor
  descriptor, half-precision scalars);
- a scratch area of nonzero size, several CTAs per program (a cluster), a cooperative grid or
  programmatic dependent launch, tensor descriptors;
- too many threads for its registers (triton raises its out-of-resources error instead);
- no static launcher (a CPU build of torch, an older torch), or a triton that names none of the
  metadata fields above (an unknown calling convention).

The pointer arguments are the tensors themselves: the launcher reads each one's
``data_ptr()`` and checks with the driver that it is device memory, as triton's launcher does.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Sequence
from typing import Any

__all__ = ["StaticKernel", "as_static", "declared_of", "launcher", "static_form"]

_log = logging.getLogger("kiln")

# triton's scalar types -> the launcher's type codes (each argument takes an 8-byte slot)
_CODES = {"i8": "b", "i16": "h", "i32": "i", "i64": "l", "u8": "B", "u16": "H", "u32": "I", "u64": "K",
          "fp32": "f", "f32": "f", "fp64": "d"}
_REGISTERS_PER_BLOCK = 65536


@functools.cache
def launcher() -> Any:
    """torch's static CUDA launcher, or None where this torch has none (or no CUDA)."""
    try:
        import torch

        if not torch.cuda.is_available() or torch.version.hip is not None:
            return None
        from torch._C import _StaticCudaLauncher
    except Exception:
        return None
    if not all(callable(getattr(_StaticCudaLauncher, f, None)) for f in ("_load_kernel", "_launch_kernel")):
        return None
    return _StaticCudaLauncher


def static_form(arg_names: Sequence[str], signature: dict[str, str], metadata: Any, declared: int,
                constants: Any = ()) -> tuple[str, tuple[None, ...]] | None:
    """How the static launcher takes a kernel compiled with ``signature`` (triton's: each
    argument's name and type, in order), ``constants`` (the keys of triton's: an argument's
    name or path) and ``metadata``, launched with the first ``declared`` arguments of
    ``arg_names`` (the rest are the kernel's own constexprs): the type codes of its parameters
    and the null scratch pointers that follow the launch's arguments; or None where it cannot
    (see the module docstring)."""
    if list(signature) != list(arg_names):
        return None
    for key in constants:  # (triton 3.2 and before: an integer equal to 1 a constant, its type kept)
        index = arg_names.index(key) if key in arg_names else key[0] if isinstance(key, tuple) and key else None
        if not isinstance(index, int) or not declared <= index < len(arg_names):
            return None
    if getattr(metadata, "num_ctas", 1) != 1 or getattr(metadata, "launch_cooperative_grid", False) \
            or getattr(metadata, "launch_pdl", False) or getattr(metadata, "tensordesc_meta", None):
        return None
    if any(c != 1 for c in (getattr(metadata, "cluster_dims", None) or (1,))):
        return None
    scratch = [getattr(metadata, f, None) for f in ("global_scratch_size", "profile_scratch_size")]
    scratch = [size for size in scratch if size is not None]  # the areas this triton's kernels take
    if not scratch or any(scratch):
        return None
    extra = (None,) * len(scratch)
    codes: list[str] = []
    for i, name in enumerate(arg_names):
        kind = signature[name]
        if (kind == "constexpr") != (i >= declared):  # an argument compiled in, or a constexpr passed
            return None
        if kind != "constexpr":
            code = "O" if kind.startswith("*") else _CODES.get(kind)
            if code is None:
                return None
            codes.append(code)
    return "".join(codes) + "O" * len(extra), extra


class StaticKernel:
    """A compiled kernel (``compiled``: triton's ``CompiledKernel``) loaded on a device
    through the static launcher: ``kernel(programs, stream, args)`` launches it on a
    one-dimensional grid with the launch's declared arguments ``args``."""

    __slots__ = ("_launch", "_pid", "arg_types", "compiled", "declared", "extra", "function", "module", "name",
                 "num_warps", "shared")

    def __init__(self, compiled: Any, form: tuple[str, tuple[None, ...]], declared: int,
                 loaded: tuple[Any, ...], static: Any) -> None:
        self.compiled, self.name, self.declared = compiled, compiled.name, declared
        self.arg_types, self.extra = form
        self.num_warps, self.shared = compiled.metadata.num_warps, compiled.metadata.shared
        # (function, n_regs, n_spills), or (module, function, n_regs, n_spills) where torch
        # gives the module back to unload
        self.module = loaded[0] if len(loaded) == 4 else None
        self.function = loaded[-3]
        self._launch, self._pid = static._launch_kernel, os.getpid()

    def __call__(self, programs: int, stream: int, args: tuple[Any, ...]) -> None:
        self._launch(self.function, programs, 1, 1, self.num_warps, self.shared, self.arg_types,
                     args + self.extra, stream)

    @property
    def src(self) -> Any:
        """What the kernel was compiled from (triton's ``ASTSource`` or ``_static``'s record)."""
        return self.compiled.src

    def __del__(self) -> None:
        module, self.module = self.module, None
        if module is None or self._pid != os.getpid():
            return
        with contextlib.suppress(Exception):  # (an older torch without it, or the driver gone at exit)
            launcher()._unload_kernel(module)

    def __repr__(self) -> str:
        return f"StaticKernel({self.name!r}, {self.arg_types!r})"


def declared_of(fn: Any) -> int | None:
    """How many arguments a launch of triton function ``fn`` passes (``Launch.names``): its
    parameters before its constexprs, which come last; None where they do not."""
    arg_names, constexprs = getattr(fn, "arg_names", None), getattr(fn, "constexprs", None)
    if arg_names is None or constexprs is None:
        return None
    declared = len(arg_names) - len(set(constexprs))
    return declared if set(constexprs) == set(range(declared, len(arg_names))) else None


def as_static(compiled: Any, device: int | None, declared: int | None) -> StaticKernel | None:
    """``compiled`` (triton's ``CompiledKernel``, its cubin in triton's cache) loaded on CUDA
    device ``device`` (the current one; None: whichever that is) for the static launcher, launched with ``declared``
    arguments; None where it cannot be (``static_form``, no cubin file, a failed load:
    triton's launcher is used)."""
    static = launcher()
    if static is None or declared is None:
        return None
    try:
        src = compiled.src
        form = static_form(list(src.fn.arg_names), dict(src.signature), compiled.metadata, declared,
                           list(getattr(src, "constants", None) or ()))
        cubin = (getattr(compiled, "metadata_group", None) or {}).get(f"{compiled.name}.cubin")
        if form is None or cubin is None:
            return None
        if device is None:
            import torch

            device = torch.cuda.current_device()
        loaded = static._load_kernel(str(cubin), compiled.name, int(compiled.metadata.shared), device)
        kernel = StaticKernel(compiled, form, declared, tuple(loaded), static)
        registers = loaded[-2]
        if registers * 32 * kernel.num_warps > _REGISTERS_PER_BLOCK:
            return None  # (unloaded with it) triton's launch raises its error
        return kernel
    except Exception:
        _log.debug("kiln.inductor: %s is launched through triton's launcher", getattr(compiled, "name", "?"),
                   exc_info=True)
        return None
