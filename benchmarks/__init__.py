"""kiln's benchmark harness (``python -m benchmarks run --suite ... --device ...``) and the
per-package micro benchmarks (``python benchmarks/<package>_bench.py``)."""
