"""A graph's compiled Triton kernels loaded straight from triton's cache in a new process.

A graph loaded from kiln's disk cache used to reach its kernels through triton's JIT: the
module's ``@triton.jit`` definitions (``inspect.getsourcelines`` each, 0.8 ms on an H100), then
at each kernel's first launch ``JITFunction.run``: binding, specialization, the compile key
and a cache lookup reading every file triton kept (its IRs and the binary), 2.4 ms a kernel;
most of a warm start (``benchmarks/restart_bench.py``, profiles in benchmarks/results/).

Here the graph's record keeps, per kernel, what triton compiled for the first call: the
``Launch`` key of its arguments (``_launch``), triton's hash of the compile (the name of its
cache entry) and what triton's launcher is built from (the argument signature, the
constants, the argument names). A new process builds the ``CompiledKernel`` from the cache
entry's metadata and binary only, loads it (for torch's static CUDA launcher where it takes
it, ``_static_launch``; else ``_init_handles``: the module onto the device, triton's
launcher), and hands it to the ``Launch`` under that key: the wrapper's first call
launches it directly, as its later calls do. The triton module is imported only when a
launch needs the JIT (another key, a launch hook, another device).

The invariant: a kernel reaches a ``Launch`` under a key only where triton's JIT would give
that ``Launch`` the same binary for arguments of that key. Why this holds:

- the key is the one ``Launch`` computes from the arguments (at least as fine as triton's
  specialization), computed from the precompile's arguments, which triton specialized the
  kernel for (``key_of_warmup``); in the process that compiled it the kernel is the object
  triton's JIT keeps for those arguments;
- triton's hash names the compile of this source (the module's text, which the graph key
  fixes) with these options for this target; the entry is used only when triton's version,
  its cache-invalidating environment variables, kiln's runtime file (``runtime_identity``)
  and the device's compute capability are those it was compiled with (``identity``);
- the binary is read from triton's own cache under that hash; a missing or partial entry,
  or any error loading it, leaves the key to the JIT.
"""

from __future__ import annotations

import json
import logging
import threading
import types
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["Deferred", "identity", "key_of_warmup", "load_entry", "static_entry"]

_log = logging.getLogger("kiln")

_PLAIN = (int, float, bool, str, type(None))


def identity(index: int) -> dict[str, Any] | None:
    """What a kernel compiled on CUDA device ``index`` depends on besides its source and
    options (see the module docstring), or None where it cannot be told (no such triton)."""
    try:
        import triton
        from triton.compiler import compiler

        from ._runtime import runtime_identity

        env = compiler.get_cache_invalidating_env_vars()
        major, minor = torch.cuda.get_device_capability(index)
    except Exception:
        return None
    if not isinstance(env, dict) or not all(isinstance(v, _PLAIN) for v in env.values()):
        return None
    return {"triton": triton.__version__, "runtime": runtime_identity(), "env": dict(sorted(env.items())),
            "capability": [major, minor]}


def key_of_warmup(index: int, kinds: list[str], args: list[Any]) -> tuple | None:
    """The ``Launch`` key of arguments made for a kernel's ``warmup`` (``_precompile.warmup_args``):
    a dtype stands for a tensor triton takes as aligned to 16 bytes; None for an argument of
    another sort."""
    from ._launch import _int_class, _int_range

    parts: list[Any] = [index]
    for kind, arg in zip(kinds, args, strict=True):
        if kind == "tensor" and isinstance(arg, torch.dtype):
            parts.append(0)
        elif kind == "tensor" and isinstance(arg, torch.Tensor):
            parts.append(arg.data_ptr() & 15)
        elif kind == "int" and type(arg) is int:
            parts.append(_int_class(arg))
        elif kind == "seed" and type(arg) is int:
            parts.append(_int_range(arg))
        else:
            return None
    return tuple(parts)


