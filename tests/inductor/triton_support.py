"""What the Triton code generator's tests share: the device their tensors live on (CUDA on a
GPU; without one, CPU tensors through triton's interpreter, which tests/inductor/conftest.py
switches on, with ``inductor.cpu_backend='triton'``), and a check against eager."""

from __future__ import annotations

import torch

import kiln

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
OPTIONS = None if CUDA else {"inductor.cpu_backend": "triton"}


def run_like_eager(fn, *args, dynamic=None, **compare):
    """``fn`` compiled by kiln on ``args`` moved to DEVICE (under no_grad, eager's result computed
    first on copies: ``fn`` may write its inputs), checked against eager; kiln's result."""
    args = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
    with torch.no_grad():
        expected = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        actual = kiln.compile(fn, options=OPTIONS, dynamic=dynamic)(*args)
    torch.testing.assert_close(actual, expected, equal_nan=True, **compare)
    return actual


def compile_for_an_h100(script: str, tmp_path) -> dict:
    """Run ``script`` (it compiles kernels with triton for an H100 target, which needs no GPU:
    triton's own ptxas) in a new process with its own triton cache and without the
    interpreter (which, once it ran in a process, leaves ``triton.language`` patched for
    itself); the JSON object its last line prints."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    env.pop("TRITON_INTERPRET", None)
    path = tmp_path / "compile.py"  # (triton reads a kernel's source from its file)
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
