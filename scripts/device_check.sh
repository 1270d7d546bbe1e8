#!/usr/bin/env bash
# One call on the GPU machine: the named steps (default: all), each into $OUT/<step>.txt.
#   tests    the whole test suite (junit XML in $OUT/junit.xml); on an H100 on 2026-12-07 it ran
#            past its 585 s at about 98% (383-508 s before): run tests-a, then tests-b, instead
#   harness  python -m benchmarks run --device cuda, every suite but scaling  ($OUT/harness.json)
#   scaling  the scaling suite: cold compiles in fresh interpreters  ($OUT/scaling.json)
#   demo     python -m kiln demo --device cuda  ($OUT/demo.html, $OUT/demo.json)
#   benches  the per-package timing scripts, pinned to one core
#   dynamic  benchmarks/dynamic_bench.py (graph counts and capture cost, kiln and torch.compile)
#   triton   the Triton, autotune, random and CUDA-graph tests on CUDA, launch overhead, then
#            gpu_bench --quick in every mode ($OUT/gpu_bench.json)
#   kernels  gpu_bench --quick, the memory-bound rows only ($OUT/kernels.json)
#   transpose benchmarks/transpose_bench.py: tiled transposing kernels against copy bandwidth
#   exp      benchmarks/exp_precision.py: the layout fuzz test's program 21 on the GPU, and its
#            exponential through tl.exp and libdevice.exp against float64
#   gpt2     gpu_bench: transformers GPT-2 alone, default and reduce-overhead ($OUT/gpt2.json)
#   sweep    benchmarks/triton_sweep.py: launch configs of the memory-bound rows ($OUT/sweep.json;
#            its arguments in $SWEEP_ARGS, e.g. "--cols 32768", its time limit in $SWEEP_LIMIT)
#   matmul   benchmarks/matmul_bench.py: matmul templates against torch's max-autotune ($OUT/matmul.json)
#   restart  benchmarks/restart_bench.py: cold and warm first calls of a restarted program,
#            block-bf16-train and gpt2, without the profiler ($OUT/restart.json)
#   restart-kiln  restart_bench.py for kiln alone (torch's stack runs past a call's limit with both
#            cases; its H100 figures are in benchmarks/results), then again under the profiler
#            with kiln's phase logs ($OUT/restart-kiln.json, $OUT/prof/)
#   restart-workers  restart_bench.py for kiln alone, inductor.compile_processes false then true
#            ($OUT/restart-workers-<false|true>.json; about 75 s each on an H100)
#   roprof   benchmarks/host_profile.py under reduce-overhead for bert and gpt2 (or $ROPROF_CASES), with each
#            compiler's 15 kernels of most device time (the reduce-overhead gap's first step)
#   tests-gpu  the tests that take the GPU path: tests/inductor, tests/aotgrad and the CUDA tests
#            of tests/compile and tests/e2e (a third of the suite's time; for little device time)
#   tests-a / tests-b  the suite in two halves (tests/compile + tests/e2e; the rest), for when
#            one call's 600 s are not enough for `tests`
# Run through the device tool as:  scripts/device_check.sh tests harness demo   (carry .whl;
# see device_run.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
out=${OUT:-/tmp/kiln-out}
mkdir -p "$out"
run() {  # name, timeout, command...
  local name=$1 limit=$2; shift 2
  echo "== $name"
  timeout "$limit" scripts/device_run.sh "$@" >"$out/$name.txt" 2>&1
  echo "rc=$?" >>"$out/$name.txt"
  tail -n 12 "$out/$name.txt"
}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests harness scaling demo benches)
for step in "${steps[@]}"; do
  case $step in
    tests) run tests 585 python3 -m pytest tests -q -rfE -n 16 -p no:randomly -p no:cacheprovider --durations=25 \
             --junitxml="$out/junit.xml" ;;
    tests-a) run tests-a 585 python3 -m pytest tests/compile tests/e2e -q -rfE -n 16 -p no:randomly \
               -p no:cacheprovider --junitxml="$out/junit-a.xml" ;;
    tests-gpu) run tests-gpu 300 python3 -m pytest tests/inductor tests/aotgrad tests/compile/test_compile_context.py \
                 tests/compile/test_stage_configs.py tests/e2e/test_library_code_long_tail.py -q -rfE -n 16 \
                 -p no:randomly -p no:cacheprovider --junitxml="$out/junit-gpu.xml" ;;
    tests-b) run tests-b 585 python3 -m pytest tests -q -rfE -n 16 -p no:randomly -p no:cacheprovider \
               --ignore=tests/compile --ignore=tests/e2e --junitxml="$out/junit-b.xml" ;;
    triton)
      run triton-tests 300 python3 -m pytest tests/inductor -q -rfE -n 16 -p no:randomly -p no:cacheprovider \
        -k "triton or autotune or random or cudagraph"
      run launch 60 python3 benchmarks/launch_overhead.py
      run gpu_bench 500 python3 benchmarks/gpu_bench.py --quick --modes default,reduce-overhead,max-autotune \
        --json "$out/gpu_bench.json" ;;
    kernels) run kernels 200 python3 benchmarks/gpu_bench.py --quick --cases softmax,layernorm,rmsnorm,add_ln_gelu \
               --json "$out/kernels.json" ;;
    transpose) run transpose 200 python3 benchmarks/transpose_bench.py ;;
    exp) run exp 120 python3 benchmarks/exp_precision.py ;;
    gpt2) run gpt2 150 python3 benchmarks/gpu_bench.py --cases gpt2 --modes default,reduce-overhead --rounds 3 \
            --json "$out/gpt2.json" ;;
    sweep) run sweep "${SWEEP_LIMIT:-400}" python3 benchmarks/triton_sweep.py ${SWEEP_ARGS:-} --json "$out/sweep.json" ;;
    matmul) run matmul 400 env KILN_LOGS=perf_hints python3 benchmarks/matmul_bench.py --json "$out/matmul.json" ;;
    restart) run restart 400 python3 benchmarks/restart_bench.py --cases block-bf16-train,gpt2 \
               --json "$out/restart.json" ;;
    restart-kiln)
      run restart-kiln 200 python3 benchmarks/restart_bench.py --cases block-bf16-train,gpt2 --stacks kiln \
        --json "$out/restart-kiln.json"
      run restart-kiln-profile 200 env KILN_LOGS=perf python3 benchmarks/restart_bench.py --cases block-bf16-train,gpt2 \
        --stacks kiln --profile "$out/prof" ;;
    restart-workers)  # kiln's cold start with the compile workers off, then on (their pool warmed by the warm-up compile)
      for P in false true; do
        run "restart-workers-$P" 100 env KILN_RESTART_OPTIONS="{\"inductor.compile_processes\": $P}" \
          python3 benchmarks/restart_bench.py --cases block-bf16-train,gpt2 --stacks kiln --json "$out/restart-workers-$P.json"
      done ;;
    roprof) run roprof 400 python3 benchmarks/host_profile.py --cases "${ROPROF_CASES:-bert,gpt2}" --mode reduce-overhead \
              --device-top 15 ;;
    harness) run harness 240 python3 -m benchmarks run --suite overhead,capture,kernels,models,recompiles \
               --device cuda --out "$out/harness.json" ;;
    scaling) run scaling 400 python3 -m benchmarks run --suite scaling --device cuda --out "$out/scaling.json" ;;
    demo) run demo 120 python3 -m kiln demo --device cuda --report "$out/demo.html" --json "$out/demo.json" ;;
    dynamic) run dynamic 300 python3 benchmarks/dynamic_bench.py ;;
    benches)
      for b in overhead fxgraph guards frameeval symshapes; do
        run "bench_$b" 120 taskset -c 3 python3 "benchmarks/${b}_bench.py"
      done ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
