"""A process that compiles Triton kernels into triton's disk cache, for ``_compile_pool``.

Run as ``python -m kiln.inductor.triton._compile_worker [TARGET]``. Given a GPU target (JSON
``[backend, arch, warp_size]``) it first compiles a small kernel for it into a throwaway cache
(``warm_up``). Then it says it is ready (one line on stdout: ``{"ready": true}``), reads one
JSON request per line on stdin and answers one JSON line on stdout per request, until stdin
closes:

- request: ``{"path", "module", "kernel", "spec", "target", "env"}``: the generated module's
  file and the name it is imported under (the parent's), the kernel's name in it, triton's
  specialization data of the launch to compile (the JSON triton gives its ``jit_cache_hook``:
  the signature, the constexprs, the attributes, the options), the GPU target
  ``[backend, arch, warp_size]``, and the parent's triton environment variables (its cache
  directory among them);
- answer: ``{"ok": true, "seconds": ...}`` or ``{"ok": false, "error": "..."}``.

The compile is triton's own (``triton.compile`` of the kernel's ``ASTSource``), so it lands in
the cache under the key the parent's launch computes for the same source, specialization and
options: the parent then loads the binary instead of compiling it. No GPU is touched here (the
target is given), and neither torch nor sympy is imported: the generated module imports triton
and ``kiln.inductor.triton._runtime`` only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from typing import Any


def _module(path: str, name: str) -> Any:
    """The generated module at ``path``, imported once under ``name`` (the parent's: triton
    looks kernels' modules up by name in ``sys.modules``, which keeps it)."""
    module = sys.modules.get(name)
    if module is None or getattr(module, "__file__", None) != path:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    return module


def _tuples(value: Any) -> Any:
    """JSON's lists back to tuples (a kernel signature holds no lists)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _constant(value: Any) -> Any:
    import triton.language as tl

    if isinstance(value, str) and tl.dtype.is_dtype(value):
        return tl.dtype(value)
    if isinstance(value, dict) and "constexpr" in value:
        return tl.constexpr(_tuples(value["constexpr"]))
    if isinstance(value, dict):
        raise ValueError(f"a constant the worker cannot rebuild: {value}")
    return _tuples(value)


def compile_kernel(request: dict[str, Any]) -> None:
    """Compile the launch ``request`` describes (see the module docstring) into triton's cache."""
    for name in [k for k in os.environ if k.startswith("TRITON")]:
        if name not in request["env"]:
            del os.environ[name]
    os.environ.update(request["env"])
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    fn = getattr(_module(request["path"], request["module"]), request["kernel"])
    data = json.loads(request["spec"])
    if "constant_keys" not in data or "attrs_keys" not in data:
        raise ValueError("specialization data of an unknown form (keys: " + ", ".join(sorted(data)) + ")")
    target = GPUTarget(*request["target"])
    constexprs = {_tuples(k): _constant(v) for k, v in zip(data["constant_keys"], data["constant_vals"], strict=True)}
    # as triton's own ``JITFunction.preload`` reads them back: the attributes' values stay the
    # lists they were (they are part of the cache key's text), the options' lists become tuples
    attrs = {_tuples(k): v for k, v in zip(data["attrs_keys"], data["attrs_vals"], strict=True)}
    signature = {k: _tuples(v) for k, v in data["signature"].items()}
    options = make_backend(target).parse_options(
        {k: tuple(v) if isinstance(v, list) else v for k, v in data["options"].items()})
    triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)


def warm_up(target: list[Any]) -> None:
    """Compile a small kernel for ``target`` into a throwaway cache: triton's setup of a
    process's first compile (its backend, its passes, ptxas's first run: about 0.45 s on a
    CPU where a kernel takes 0.03-0.07 s) is then done before the first request."""
    import shutil
    import tempfile

    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    def kiln_warm_up(out, x, n, XBLOCK: tl.constexpr):
        i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
        tl.store(out + i, tl.load(x + i, i < n) * 2.0, i < n)

    directory = tempfile.mkdtemp(prefix="kiln-warm-up-")
    previous = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = directory
    try:
        signature = {"out": "*fp32", "x": "*fp32", "n": "i32", "XBLOCK": "constexpr"}
        triton.compile(ASTSource(triton.jit(kiln_warm_up), signature, {(3,): 128}, {}), target=GPUTarget(*target))
    finally:
        if previous is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = previous
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    # answers go to the pipe the parent reads; anything else printed (by triton, ptxas, a
    # library) goes where stderr goes, never between two answers
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if len(sys.argv) > 1:
        try:
            warm_up(json.loads(sys.argv[1]))
        except Exception:  # only slower: the first request pays the setup
            traceback.print_exc()
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        start = time.perf_counter()
        try:
            compile_kernel(json.loads(line))
            answer: dict[str, Any] = {"ok": True, "seconds": time.perf_counter() - start}
        except BaseException as error:  # reported to the parent, which compiles it itself
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}",
                      "traceback": traceback.format_exc(limit=8)}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
