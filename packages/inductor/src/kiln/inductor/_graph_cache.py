"""The whole-graph cache: an ATen graph's compiled form (its wrapper's source, the C++ source
of its kernels, the objects the wrapper refers to) on disk, keyed by an explicit hash, so
that a process compiling a graph an earlier process compiled skips lowering, scheduling and
code generation, and the C++ build (the library comes from ``cpp._build``'s cache).

The key (``graph_key``) hashes:
- the graph: every node's kind, target, arguments and ``meta["val"]`` (dtype, device, sizes,
  strides and storage offset, symbolic ones as the expressions the lowering sees, simplified
  by their ShapeEnv, with the value ranges of their symbols; which values share a storage),
  and the bytes of every tensor constant (``graph_description``);
- the stage's config (``InductorConfig``, less where the cache is and the CUDA graph fields,
  which change how the compiled graph is run, not what is compiled);
- kiln's own sources (``source_digest``: the packages whose code decides the output), the
  torch and Python versions, the C++ compiler, its version and flags, and the CPU's ISA.

A graph holding something the description cannot name across processes (a Python object
without an import path, a quantized tensor) has no key and is compiled each time.

The record (``record_of``) holds the wrapper source, the C++ sources (one per library,
``cpp._libraries``) with their kernels' parameter kinds, and the wrapper's global objects by name (``_encode_global``: kernel functions by
name, ATen ops by their qualified name, functions by import path, dtypes and devices by
name, tensor constants by value), and for Triton kernels what triton compiled for the first
call (``triton._static``: each kernel's ``Launch`` key and triton's cache entry).
``load_compiled`` rebuilds the callable from it: the libraries through the ``CppBuilder``
(whose integrity check covers each ``.so``), the Triton kernels from triton's cache where
their identity is this process's (the module imported only if a launch needs triton's JIT),
then the wrapper's ``call``. An entry that fails its check (``EntryStore``) or cannot be rebuilt is
logged and compiled again, never loaded.
"""

from __future__ import annotations

import base64
import ctypes
import dataclasses
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import io
import json
import linecache
import logging
import marshal
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sympy
import torch

from kiln.fxgraph import GraphModule, Node

from ._config import InductorConfig, cache_root
from ._cudagraph_plan import CudagraphFacts
from ._cudagraphs import CudagraphGroup, with_cudagraphs
from ._entries import EntryStore
from ._lower_random import SEED_CELL, SeedCell
from .triton._launch import Launch

__all__ = [
    "CompiledGraph",
    "GraphDescriber",
    "Uncacheable",
    "bind_kernels",
    "bind_libraries",
    "builder_of",
    "cache_identity",
    "code_digest",
    "exec_wrapper",
    "graph_description",
    "graph_key",
    "import_path",
    "kernel_params",
    "load_compiled",
    "record_of",
    "seed_launches",
    "seeds_in_memory",
    "source_digest",
    "store_compiled",
]

_log = logging.getLogger("kiln.cache")
_code_log = logging.getLogger("kiln.output_code")
# Bump when the record's fields or their meaning change.
# 2: the Triton module ("triton"); 3: the CUDA graph facts ("cudagraph"); 4: the C++ sources and
# parameter kinds per library ("cpp", "params": lists, ``cpp._libraries``)
_RECORD_VERSION = 4
_ARGTYPES = {"in": ctypes.c_void_p, "out": ctypes.c_void_p, "size": ctypes.c_int64}


