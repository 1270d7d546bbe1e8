#!/usr/bin/env bash
# One call on the GPU machine: the named steps (default: all), each into $OUT/<step>.txt.
#   tests    the whole test suite (junit XML in $OUT/junit.xml)
#   harness  python -m benchmarks run --device cuda, every suite but scaling  ($OUT/harness.json)
#   scaling  the scaling suite: cold compiles in fresh interpreters  ($OUT/scaling.json)
#   demo     python -m kiln demo --device cuda  ($OUT/demo.html, $OUT/demo.json)
#   benches  the per-package timing scripts, pinned to one core
#   dynamic  benchmarks/dynamic_bench.py (graph counts and capture cost, kiln and torch.compile)
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
    tests) run tests 560 python3 -m pytest tests -q -rfE -n 16 -p no:randomly -p no:cacheprovider --durations=25 \
             --junitxml="$out/junit.xml" ;;
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