def static_entry(kernel: Any, key: tuple) -> dict[str, Any] | None:
    """The record of compiled kernel ``kernel`` (a triton ``CompiledKernel``) under ``Launch``
    key ``key``, or None where some part is not plain data."""
    src = getattr(kernel, "src", None)
    fn = getattr(src, "fn", None)
    try:
        # pairs, in order: the launcher takes the arguments in the signature's order, and the
        # cache's records are written with sorted keys
        signature = [[k, v] for k, v in dict(src.signature).items()]
        constants = [[list(k) if isinstance(k, tuple) else k, v] for k, v in dict(src.constants).items()]
        arg_names = list(fn.arg_names)
        entry = {"key": list(key), "hash": kernel.hash, "name": kernel.name, "signature": signature,
                 "constants": constants, "arg_names": arg_names}
    except Exception:
        return None
    plain = [*entry["key"], entry["hash"], entry["name"], *(p for pair in signature for p in pair), *arg_names,
             *(v for _, v in constants), *(p for k, _ in constants for p in (k if isinstance(k, list) else [k]))]
    return entry if all(isinstance(p, _PLAIN) for p in plain) else None


class _Function:
    """What triton's launcher reads of a kernel's function: its argument names."""

    def __init__(self, name: str, arg_names: list[str]) -> None:
        self.__name__, self.arg_names = name, arg_names


class _Source:
    """What triton's ``CompiledKernel`` and launcher read of the source it was compiled from."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.fn = _Function(entry["name"], list(entry["arg_names"]))
        self.name = entry["name"]
        self.signature = {k: v for k, v in entry["signature"]}
        self.constants = {tuple(k) if isinstance(k, list) else k: v for k, v in entry["constants"]}


class _Read:
    """What ``_static_launch.as_static`` reads of a compiled kernel, from triton's cache entry:
    its source (the record's), name, files and metadata (attributes of the entry's JSON)."""

    def __init__(self, src: _Source, name: str, files: dict[str, str]) -> None:
        self.src, self.name, self.metadata_group = src, name, files
        with open(files[f"{name}.json"]) as f:
            self.metadata = types.SimpleNamespace(**json.load(f))


def load_entry(entry: dict[str, Any], declared: int | None = None) -> tuple[tuple, Any] | None:
    """The key and the loaded kernel of a record ``static_entry`` made, or None where its
    cache entry is missing or does not load here (logged at debug level): a
    ``_static_launch.StaticKernel`` where torch's static launcher takes it for a launch of
    ``declared`` arguments, else triton's ``CompiledKernel`` with its launcher."""
    try:
        from triton.compiler import CompiledKernel
        from triton.runtime.cache import get_cache_manager

        from ._static_launch import as_static

        key = tuple(entry["key"])
        name = entry["name"]
        group = get_cache_manager(entry["hash"]).get_group(f"{name}.json") or {}
        files = {f: p for f, p in group.items() if f in (f"{name}.json", f"{name}.cubin")}
        if len(files) != 2:
            return None
        with torch.cuda.device(key[0]):
            # for the static launcher, the metadata as read (triton's CompiledKernel makes a
            # namedtuple class and its backend's packed metadata per kernel: a third of a warm
            # start's loading on the H100)
            read = _Read(_Source(entry), name, files)
            static = as_static(read, key[0], declared)
            if static is not None:
                return key, static
            kernel = CompiledKernel(read.src, files, entry["hash"])
            kernel._init_handles()
        if getattr(kernel, "function", None) is None:
            return None
        return key, kernel
    except Exception:
        _log.debug("kiln.inductor: a cached Triton kernel is loaded through triton instead", exc_info=True)
        return None


class Deferred:
    """A triton function whose module is imported only when first needed: ``load()`` returns
    the module's functions by name. Stands for the function in a ``Launch`` whose kernels
    came from ``load_entry``; ``arg_names`` as the function's."""

    def __init__(self, name: str, arg_names: list[str], load: Callable[[], dict[str, Any]]) -> None:
        self.__name__, self.arg_names = name, list(arg_names)
        self._load = load
        self._fn: Any = None
        self._lock = threading.Lock()

    def resolve(self) -> Any:
        if self._fn is None:
            with self._lock:
                if self._fn is None:
                    self._fn = self._load()[self.__name__]
        return self._fn

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve().run(*args, **kwargs)
