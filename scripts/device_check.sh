#!/usr/bin/env bash
# One call on the GPU machine: the whole test suite, then every benchmark, each into $OUT.
# Run through the device tool as:  scripts/device_check.sh   (carry .whl; see device_run.sh)
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
  tail -n 3 "$out/$name.txt"
}
run tests 240 python3 -m pytest tests -q -n 16 -p no:randomly -p no:cacheprovider
for b in overhead fxgraph guards frameeval symshapes; do
  run "bench_$b" 120 taskset -c 3 python3 "benchmarks/${b}_bench.py"
done