@dataclass(slots=True)
class CompiledGraph:
    """The compiled callable (``call(args)``: a list it empties; with ``InductorConfig.cudagraphs``
    a ``CudaGraphRunner`` replaying it from CUDA graphs, ``_cudagraphs``) and what it is made of;
    ``cache_key``: its whole-graph cache key (None: not cacheable), ``from_cache``: whether
    it was loaded from that cache rather than compiled."""

    call: Callable[[list[Any]], tuple]
    wrapper_code: str
    cpp_libraries: tuple[str, ...]  # the sources of its C++ libraries (``cpp._libraries``)
    kernels: int
    externs: int
    fallbacks: dict[str, str]
    cache_key: str | None = None
    from_cache: bool = False
    # per output: the strides it is returned with where they are not the traced ones (a layout
    # inductor chose for a value only the backward reads: ``_layout``; per item for a tuple), else None
    output_strides: tuple[Any, ...] = ()
    triton_code: str = ""  # the module of its Triton kernels ("" when it has none)
    # max_autotune: what was measured for each Triton kernel (``triton._autotune.TuneResult``;
    # empty for a graph from the cache: its wrapper holds the launches chosen then)
    autotuned: list[Any] = dataclasses.field(default_factory=list)
    # what recording it as CUDA graphs needs to know (``_cudagraph_plan``; None: not analysed)
    cudagraph_facts: CudagraphFacts | None = None
    # per kernel, by name: the ATen nodes its stages compute, in order (what it fused)
    fused: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the seed its Triton kernels read from memory (``_lower_random.SeedCell``; None: none does)
    seed: Any = None

    @property
    def cpp_code(self) -> str:
        """The text of its C++ libraries, one after another ("" when it has none)."""
        return "".join(self.cpp_libraries)


class Uncacheable(Exception):
    """The graph (or its compiled form) holds something no other process can name."""


# ---------------------------------------------------------------------------------- the key
def source_digest(*packages: str) -> str:
    """A sha256 of the Python sources of the ``kiln.<package>`` packages (every ``.py`` file,
    with its path), each read once per process: a change of kiln's code is a change of key."""
    return hashlib.sha256("".join(_package_digest(p) for p in packages).encode()).hexdigest()


@functools.cache
def _package_digest(package: str) -> str:
    digest = hashlib.sha256(package.encode())
    spec = importlib.util.find_spec(f"kiln.{package}")
    for root in list(spec.submodule_search_locations or []) if spec is not None else []:
        for path in sorted(Path(root).rglob("*.py")):
            digest.update(f"\0{path.relative_to(root)}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def code_digest(code: types.CodeType) -> str:
    """A sha256 of what a code object does: its bytecode, names, signature and constants
    (nested code objects by their own digest), the same in every process."""
    digest = hashlib.sha256(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars, code.co_argcount,
                        code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags)).encode())
    for const in code.co_consts:
        digest.update(b"\0" + _const_text(const).encode())
    return digest.hexdigest()


def _const_text(const: Any) -> str:
    if isinstance(const, types.CodeType):
        return "code:" + code_digest(const)
    if isinstance(const, tuple):
        return "(" + ",".join(_const_text(c) for c in const) + ")"
    if isinstance(const, frozenset):  # its repr's order follows string hashing, which varies
        return "{" + ",".join(sorted(_const_text(c) for c in const)) + "}"
    return f"{type(const).__name__}:{const!r}"


def import_path(obj: Any) -> tuple[str, str] | None:
    """``(module, qualname)`` when importing the module and following the qualname gives
    ``obj`` itself, else None."""
    module = getattr(obj, "__module__", None)
    if module is None and hasattr(obj, "__objclass__"):  # a method descriptor of a C type
        module = getattr(obj.__objclass__, "__module__", None)
        qualname = f"{obj.__objclass__.__qualname__}.{obj.__name__}"
    else:
        qualname = getattr(obj, "__qualname__", None)
    if type(module) is not str or type(qualname) is not str or "<" in qualname:
        return None
    value: Any = sys.modules.get(module)
    for part in qualname.split("."):
        value = getattr(value, part, None)
    if value is obj:
        return module, qualname
    # torch's functions bound from a C class (``torch.empty_strided``): the module's name for it
    name = getattr(obj, "__name__", None)
    if type(name) is str and getattr(sys.modules.get(module), name, None) is obj:
        return module, name
    return None


