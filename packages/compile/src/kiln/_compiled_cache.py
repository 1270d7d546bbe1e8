"""The cache of compiled captured graphs (backend ``"inductor"``): what aotgrad and inductor
made of a graph kiln.symexec captured, on disk, so that a new process that captures the same
graph for the same inputs runs no aotgrad trace, no partition and no inductor compile.

A record (``<cache_dir>/captured/<key>.json``, a kiln.inductor ``EntryStore``) holds up to
``_VARIANTS`` variants, each:
- the whole-graph cache keys of the forward and backward ATen graphs (their compiled form is
  kiln.inductor's record, ``kiln.inductor.load_compiled``);
- aotgrad's ``RuntimeMeta`` (what the runtime wrapper needs besides the two halves);
- the relations on symbolic sizes the ATen trace decided beyond the frame's guards (which the
  cold compile made guards of the frame, ``accept_guards``), as sympy ``srepr`` text. They
  depend on the sizes the trace saw (``split(x, 3)`` decides how many pieces there are), so
  one key may need several variants.

Loading (``load``) takes the first variant whose relations hold for this call's sizes,
rebuilds the runtime (``kiln.aotgrad.make_runtime``) from its two loaded halves and offers the
relations to the frame's guard sink again (so the frame's entry is checked for them, as after
a cold compile); anything missing, corrupt or refused is a miss, and the graph is compiled as
usual (and recorded again, as a variant next to the others).

The key (``key_of``) hashes the captured graph (``kiln.inductor.GraphDescriber``: every node,
the bytes of its tensor constants), every input's metadata (dtype, device, sizes, strides and
storage offset, symbolic ones as expressions; requires_grad; which share a storage), the
ShapeEnv's knowledge of the symbols (ranges, replacements, guards), the global torch state a
trace depends on (grad mode, default dtype, autocast, deterministic algorithms), the aotgrad
and inductor configs, kiln's sources and the build identity of kiln.inductor (torch, compiler,
ISA). A graph is only recorded when both halves compiled to cacheable C++ graphs (a half
that ran as generated Python has no record).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from ._context import CompileContext

__all__ = ["key_of", "load", "runtime_of", "store"]

# Bump when the record's fields or their meaning change.
_FORMAT = 1
_VARIANTS = 8  # compiles kept per key, for sizes whose traces decided different relations
_log = logging.getLogger("kiln.cache")


@functools.cache
def _umbrella_digest() -> str:
    from kiln.inductor import source_digest

    own = hashlib.sha256()
    for name in ("_compiled_cache.py", "_backends.py"):
        own.update((Path(__file__).parent / name).read_bytes())
    return source_digest("aotgrad", "inductor", "symshapes", "fxgraph") + own.hexdigest()


def _global_state() -> list[Any]:
    return [torch.is_grad_enabled(), torch.is_inference_mode_enabled(), str(torch.get_default_dtype()),
            torch.is_autocast_enabled("cpu"), str(torch.get_autocast_dtype("cpu")),
            torch.are_deterministic_algorithms_enabled()]


def _shape_env(env: Any, describer: Any) -> list[Any]:
    if env is None:
        return []
    return [[[s.name, str(env.range_of(s))] for s in env.symbols],
            sorted([k.name, describer.expr(v)] for k, v in env.replacements.items()),
            [describer.expr(g.expr) for g in env.guards]]


def key_of(gm: Any, example_inputs: list[Any], context: CompileContext) -> str | None:
    """The cache key of ``gm`` compiled with ``context`` (see the module docstring); None
    when something in it has no name in other processes (logged)."""
    from kiln.inductor import GraphDescriber, Uncacheable, cache_identity

    if len(example_inputs) != len(context.fake_inputs):
        return None
    describer = GraphDescriber()
    try:
        nodes = [describer.node(n, gm, False) for n in gm.graph.nodes]
        inputs = []
        for real, fake in zip(example_inputs, context.fake_inputs, strict=True):
            if isinstance(fake, torch.Tensor):
                inputs.append([describer.tensor(fake), isinstance(real, torch.Tensor) and real.requires_grad])
            else:
                inputs.append(describer.value(fake))
        env = _shape_env(context.shape_env, describer)
    except Uncacheable as why:
        _log.info("kiln: a captured graph of %s is not cached on disk: %s", context.code.co_qualname, why)
        return None
    configs = [dataclasses.asdict(context.configs.aotgrad), cache_identity(context.configs.inductor)]
    parts = [_FORMAT, _umbrella_digest(), configs, _global_state(), nodes, inputs, env]
    return hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()[:40]


def _store(context: CompileContext) -> Any:
    from kiln.inductor import EntryStore, cache_root

    return EntryStore(cache_root(context.configs.inductor), "captured")


def load(key: str, context: CompileContext, accept_guards: Callable[[list[Any]], bool] | None) -> Any:
    """The runtime callable recorded under ``key``, rebuilt, or None (see the module
    docstring). ``accept_guards``: the frame's guard sink for the recorded relations."""
    variants = _variants(_store(context).read(key), key)
    for variant in variants:
        guards = variant["guards"]
        if guards and not _hold(guards, context):
            continue
        halves = _halves(variant, context)
        if halves is None:
            return None
        if guards and not (accept_guards is not None and accept_guards(guards)):
            return None
        return _runtime(halves, variant)
    if variants:
        _log.info("kiln: no cached compile of a graph of %s assumed what holds now; it is compiled again",
                  context.code.co_qualname)
    return None


