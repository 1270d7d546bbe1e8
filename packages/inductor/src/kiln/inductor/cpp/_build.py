"""CppBuilder: C++ source of CPU kernels in, a loaded shared library out, through a disk cache.

kiln.inductor emits one C++ translation unit per compiled graph, exporting plain ``extern "C"``
functions. This module compiles such a source with the system C++ compiler and loads the
result with ctypes. A cold compile costs 0.05-0.4 s per file (more with heavy headers), so
every built library is kept.

Cache layout, in ``<cache_dir>/cpp/``, all names derived from one key:
- ``<key>.cpp``: the source, kept for debugging (compiler messages name this path);
- ``<key>.so``: the library;
- ``<key>.sha256``: the integrity record, the sha256 hex digest of the ``.so`` bytes;
- ``*.tmp``: files being written (pid and a random suffix in the name); a killed writer
  may leave one behind, and nothing ever reads them.

Invariants:
- The key is explicit: a hash of the source, the compiler command and its version, the
  flags, the ISA and a format version. Nothing else decides what a library contains.
- A ``.so`` is loaded only when its record exists and matches its bytes. Every file reaches
  its final name by ``os.replace`` of a complete temporary file, the ``.so`` before its
  record, so a record always describes a complete ``.so`` of its key. A ``.so`` without a
  record counts as absent; one that does not match its record (truncated, torn by a crash,
  altered) is invalidated (record deleted) and rebuilt. That check is also why no fsync is
  needed.
- Processes may build the same key at once: each writes its own temporary files and the
  renames are atomic, so the last writer wins with the same content.
- Within a process, a builder answers a key it has loaded from a dict, with no file I/O.
  dlopen itself answers a path loaded before with that mapping, which is sound because only
  ``os.replace`` writes these paths: a mapped file is never changed in place.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import secrets
import shlex
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

__all__ = [
    "BuildStats",
    "CppBuildError",
    "CppBuilder",
    "KernelLibrary",
    "compile_flags",
    "compiler",
    "compiler_version",
    "cpu_isa",
    "link_flags",
]

# Bump when the layout of the cache or the meaning of its files changes.
_FORMAT_VERSION = 1

# No -ffast-math (results must match eager closely) and no -march=native (the ISA is in the
# key, so a cache copied to another machine of the same ISA stays valid). No contraction
# (g++ fuses ``a * b + c`` into an fma by default where the ISA has one): a value must have the
# same bits used inline as stored and loaded by another kernel. A forward kernel fused the
# mean's product into ``y - sum * (1 / n)`` while the backward recomputed it from the
# rounded mean it saved; ``amin``'s backward (``x == amin(x)``) then found no minimum and
# divided 0 by 0 (NaN gradients; tests/inductor/test_kernel_fuzz.py, wide seed 1150).
_BASE_FLAGS = (
    "-O3", "-shared", "-fPIC", "-std=c++17", "-fopenmp", "-fno-math-errno", "-fno-trapping-math",
    "-ffp-contract=off",
)
_ISA_FLAGS: dict[str, tuple[str, ...]] = {
    "default": (),
    "avx2": ("-mavx2", "-mfma", "-mf16c"),
    "avx512": ("-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mavx2", "-mfma", "-mf16c"),
}
_STDERR_LIMIT = 4000


@functools.cache
def cpu_isa() -> str:
    """The ISA kernels are built for: a key of ``_ISA_FLAGS`` ("avx2", "avx512" or "default")."""
    capability = torch.backends.cpu.get_cpu_capability().lower()
    return capability if capability in _ISA_FLAGS else "default"


def compile_flags(isa: str | None = None) -> tuple[str, ...]:
    """The compiler flags for ``isa`` (default: ``cpu_isa()``), source and output excluded."""
    isa = cpu_isa() if isa is None else isa
    if isa not in _ISA_FLAGS:
        raise ValueError(f"unknown ISA {isa!r}; expected one of {sorted(_ISA_FLAGS)}")
    return _BASE_FLAGS + _ISA_FLAGS[isa]


@functools.cache
def link_flags() -> tuple[str, ...]:
    """Libraries the kernels link: glibc's vector math (libmvec), where there is one, so loops
    calling exp/erf/tanh/... vectorize (the kernel header declares its vector variants)."""
    import ctypes.util

    return ("-DKILN_LIBMVEC", "-lmvec") if ctypes.util.find_library("mvec") else ()


def compiler() -> str:
    """The C++ compiler command: ``$CXX`` if set (read at each call), else ``g++``."""
    return os.environ.get("CXX") or "g++"


def compiler_version() -> str:
    """The first line of ``<compiler> --version``; one subprocess per process and compiler."""
    return _version_of(compiler())


@functools.cache
def _version_of(cxx: str) -> str:
    try:
        done = subprocess.run([*shlex.split(cxx), "--version"], capture_output=True, text=True,
                              check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        raise CppBuildError(f"C++ compiler {cxx!r} is not usable (set CXX): {error}") from error
    return done.stdout.splitlines()[0].strip() if done.stdout else cxx


class CppBuildError(RuntimeError):
    """The C++ compiler failed (or could not be run)."""

    @classmethod
    def from_failure(cls, command: list[str], stderr: str, source_path: Path) -> CppBuildError:
        """The error for a failed compile: the command, its stderr (truncated), the kept source."""
        if len(stderr) > _STDERR_LIMIT:
            stderr = stderr[:_STDERR_LIMIT] + f"\n... ({len(stderr) - _STDERR_LIMIT} more characters)"
        return cls(f"C++ compile failed: {shlex.join(command)}\nsource kept at {source_path}\n"
                   f"{stderr}")


@dataclass(slots=True)
class BuildStats:
    """What a builder has done: counts of each outcome and the seconds of its last compile."""

    compiled: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    rebuilt_corrupt: int = 0  # of ``compiled``: entries whose .so did not match its record
    last_compile_s: float = field(default=0.0, compare=False)


@dataclass(slots=True)
class KernelLibrary:
    """One loaded library: its path, its cache key and the ctypes handle."""

    path: Path
    key: str
    handle: ctypes.CDLL
    _functions: dict[str, Callable[..., Any]] = field(default_factory=dict, repr=False)

    def function(self, name: str, argtypes, restype=None):
        """The exported function ``name`` with ``argtypes``/``restype`` set (one object per name)."""
        argtypes = tuple(argtypes)
        fn = self._functions.get(name)
        if fn is None:
            fn = self.handle[name]
            fn.argtypes, fn.restype = argtypes, restype
            self._functions[name] = fn
        elif tuple(fn.argtypes) != argtypes or fn.restype is not restype:
            raise ValueError(f"{name} was already bound with argtypes {fn.argtypes}, "
                             f"restype {fn.restype}")
        return fn


@dataclass(slots=True)
class _Compile:
    """One running compiler process and where its output goes."""

    key: str
    command: list[str]
    source_path: Path
    output: Path  # a temporary file in the cache directory
    process: subprocess.Popen
    started: float


class CppBuilder:
    """Compiles, caches and loads kernel libraries under ``<cache_dir>/cpp``."""

    def __init__(self, cache_dir: str | os.PathLike):
        self.directory = Path(cache_dir) / "cpp"
        self.stats = BuildStats()
        self._loaded: dict[str, KernelLibrary] = {}

    def key(self, source: str) -> str:
        """The cache key of ``source``: 32 hex digits of a sha256 over everything that matters."""
        build = [_FORMAT_VERSION, compiler(), compiler_version(), list(compile_flags()), list(link_flags()),
                 cpu_isa()]
        # JSON never holds a raw NUL, so the separator keeps the two parts apart
        digest = hashlib.sha256(json.dumps(build).encode() + b"\0")
        digest.update(source.encode())
        return digest.hexdigest()[:32]

    def load(self, source: str) -> KernelLibrary:
        """The loaded library built from ``source`` (from memory, disk, or a compile)."""
        return self.load_many([source])[0]

    def load_many(self, sources: list[str]) -> list[KernelLibrary]:
        """The libraries of ``sources`` in order; the missing ones compile in parallel."""
        keys = [self.key(source) for source in sources]
        missing: dict[str, str] = {}
        for key, source in zip(keys, sources, strict=True):
            if key in self._loaded:
                self.stats.memory_hits += 1
            elif key not in missing:
                state = self._disk_state(key)
                if state == "valid":
                    self.stats.disk_hits += 1
                    self._loaded[key] = self._open(key)
                else:
                    if state == "corrupt":
                        self.stats.rebuilt_corrupt += 1
                    missing[key] = source
        self._compile_all(missing)
        for key in missing:
            self._loaded[key] = self._open(key)
        return [self._loaded[key] for key in keys]

    def _path(self, key: str, suffix: str) -> Path:
        return self.directory / f"{key}{suffix}"

    def _disk_state(self, key: str) -> Literal["valid", "absent", "corrupt"]:
        """Whether ``key``'s .so is complete; a corrupt one is invalidated (record deleted)."""
        record = self._path(key, ".sha256")
        # the record first: writers rename the .so before it, so the .so seen next is complete
        try:
            expected = record.read_text().strip()
            actual = hashlib.sha256(self._path(key, ".so").read_bytes()).hexdigest()
        except FileNotFoundError:
            return "absent"
        if actual == expected:
            return "valid"
        record.unlink(missing_ok=True)
        return "corrupt"

    def _open(self, key: str) -> KernelLibrary:
        path = self._path(key, ".so")
        return KernelLibrary(path, key, ctypes.CDLL(str(path), mode=os.RTLD_LOCAL))

    def _compile_all(self, sources: dict[str, str]) -> None:
        """Compile each key's source into the cache, at most ``os.cpu_count()`` at a time."""
        if not sources:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        limit = os.cpu_count() or 1
        running: deque[_Compile] = deque()
        failures: list[CppBuildError | None] = []
        try:
            for key, source in sources.items():
                if len(running) >= limit:
                    failures.append(self._finish(running.popleft()))
                running.append(self._start(key, source))
        finally:  # never leave compiler processes behind, even when starting one failed
            while running:
                failures.append(self._finish(running.popleft()))
        first = next((failure for failure in failures if failure is not None), None)
        if first is not None:
            raise first

    def _start(self, key: str, source: str) -> _Compile:
        source_path = self._path(key, ".cpp")
        # atomic too: another process may be compiling from this path right now
        _write_atomic(source_path, source.encode())
        output = self.directory / _temp_name(f"{key}.so")
        defines = [f for f in link_flags() if f.startswith("-D")]
        libraries = [f for f in link_flags() if not f.startswith("-D")]
        command = [*shlex.split(compiler()), *compile_flags(), *defines, str(source_path), "-o", str(output),
                   *libraries]
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True, errors="replace")
        return _Compile(key, command, source_path, output, process, time.perf_counter())

    def _finish(self, job: _Compile) -> CppBuildError | None:
        """Wait for ``job``; on success move its .so and then its record into place."""
        _, stderr = job.process.communicate()
        seconds = time.perf_counter() - job.started
        if job.process.returncode != 0:
            job.output.unlink(missing_ok=True)
            return CppBuildError.from_failure(job.command, stderr, job.source_path)
        digest = hashlib.sha256(job.output.read_bytes()).hexdigest()
        os.replace(job.output, self._path(job.key, ".so"))
        _write_atomic(self._path(job.key, ".sha256"), digest.encode())
        self.stats.compiled += 1
        self.stats.last_compile_s = seconds
        return None


def _temp_name(name: str) -> str:
    return f"{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old content or all of the new."""
    temp = path.with_name(_temp_name(path.name))
    try:
        temp.write_bytes(data)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