class GraphDescriber:
    """JSON-able descriptions of graph values that are equal exactly when two processes
    would compile the same thing from them (see the module docstring); raises
    ``Uncacheable`` for a value it cannot name."""

    def __init__(self) -> None:
        self.nodes: dict[Node, int] = {}
        self.symbols: dict[str, Any] = {}  # name -> (symbol, its ShapeEnv or None)
        self._storages: dict[tuple[bool, int], int] = {}
        self._tensors: dict[int, int] = {}

    def value(self, v: Any) -> Any:
        t = type(v)
        if v is None or t is bool or t is int or t is str:
            return v
        if t is float or t is complex:
            return [t.__name__, repr(v)]
        if t is Node:
            return ["node", self.nodes[v]]
        if t is list or t is tuple or t is torch.Size:
            return [t.__name__, *(self.value(x) for x in v)]
        if t is dict:
            return ["dict", *([self.value(k), self.value(x)] for k, x in v.items())]
        if t is slice:
            return ["slice", self.value(v.start), self.value(v.stop), self.value(v.step)]
        if v is Ellipsis:
            return ["ellipsis"]
        if isinstance(v, (torch.dtype, torch.layout, torch.memory_format)):
            return ["torch", str(v)]
        if t is torch.device:
            return ["device", str(v)]
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return ["sym", t.__name__, self.expr(v)]
        if isinstance(v, sympy.Basic):
            return ["expr", self.expr(v)]
        if isinstance(v, torch.Tensor):
            return self.tensor(v)
        if isinstance(v, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
            return ["op", str(v)]
        path = import_path(v)
        if path is None:
            raise Uncacheable(f"{type(v).__name__} {v!r:.60} has no import path")
        if isinstance(v, types.FunctionType):  # a Python function: what it does, not only its name
            if v.__closure__:
                raise Uncacheable(f"the function {path[1]} reads a closure")
            return ["py", *path, code_digest(v.__code__), self.value(v.__defaults__), self.value(v.__kwdefaults__)]
        return ["py", *path]

    def expr(self, v: Any) -> str:
        """A size expression as the lowering sees it: a SymInt's simplified by its ShapeEnv
        (``_ir.sym``); its symbols noted with their ShapeEnv (for ``ranges``)."""
        env = None
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            node = v.node
            expr = getattr(node, "expr", None)
            if expr is None:
                raise Uncacheable(f"a {type(v).__name__} without an expression")
            env = getattr(node, "env", None)
            v = env.simplify(expr) if env is not None else expr
        if not isinstance(v, sympy.Basic):
            return repr(v)
        for symbol in v.free_symbols:
            self.symbols.setdefault(symbol.name, (symbol, env))
        return sympy.srepr(v)

    def tensor(self, t: torch.Tensor) -> list[Any]:
        """Metadata (and, for a real tensor, the bytes); which earlier tensor is the same
        object and which shares its storage."""
        if t.layout != torch.strided or t.is_quantized:
            raise Uncacheable(f"a {t.layout} tensor")
        same = self._tensors.setdefault(id(t), len(self._tensors))
        storage = getattr(t, "fake_storage", None)
        fake = storage is not None
        key = (fake, id(storage) if fake else t.untyped_storage().data_ptr())
        shared = self._storages.setdefault(key, len(self._storages))
        described = ["tensor", str(t.dtype), str(t.device), [self.expr(s) for s in t.shape],
                     [self.expr(s) for s in t.stride()], self.expr(t.storage_offset()), t.requires_grad,
                     same, shared]
        if not fake:
            if t.device.type != "cpu":
                raise Uncacheable(f"a constant on {t.device}")
            plain = t.detach().resolve_conj().resolve_neg().contiguous()
            data = plain.reshape(-1).view(torch.uint8).numpy().tobytes()
            described.append(hashlib.sha256(data).hexdigest())
        return described

    def node(self, n: Node, gm: GraphModule, metas: bool) -> list[Any]:
        self.nodes[n] = len(self.nodes)
        described = [n.op, n.target if type(n.target) is str else self.value(n.target), self.value(n.args),
                     self.value(n.kwargs)]
        if n.op == "get_attr":
            described.append(self.value(gm.get_attr(n.target)))
        if metas:
            described.append(self.value(n.meta.get("val")))
        if n.op == "output":  # which outputs may take another layout (``_layout``)
            described.append(self.value(n.meta.get("free_layout")))
        return described

    def ranges(self) -> list[Any]:
        """The value range of every symbol described so far, from its ShapeEnv."""
        out = []
        for name in sorted(self.symbols):
            symbol, env = self.symbols[name]
            out.append([name, str(env.range_of(symbol)) if env is not None else None])
        return out


def graph_description(gm: GraphModule, describer: GraphDescriber | None = None, *, metas: bool = True) -> list[Any]:
    """Every node of ``gm`` described (``GraphDescriber``), with its ``meta["val"]`` when
    ``metas``; raises ``Uncacheable``."""
    describer = describer or GraphDescriber()
    return [describer.node(n, gm, metas) for n in gm.graph.nodes]


def _config_fields(config: InductorConfig) -> dict[str, Any]:
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
              if f.name not in ("cache_dir", "graph_cache", "cudagraphs", "cudagraph_max_shapes", "compile_processes")}
    if seeds_in_memory(config):  # the Triton kernels of random ops read their seed from memory
        fields["seeds_in_memory"] = True
    return fields


