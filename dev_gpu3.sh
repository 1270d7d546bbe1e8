set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
start=$(date +%s)
timeout 130 scripts/device_run.sh python3 -m pytest tests/inductor/test_triton_template.py tests/inductor/test_autotune.py tests/inductor/test_triton.py -q -rfE -n 16 -p no:randomly -p no:cacheprovider > $OUT/tests.txt 2>&1
echo "tests rc=$? $(( $(date +%s) - start ))s" >> $OUT/log.txt
tail -25 $OUT/tests.txt
left=$(( 390 - ($(date +%s) - start) ))
KILN_LOGS=perf_hints timeout $left scripts/device_run.sh python3 benchmarks/matmul_bench.py --dtypes bfloat16 --cases linear_gelu,mm_relu,linear_residual,bmm_scale --json $OUT/mm.json > $OUT/mm.txt 2>&1
echo "bench rc=$? $(( $(date +%s) - start ))s" >> $OUT/log.txt
grep -v "^\[kiln" $OUT/mm.txt | tail -20; grep "matmul" $OUT/mm.txt | tail -12; cat $OUT/log.txt
