#!/usr/bin/env bash
# A short GPU check for a call with little device time left: the GPU tests of the Triton code
# generator, its compile paths and index math (about a quarter of tests-gpu), then gpt2's
# restart figures for kiln with the compile workers on and off. Into $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kiln-out}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
t=tests/inductor
timeout "${SUBSET_TESTS_S:-110}" scripts/device_run.sh python3 -m pytest -q -rfE -n 16 -p no:randomly -p no:cacheprovider \
  $t/test_triton_precompile.py $t/test_triton.py $t/test_triton_split.py $t/test_printer.py \
  $t/test_triton_static_launch.py $t/test_triton_layouts_fuzz.py $t/test_kernel_fuzz.py $t/test_reductions_fuzz.py \
  $t/test_indexing.py $t/test_twins.py $t/test_opinfo_subset.py $t/test_cudagraphs.py \
  tests/aotgrad/test_cuda_training.py tests/aotgrad/test_transformers_training.py \
  --junitxml="$out/junit-subset.xml" >"$out/tests-subset.txt" 2>&1
echo "tests rc=$?" >>"$out/tests-subset.txt"
tail -n 3 "$out/tests-subset.txt"; grep -E "^(FAILED|ERROR)" "$out/tests-subset.txt" | head -20
for P in true false; do
  KILN_RESTART_OPTIONS="{\"inductor.compile_processes\": $P}" timeout "${SUBSET_RESTART_S:-45}" scripts/device_run.sh \
    python3 benchmarks/restart_bench.py --cases gpt2 --stacks kiln --json "$out/restart-gpt2-$P.json" >"$out/restart-gpt2-$P.txt" 2>&1
  echo "processes=$P rc=$?"; grep -E "kiln (cold|warm)" "$out/restart-gpt2-$P.txt"
done