def seeds_in_memory(config: InductorConfig) -> bool:
    """Whether Triton kernels computing random ops read the seed from device memory
    (``_lower_random.SeedCell``): under CUDA graphs, which keep a launch's arguments."""
    return config.cudagraphs and config.random_in_kernels


@functools.cache
def _build_identity() -> list[Any]:
    from .cpp._build import compile_flags, compiler, compiler_version, cpu_isa, link_flags

    return [torch.__version__, torch.version.git_version, sys.implementation.cache_tag, compiler(),
            compiler_version(), list(compile_flags()), list(link_flags()), cpu_isa(),
            source_digest("inductor", "symshapes", "fxgraph"), _triton_version()]


def _triton_version() -> str | None:
    """The installed triton's version (None: not installed); read without importing it."""
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return None


def cache_identity(config: InductorConfig) -> list[Any]:
    """What every key of a graph compiled with ``config`` shares: the record version, kiln's
    sources, the torch and Python versions, the C++ compiler, its version and flags, the ISA,
    and the config (less where the cache is, the CUDA graph fields and whether worker processes
    compile the Triton kernels); with ``max_autotune``,
    the GPUs and whether float32 matrix products may use TF32 (a template's ``tl.dot`` follows it)."""
    identity = [_RECORD_VERSION, _build_identity(), _config_fields(config)]
    if config.max_autotune:  # the wrapper holds launches measured on these GPUs
        identity.append(_gpu_identity())
        # and maybe matmul templates, whose float32 products are as precise as torch allows then
        identity.append(bool(torch.backends.cuda.matmul.allow_tf32))
    return identity


@functools.cache
def _gpu_identity() -> list[Any] | None:
    """The name and compute capability of each visible GPU (None: no CUDA)."""
    if not torch.cuda.is_available():
        return None
    return [[torch.cuda.get_device_name(k), list(torch.cuda.get_device_capability(k))]
            for k in range(torch.cuda.device_count())]


def graph_key(gm: GraphModule, config: InductorConfig) -> str | None:
    """The whole-graph cache key of the ATen graph ``gm`` compiled with ``config`` (see the
    module docstring), or None when it cannot have one (the reason logged)."""
    describer = GraphDescriber()
    try:
        # deterministic algorithms: the lowering keeps some ops ATen calls under them (scatters on CUDA)
        parts = [cache_identity(config), graph_description(gm, describer), describer.ranges(),
                 torch.are_deterministic_algorithms_enabled()]
        return hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()[:40]
    except Uncacheable as why:
        _log.info("kiln.inductor: an ATen graph is not cached on disk: %s", why)
    except Exception:  # an error of kiln's: the graph is compiled, not cached
        _log.warning("kiln.inductor: the cache key of an ATen graph failed; it is not cached", exc_info=True)
    return None


