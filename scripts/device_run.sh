#!/usr/bin/env bash
# Run kiln from source on a machine without hatch or network (the GPU machine): every
# package's src folder goes on PYTHONPATH and frameeval's C extension is built in place with
# the system compiler for the python3 found there. Then the given command runs.
#
#   scripts/device_run.sh python3 -m pytest tests -q -n 16 -p no:randomly
#   scripts/device_run.sh python3 benchmarks/fxgraph_bench.py
#
# The GPU machine has no network: tests/frameeval/test_build.py builds a wheel with
# hatchling, and kiln.report needs pygments (torch brings jinja2), so carry them
# (`pip download -d .whl hatchling pathspec pluggy trove-classifiers packaging pygments`, with
# .whl in .git/info/exclude) and install them first:
#   pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
cd "$(dirname "$0")/.."

paths=""
for d in packages/*/src; do
  paths="$paths:$PWD/$d"
done
export PYTHONPATH="${paths#:}${PYTHONPATH:+:$PYTHONPATH}"

python3 packages/frameeval/hatch_build.py >/dev/null
python3 - <<'PY'
import platform, sys
try:
    import torch
    print(f"python {platform.python_version()}, torch {torch.__version__}, "
          f"cuda {torch.cuda.is_available()} ({torch.cuda.device_count()} devices)")
except ImportError:
    print(f"python {platform.python_version()}, no torch")
PY
exec "$@"
