"""What a model case's Triton kernels cost to compile for an H100, measured on a machine
without a GPU: the cold start's largest part, where device time is scarce.

The case's first call runs through kiln with Triton kernels on the CPU (triton's interpreter,
``inductor.cpu_backend=triton``, the CPU sizes of gpu_bench.py); each kernel launch is
recorded with the specialization triton would give its arguments on a GPU (pointers aligned
to 16 bytes where their address is, integers equal to 1 as constants, multiples of 16
divisible). A second process (``--python``: e.g. an interpreter whose triton is the GPU
machine's version; it needs triton only) then compiles each kernel for ``cuda:90`` one after
another, after one throwaway compile that pays triton's first-use setup, and prints each
kernel's seconds (and of each of triton's stages after its front end: ttir ... cubin, in ms),
whether it calls libdevice, and the total.

    TRITON_INTERPRET=1 python benchmarks/triton_compile_proxy.py --cases block-bf16-train,gpt2 [--python /tmp/t36/bin/python] [--parallel 2] [--gpu-sizes]

With the CPU sizes the kernels differ from the GPU's in their sizes and block sizes only
(``--gpu-sizes``: the GPU's, the kernels recorded but not run); the figures are this
CPU's, a proxy for the GPU machine's (whose host is faster), for comparing two versions of
the generated code, not for reporting a cold start.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64",
           "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}


def _record(case: str, gpu_sizes: bool) -> list[dict[str, Any]]:
    """Run ``case`` under kiln with interpreted Triton kernels; each kernel's compile request.
    ``gpu_sizes``: the GPU's sizes, the kernels recorded but not run (their outputs are
    garbage; the interpreter would take too long)."""
    sys.path.insert(0, str(ROOT))
    import torch

    import kiln
    from benchmarks.gpu_bench import CPU, GPU, MODEL_CASES, variant
    from kiln.inductor.triton._launch import Launch

    requests: dict[tuple, dict[str, Any]] = {}
    original = Launch.__call__

    def record(self: Launch, state: Any, programs: int, *args: Any) -> None:
        fn = self.fn.fn if hasattr(self.fn, "fn") else self.fn
        signature, constexprs, attrs = {}, {}, {}
        for i, (name, kind, value) in enumerate(zip(self.names, self.kinds, args, strict=True)):
            if isinstance(value, torch.Tensor):
                signature[name] = "*" + _DTYPES[str(value.dtype).removeprefix("torch.")]
                if value.data_ptr() % 16 == 0:
                    attrs[str(i)] = [["tt.divisibility", 16]]
            elif kind == "seed":
                signature[name] = "i64"
            elif value == 1:
                signature[name], constexprs[str(i)] = "constexpr", 1
            else:
                signature[name] = "i32" if -2**31 <= value < 2**31 else "i64"
                if value % 16 == 0:
                    attrs[str(i)] = [["tt.divisibility", 16]]
        params = fn.__code__.co_varnames[:fn.__code__.co_argcount]
        for i, name in enumerate(params[len(self.names):], len(self.names)):
            signature[name], constexprs[str(i)] = "constexpr", self.meta[name]
        key = (fn.__code__.co_filename, fn.__name__, json.dumps(signature), json.dumps(constexprs))
        requests.setdefault(key, {
            "path": fn.__code__.co_filename, "kernel": fn.__name__, "signature": signature,
            "constexprs": constexprs, "attrs": attrs,
            "options": {k: v for k, v in self.meta.items() if k not in params}})
        if not gpu_sizes:
            original(self, state, programs, *args)

    Launch.__call__ = record
    torch.manual_seed(0)
    work = MODEL_CASES[case][2](GPU if gpu_sizes else CPU, torch.device("cpu"))
    variant(work, lambda fn: kiln.compile(fn, options={"inductor.cpu_backend": "triton"})).first()
    return list(requests.values())


_COMPILE = r'''
import importlib.util, json, os, sys, time
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend

from kiln.inductor.triton._compile_worker import warm_up
requests = json.load(sys.stdin)
target = GPUTarget("cuda", 90, 32)
backend = make_backend(target)
stage_seconds = {}
add_stages = type(backend).add_stages


def timed_stages(self, stages, *args, **kwargs):
    add_stages(self, stages, *args, **kwargs)
    for name, fn in list(stages.items()):
        def timed(*a, _fn=fn, _name=name, **k):
            start = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                stage_seconds[_name] = stage_seconds.get(_name, 0.0) + time.perf_counter() - start
        stages[name] = timed


type(backend).add_stages = timed_stages
warm_up([target.backend, target.arch, target.warp_size])  # triton's first-compile setup, as a compile worker's
modules = {}
done = []
for r in requests:
    if os.environ.get("PROXY_ONLY") and r["kernel"] != os.environ["PROXY_ONLY"]:  # one kernel's name
        continue
    if r["path"] not in modules:
        name = "kiln_proxy_%d" % len(modules)
        spec = importlib.util.spec_from_file_location(name, r["path"])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        modules[r["path"]] = module
    fn = getattr(modules[r["path"]], r["kernel"])
    constexprs = {(int(k),): v for k, v in r["constexprs"].items()}
    attrs = {(int(k),): v for k, v in r["attrs"].items()}
    options = backend.parse_options(dict(r["options"], debug=bool(getattr(fn, "debug", False)))).__dict__
    stage_seconds.clear()
    start = time.perf_counter()
    compiled = triton.compile(ASTSource(fn, r["signature"], constexprs, attrs), target=target, options=options)
    seconds = time.perf_counter() - start
    print(json.dumps({"kernel": r["kernel"], "seconds": seconds, "libdevice": "__nv_" in compiled.asm["llir"] or
                      "libdevice" in fn.src, "lines": fn.src.count("\n"),
                      "stages": dict(stage_seconds)}))
    done.append((r, fn, constexprs, attrs, options))

parallel = int(os.environ.get("PROXY_PARALLEL") or 0)
if parallel:  # the same kernels in N threads, then in N warmed-up worker processes (kiln's pool)
    import inspect
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from triton.runtime.jit import serialize_specialization_data

    from kiln.inductor.triton._compile_pool import Claims, CompilePool, Job

    def one(item):
        r, fn, constexprs, attrs, options = item
        triton.compile(ASTSource(fn, r["signature"], constexprs, attrs), target=target, options=options)

    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="proxy-threads-")
    start = time.perf_counter()
    with ThreadPoolExecutor(parallel) as threads:
        list(threads.map(one, done))
    threads_s = time.perf_counter() - start
    pool = CompilePool(parallel)
    pool.start([target.backend, target.arch, target.warp_size])
    time.sleep(float(os.environ.get("PROXY_WARM_S") or 8))  # started early enough to be warm
    extra = [target] if "target" in inspect.signature(serialize_specialization_data).parameters else []

    def jobs_of():
        jobs = []
        for i, (r, fn, constexprs, attrs, options) in enumerate(done):
            options = backend.parse_options(options)
            spec = serialize_specialization_data(r["kernel"], r["signature"], constexprs, attrs, options, "key", *extra)
            module = [name for name, m in sys.modules.items() if getattr(m, "__file__", None) == r["path"]][0]
            jobs.append(Job(r["path"], module, r["kernel"], spec, [target.backend, target.arch, target.warp_size], i))
        return jobs

    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="proxy-processes-")
    jobs = jobs_of()
    start = time.perf_counter()
    pool.compile(jobs)
    processes_s = time.perf_counter() - start
    failed = [j.error for j in jobs if j.error]
    # both, as precompile shares a graph's launches: the workers from the front, N threads from the back
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="proxy-both-")
    claims = Claims(jobs_of())

    def mine(i):
        job = claims.take(i)
        if job is not None:
            job.done.wait()
            if job.error is None:  # (the launch would load it)
                return
        one(done[i])

    start = time.perf_counter()
    pool.serve(claims)
    with ThreadPoolExecutor(parallel) as threads:
        list(threads.map(mine, reversed(range(len(done)))))
    both_s = time.perf_counter() - start
    pool.close()
    print(json.dumps({"parallel": parallel, "threads_s": threads_s, "processes_s": processes_s, "both_s": both_s,
                      "by_workers": sum(j.owner == "worker" for j in claims.jobs), "failed": failed}))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="block-bf16-train,gpt2")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that compiles (needs triton only)")
    parser.add_argument("--parallel", type=int, default=0,
                        help="then compile them all at once in N threads and in N worker processes")
    parser.add_argument("--gpu-sizes", action="store_true",
                        help="the GPU's sizes (kernels recorded, not run: slow matmuls on the CPU remain)")
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case is not None:
        print(json.dumps(_record(args.case, args.gpu_sizes)))
        return
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("run with TRITON_INTERPRET=1 (the case runs its kernels in triton's interpreter)")
    rows = []
    for case in args.cases.split(","):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, KILN_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, "triton-interp"))
            sizes = ["--gpu-sizes"] if args.gpu_sizes else []
            done = subprocess.run([sys.executable, __file__, "--case", case, *sizes], env=env, capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                sys.exit(done.stderr[-3000:])
            requests = done.stdout.strip().splitlines()[-1]
            env = {k: v for k, v in env.items() if k != "TRITON_INTERPRET"}
            env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton-h100")
            env["PROXY_PARALLEL"] = str(args.parallel)
            env["PYTHONPATH"] = os.pathsep.join(str(p) for p in sorted((ROOT / "packages").glob("*/src")))
            script = Path(cache, "compile_for_an_h100.py")  # (triton reads a jit function's source file)
            script.write_text(_COMPILE)
            profile = ["-m", "cProfile", "-o", os.environ["PROXY_PROFILE"]] if os.environ.get("PROXY_PROFILE") else []
            done = subprocess.run([args.python, *profile, str(script)], input=requests, env=env, capture_output=True,
                                  text=True, check=False)
            if done.returncode != 0:
                sys.exit(done.stderr[-3000:])
            answers = [json.loads(line) for line in done.stdout.strip().splitlines()]
            kernels = [a for a in answers if "kernel" in a]
            parallel = next((a for a in answers if "parallel" in a), None)
        for k in kernels:
            stages = " ".join(f"{name} {seconds * 1e3:5.1f}" for name, seconds in k["stages"].items())
            print(f"  {case} {k['kernel']:<10} {k['seconds'] * 1e3:7.1f} ms  {k['lines']:4d} lines  ({stages})"
                  + ("  libdevice" if k["libdevice"] else ""))
        total = sum(k["seconds"] for k in kernels)
        rows.append((case, len(kernels), sum(k["libdevice"] for k in kernels), total, parallel))
    n = args.parallel
    at_once = (f", and all at once in {n} threads, in {n} warmed-up worker processes (kiln's compile pool), and"
               f" in both sharing the kernels as precompile does (how many the workers took)" if n else "")
    print(f"\nCompiling the kernels for an H100 (cuda:90) on this CPU: one after another (total){at_once},"
          f" seconds of wall time ({'GPU' if args.gpu_sizes else 'CPU'} sizes)\n"
          f"{'case':<18}{'kernels':>8}{'libdevice':>10}{'total s':>9}{'threads s':>11}{'processes s':>13}"
          f"{'both s':>14}")
    for case, count, lib, total, parallel in rows:
        threads = f"{parallel['threads_s']:.3f}" if parallel else "-"
        processes = f"{parallel['processes_s']:.3f}" if parallel else "-"
        if parallel and parallel["failed"]:
            processes += f" ({len(parallel['failed'])} failed: {parallel['failed'][0]})"
        both = f"{parallel['both_s']:.3f} ({parallel['by_workers']})" if parallel else "-"
        print(f"{case:<18}{count:>8}{lib:>10}{total:>9.3f}{threads:>11}{processes:>13}{both:>14}")


if __name__ == "__main__":
    main()