# ------------------------------------------------------------------------------- the record
def _encode_global(obj: Any, kernel_names: dict[int, str]) -> list[Any]:
    if id(obj) in kernel_names:
        return ["kernel", kernel_names[id(obj)]]
    if isinstance(obj, SeedCell):  # a new cell per load: its seed is drawn per call
        return ["seed"]
    if isinstance(obj, Launch) and id(obj.fn) in kernel_names:  # made again around the loaded kernel
        return ["launch", kernel_names[id(obj.fn)], obj.names, obj.kinds, obj.meta]
    if isinstance(obj, (torch.dtype, torch.layout, torch.memory_format)):
        name = str(obj).removeprefix("torch.")
        if getattr(torch, name, None) is obj:
            return ["torch", name]
    if type(obj) is torch.device:
        return ["device", str(obj)]
    if isinstance(obj, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return ["op", str(obj)]
    if type(obj) is torch.Tensor and obj.layout == torch.strided and obj.device.type == "cpu" \
            and not obj.requires_grad:
        buffer = io.BytesIO()
        torch.save(obj.detach(), buffer)  # with its storage, offset and strides (kernels index by them)
        return ["tensor", base64.b64encode(buffer.getvalue()).decode()]
    path = import_path(obj)
    if path is not None:
        return ["py", *path]
    raise Uncacheable(f"the wrapper refers to a {type(obj).__name__} with no name in other processes")


def _decode_global(entry: list[Any], functions: dict[str, Any]) -> Any:
    kind = entry[0]
    if kind == "kernel":
        return functions[entry[1]]
    if kind == "launch":
        return Launch(functions[entry[1]], *entry[2:])
    if kind == "seed":
        return SeedCell()
    if kind == "torch":
        return getattr(torch, entry[1])
    if kind == "device":
        return torch.device(entry[1])
    if kind == "op":
        namespace, name, *overload = entry[1].split(".")
        op = getattr(getattr(torch.ops, namespace), name)
        return getattr(op, overload[0]) if overload else op
    if kind == "tensor":
        return torch.load(io.BytesIO(base64.b64decode(entry[1])), weights_only=True)
    if kind == "py":
        value: Any = importlib.import_module(entry[1])
        for part in entry[2].split("."):
            value = getattr(value, part)
        return value
    raise ValueError(f"unknown global kind {kind!r}")


def record_of(compiled: CompiledGraph, wrapper_globals: dict[str, Any], functions: dict[str, Any],
              params: list[dict[str, list[str]]]) -> dict[str, Any]:
    """The cache record of ``compiled``: ``wrapper_globals`` are its wrapper's globals,
    ``functions`` its loaded kernel functions by name, ``params`` per C++ library each of its
    kernels' parameter kinds; raises ``Uncacheable``."""
    kernel_names = {id(fn): name for name, fn in functions.items()}
    return {
        "version": _RECORD_VERSION,
        "wrapper": compiled.wrapper_code,
        "cpp": list(compiled.cpp_libraries),
        "triton": compiled.triton_code,
        "params": params,
        "globals": {name: _encode_global(obj, kernel_names) for name, obj in wrapper_globals.items()},
        "kernels": compiled.kernels,
        "externs": compiled.externs,
        "fallbacks": compiled.fallbacks,
        "output_strides": list(compiled.output_strides),
        "cudagraph": compiled.cudagraph_facts.to_json() if compiled.cudagraph_facts is not None else None,
        "fused": compiled.fused,
        "triton_hashes": _triton_hashes(functions) if compiled.triton_code else None,
        "wrapper_code": _wrapper_code_record(compiled.wrapper_code),
    }


def _triton_hashes(functions: dict[str, Any]) -> Any:
    from .triton._runtime import kernel_hashes

    return kernel_hashes(functions)


def _store(config: InductorConfig) -> EntryStore:
    return EntryStore(cache_root(config), "graphs")


def store_compiled(key: str, compiled: CompiledGraph, wrapper_globals: dict[str, Any],
                   functions: dict[str, Any], params: list[dict[str, list[str]]], config: InductorConfig,
                   precompiled: dict[str, tuple[tuple, Any]] | None = None) -> bool:
    """Write the record of ``compiled`` under ``key``; False when it cannot be (logged).
    ``precompiled``: by name, the Triton kernels compiled for the first call and their
    ``Launch`` keys (``triton._static``)."""
    try:
        record = record_of(compiled, wrapper_globals, functions, params)
        record["triton_static"] = _static_record(precompiled or {})
    except Uncacheable as why:
        _log.info("kiln.inductor: a compiled graph is not cached on disk: %s", why)
        return False
    except Exception:  # an error of kiln's: the graph was compiled, it is not cached
        _log.warning("kiln.inductor: recording a compiled graph failed; it is not cached", exc_info=True)
        return False
    return _store(config).write(key, record)


def load_compiled(key: str, config: InductorConfig, builders: dict[str, Any],
                  group: CudagraphGroup | None = None) -> CompiledGraph | None:
    """The compiled graph stored under ``key``, rebuilt (its library loaded through
    ``builders``' CppBuilder of the cache directory), or None: absent, corrupt, or not
    rebuildable here (logged). ``group``: as ``compile_graph``'s."""
    record = _store(config).read(key)
    if record is None:
        return None
    try:
        if record.get("version") != _RECORD_VERSION:
            raise ValueError(f"record version {record.get('version')!r}")
        compiled = _rebuild(key, record, config, builders)
    except Exception as error:  # a record that passed its check but does not rebuild here
        _log.warning("kiln: the cached graph %s cannot be loaded (%s: %s); it is compiled again", key,
                     type(error).__name__, error)
        return None
    return with_cudagraphs(compiled, config, group)


def _rebuild(key: str, record: dict[str, Any], config: InductorConfig, builders: dict[str, Any]) -> CompiledGraph:
    params = record["params"]
    functions = bind_libraries(builder_of(config, builders).load_many(record["cpp"]), params) \
        if record["cpp"] else {}
    loaded: dict[str, list[tuple[tuple, Any]]] = {}  # by the wrapper global of a Launch
    if record["triton"]:
        launches = {g: e[1] for g, e in record["globals"].items() if e[0] == "launch"}  # global: function
        declared = {g: len(e[2]) for g, e in record["globals"].items() if e[0] == "launch"}  # its arguments
        loaded = _load_static(record.get("triton_static"), declared)
        direct = {e[1] for e in record["globals"].values() if e[0] == "kernel"} - {n for p in params for n in p}
        load = functools.cache(lambda: _triton_module(record, config))
        if launches and not direct and all(g in loaded for g in launches):
            # the module is imported only if a launch needs triton's JIT
            from .triton._static import Deferred

            arg_names = {fn: loaded[g][0][1].src.fn.arg_names for g, fn in launches.items()}
            functions.update({fn: Deferred(fn, names, load) for fn, names in arg_names.items()})
        else:
            functions.update(load())
    namespace = {name: _decode_global(entry, functions) for name, entry in record["globals"].items()}
    for name, kernels in loaded.items():
        if isinstance(namespace.get(name), Launch):
            for launch_key, kernel in kernels:
                namespace[name].seed(launch_key, kernel)
    call = exec_wrapper(record["wrapper"], namespace, _wrapper_code_of(record.get("wrapper_code"), record["wrapper"]))
    if _code_log.isEnabledFor(logging.INFO):
        _code_log.info("wrapper (from the cache, %s):\n%s\nkernels:\n%s", key, record["wrapper"],
                       "".join(record["cpp"]) or "(none)")
    strides = tuple(_strides_of(s) for s in record.get("output_strides", ()))
    facts = CudagraphFacts.from_json(record["cudagraph"]) if record.get("cudagraph") is not None else None
    return CompiledGraph(call, record["wrapper"], tuple(record["cpp"]), record["kernels"], record["externs"],
                         dict(record["fallbacks"]), key, True, strides, record["triton"], cudagraph_facts=facts,
                         fused={name: tuple(nodes) for name, nodes in record.get("fused", {}).items()},
                         seed=namespace.get(SEED_CELL))


def _triton_module(record: dict[str, Any], config: InductorConfig) -> dict[str, Any]:
    """The Triton kernels of ``record`` by name, their module loaded, triton's cache keys of
    the kernels set back."""
    kernels = triton_functions(record["triton"], config)
    if record.get("triton_hashes"):
        from .triton._runtime import preset_hashes

        preset_hashes(kernels, record["triton_hashes"])
    return kernels


def seed_launches(wrapper_globals: dict[str, Any], precompiled: dict[str, tuple[tuple, Any]]) -> None:
    """Hand the ``Launch`` of each kernel in ``precompiled`` (by kernel name: the key of its
    first call's arguments and the kernel compiled for them) that kernel under that key: its
    first call launches it directly."""
    from ._wrapper import launch_global

    for name, (launch_key, kernel) in precompiled.items():
        launch = wrapper_globals.get(launch_global(name))
        if isinstance(launch, Launch):
            launch.seed(launch_key, kernel)


def _static_record(precompiled: dict[str, tuple[tuple, Any]]) -> dict[str, Any]:
    """The record of the kernels compiled for the first call (``triton._static``): by the
    wrapper global of their ``Launch`` (a launch's kernel was compiled with its launch
    configuration), a list of entries, each with the identity of its device's compile."""
    if not precompiled:
        return {}
    from ._wrapper import launch_global
    from .triton._static import identity, static_entry

    out: dict[str, Any] = {}
    for name, (launch_key, kernel) in precompiled.items():
        entry = static_entry(getattr(kernel, "compiled", kernel), launch_key)  # (a StaticKernel's compiled kernel)
        ident = identity(launch_key[0]) if entry is not None else None
        if ident is not None:
            out[launch_global(name)] = [{**entry, "identity": ident}]
    return out


def _load_static(record: Any, declared: dict[str, int]) -> dict[str, list[tuple[tuple, Any]]]:
    """The kernels of a ``_static_record`` this process can load, by name (their identity
    this process's: ``triton._static``; ``declared``: by name, how many arguments its
    ``Launch`` passes); {} under triton's interpreter or without CUDA. An
    entry of the same binary under the same key (a twin's launch: ``_twins``) is loaded once,
    its kernel shared, as triton's JIT shares it in the compiling process."""
    if not record or not isinstance(record, dict) or not torch.cuda.is_available():
        return {}
    from .triton._runtime import interpreting
    from .triton._static import identity, load_entry

    if interpreting():
        return {}
    out: dict[str, list[tuple[tuple, Any]]] = {}
    identities: dict[int, Any] = {}
    loaded: dict[tuple, Any] = {}  # by triton's hash and the launch key: what loading it gave
    for name, entries in record.items():
        for entry in entries:
            index = entry["key"][0]
            if index not in identities:
                identities[index] = identity(index) if 0 <= index < torch.cuda.device_count() else None
            if identities[index] is None or entry.get("identity") != identities[index]:
                continue
            binary = (entry["hash"], tuple(entry["key"]))
            if binary not in loaded:
                loaded[binary] = load_entry(entry, declared.get(name))
            got = loaded[binary]
            if got is not None:
                out.setdefault(name, []).append(got)
    return out


def _strides_of(entry: Any) -> Any:
    """An ``output_strides`` entry read back from JSON: None, strides, or per item of a tuple."""
    if entry is None:
        return None
    if all(type(s) is int for s in entry):
        return tuple(entry)
    return tuple(_strides_of(s) for s in entry)


def builder_of(config: InductorConfig, builders: dict[str, Any]) -> Any:
    """The CppBuilder of ``config``'s cache directory in ``builders`` (the caller's: kiln's
    Session keeps one map per process state), made on first use."""
    from .cpp._build import CppBuilder

    root = str(cache_root(config))
    builder = builders.get(root)
    if builder is None:
        builder = builders[root] = CppBuilder(root)
    return builder


def exec_wrapper(code: str, namespace: dict[str, Any], compiled: types.CodeType | None = None,
                 ) -> Callable[[list[Any]], tuple]:
    """The ``call`` function the wrapper source ``code`` defines, with ``namespace`` as its
    globals; its source is registered with linecache (tracebacks show it). ``compiled``: the
    source's code object where the caller has it (``_wrapper_code_of``), else it is compiled."""
    filename = _wrapper_filename(code)
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    namespace = dict(namespace)
    exec(compiled if compiled is not None else _compiled_wrapper(code), namespace)
    return namespace["call"]


@functools.lru_cache(maxsize=64)
def _wrapper_filename(code: str) -> str:
    """(cached: a warm start asks it for the record's code and for linecache)"""
    return f"<kiln.inductor wrapper {hashlib.sha1(code.encode()).hexdigest()[:12]}>"


@functools.lru_cache(maxsize=64)
def _compiled_wrapper(code: str) -> types.CodeType:
    """The wrapper source ``code`` compiled (cached: the record of a new graph keeps it)."""
    return compile(code, _wrapper_filename(code), "exec")


@functools.cache
def _code_tag() -> str:
    """What a marshalled code object depends on: this interpreter's bytecode (its magic
    number) and implementation."""
    return f"{sys.implementation.cache_tag}:{importlib.util.MAGIC_NUMBER.hex()}"


def _wrapper_code_record(code: str) -> list[str]:
    """The compiled wrapper source ``code`` as a record keeps it: [``_code_tag``, base64 of
    its marshalled code object]. A warm start loads it instead of compiling the source again
    (about 1 ms a wrapper on the H100 machine, 2 wrappers a training graph)."""
    return [_code_tag(), base64.b64encode(marshal.dumps(_compiled_wrapper(code))).decode()]


def _wrapper_code_of(entry: Any, code: str) -> types.CodeType | None:
    """The code object a record keeps for the wrapper source ``code``, or None where it has
    none this interpreter can load (another bytecode, or one that is not this source's:
    the source is compiled instead). The record's digest was checked on reading."""
    if not (isinstance(entry, list) and len(entry) == 2 and entry[0] == _code_tag() and isinstance(entry[1], str)):
        return None
    try:
        compiled = marshal.loads(base64.b64decode(entry[1], validate=True))
    except (ValueError, EOFError, TypeError):
        return None
    if type(compiled) is not types.CodeType or compiled.co_filename != _wrapper_filename(code):
        return None
    return compiled


def bind_kernels(library: Any, params: dict[str, list[str]]) -> dict[str, Any]:
    """Each kernel's function in ``library`` (a loaded ``KernelLibrary``), its argument types
    set from its parameter kinds (and the thread count, last)."""
    return {name: library.function(name, [_ARGTYPES[k] for k in kinds] + [ctypes.c_int64])
            for name, kinds in params.items()}


def bind_libraries(libraries: list[Any], params: list[dict[str, list[str]]]) -> dict[str, Any]:
    """The kernel functions of ``libraries`` (loaded ``KernelLibrary``s) by name, each bound
    as ``bind_kernels`` does with its library's parameter kinds (``params``, in order)."""
    functions: dict[str, Any] = {}
    for library, kinds in zip(libraries, params, strict=True):
        functions.update(bind_kernels(library, kinds))
    return functions


def triton_functions(code: str, config: InductorConfig) -> dict[str, Any]:
    """The kernels of the Triton module ``code`` by name, the module loaded through the cache
    directory of ``config`` (``triton._runtime.load_module``)."""
    from .triton._runtime import load_module

    module = load_module(code, cache_root(config))
    return {name: value for name, value in vars(module).items() if name.startswith("kernel")}


def kernel_params(sources: Iterable[Any]) -> dict[str, list[str]]:
    """Each kernel's parameter kinds by name, from its ``KernelSource``."""
    return {k.name: [p.kind for p in k.params] for k in sources}