def _variants(record: Any, key: str) -> list[dict[str, Any]]:
    """The variants of a record, read (``RuntimeMeta``, relations parsed); [] for none or one
    that does not read (logged)."""
    from kiln.aotgrad import RuntimeMeta

    if record is None:
        return []
    try:
        if record.get("format") != _FORMAT:
            raise ValueError(f"format {record.get('format')!r}")
        return [{"forward": v["forward"], "backward": v["backward"], "meta": RuntimeMeta.from_json(v["meta"]),
                 "guards": [_parse(text) for text in v["guards"]], "raw": v} for v in record["variants"]]
    except (AttributeError, KeyError, TypeError, ValueError, SyntaxError) as error:
        _log.warning("kiln: the cached captured graph %s does not read (%s); it is compiled again", key, error)
        return []


def runtime_of(raw: dict[str, Any], context: CompileContext) -> Any:
    """The runtime callable of one recorded variant (``cache_variant``, as ``load`` and
    ``store`` leave it on the runtime), rebuilt without checking its relations: the caller
    holds them as guards already (the disk cache of captured frames, whose guards include
    them). None when it does not read or a half cannot be loaded."""
    variants = _variants({"format": _FORMAT, "variants": [raw]}, "(a captured frame's)")
    halves = _halves(variants[0], context) if variants else None
    return None if halves is None else _runtime(halves, variants[0])


def _halves(variant: dict[str, Any], context: CompileContext) -> list[Any] | None:
    """The compiled forward and backward (None: no backward) of a read variant, or None when
    one cannot be loaded."""
    from kiln.inductor import CudagraphGroup

    group = CudagraphGroup()  # the two halves' CUDA graph runners read each other's lent outputs
    halves = [_half(k, context, group) if k is not None else None for k in (variant["forward"], variant["backward"])]
    return None if any(h is False for h in halves) else halves


def _runtime(halves: list[Any], variant: dict[str, Any]) -> Any:
    """aotgrad's runtime of the two loaded halves, carrying its meta and its record."""
    from kiln.aotgrad import make_runtime

    runtime = make_runtime(halves[0], halves[1], variant["meta"])
    runtime.runtime_meta = variant["meta"]  # type: ignore[attr-defined]
    runtime.cache_variant = variant["raw"]  # type: ignore[attr-defined]
    return runtime


def _half(key: str, context: CompileContext, group: Any) -> Any:
    """The compiled ATen graph recorded under ``key`` as the callable aotgrad's runtime calls
    (boxed, as kiln.inductor's compiler returns it), or False when it cannot be loaded."""
    from kiln.inductor import load_compiled

    compiled = load_compiled(key, context.configs.inductor, context.kernels, group)
    if compiled is None:
        return False
    call = compiled.call
    call.boxed_call = True  # type: ignore[attr-defined]
    call.compiled = compiled  # type: ignore[attr-defined]
    return call


def _parse(text: str) -> Any:
    import sympy

    from kiln.symshapes import FloorDiv, Mod, TruncToInt

    expr = sympy.sympify(text, locals={"FloorDiv": FloorDiv, "Mod": Mod, "TruncToInt": TruncToInt})
    if not isinstance(expr, sympy.Basic):
        raise ValueError(f"not an expression: {text!r}")
    return expr


def _hold(guards: list[Any], context: CompileContext) -> bool:
    """Whether the relations a variant's trace decided hold for this call's sizes."""
    env = context.shape_env
    if env is None:
        return False
    known = set(env.symbols)
    return all(expr.free_symbols <= known and bool(env.size_hint(expr)) is True for expr in guards)


def store(key: str, runtime: Any, halves: dict[str, Any], guards: list[Any], context: CompileContext) -> bool:
    """Record ``runtime`` (aot_compile's, with its ``runtime_meta``) under ``key``:
    ``halves`` maps "forward" and, when there is one, "backward" to the callables the
    compilers returned; ``guards``: the relations the trace had the frame accept. The record
    keeps one variant per set of relations (the trace of another size may decide others),
    the latest ``_VARIANTS``. False when it is not cacheable (a half without a whole-graph
    cache key: it ran as generated Python)."""
    import sympy

    meta = getattr(runtime, "runtime_meta", None)
    keys: dict[str, str | None] = {"backward": None}
    for name, half in halves.items():
        compiled = getattr(half, "compiled", None)
        if compiled is None or compiled.cache_key is None:
            return False
        keys[name] = compiled.cache_key
    if meta is None or "forward" not in keys:
        return False
    texts = [sympy.srepr(g) for g in guards]
    if any(_parse(text) != g for text, g in zip(texts, guards, strict=True)):
        _log.info("kiln: a relation the trace of a graph of %s decided does not read back; the graph is "
                  "not cached on disk", context.code.co_qualname)
        return False
    variant = {**keys, "meta": meta.to_json(), "guards": texts}
    store = _store(context)
    others = [v["raw"] for v in _variants(store.read(key), key) if v["raw"]["guards"] != variant["guards"]]
    runtime.cache_variant = variant
    return store.write(key, {"format": _FORMAT, "variants": [*others[-(_VARIANTS - 1):], variant]})
