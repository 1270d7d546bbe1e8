"""Transposing pointwise kernels on the GPU: achieved bandwidth of eager, torch.compile
(default mode) and kiln against a device-to-device copy of the same bytes, each checked
against eager first and timed by ``triton.testing.do_bench`` (median of the device time):

- ``t_add``: ``x.t() + y`` (x of (n, n), y of (n, n)): one load along rows, one along columns;
- ``t_copy``: ``x.t().contiguous()``;
- ``nhwc``: ``relu(x)`` of an NCHW tensor stored channels-last.

Run on the GPU machine: ``scripts/device_run.sh python3 benchmarks/transpose_bench.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gpu_bench import copy_bandwidth


def _cases(dtype: torch.dtype, n: int) -> dict:
    x, y = torch.randn(n, n, device="cuda", dtype=dtype), torch.randn(n, n, device="cuda", dtype=dtype)
    img = torch.randn(32, 256, 56, 56, device="cuda", dtype=dtype)
    return {
        "t_add": (lambda x, y: x.t() + y, (x, y), 3 * x.numel() * x.element_size()),
        "t_copy": (lambda x: x.t().contiguous(), (x,), 2 * x.numel() * x.element_size()),
        "nhwc": (lambda x: F.relu(x).contiguous(memory_format=torch.channels_last), (img,),
                 2 * img.numel() * img.element_size()),
    }


def main() -> None:
    from triton.testing import do_bench

    import kiln

    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=8192)
    args = parser.parse_args()
    copy_gbps = copy_bandwidth(torch.device("cuda"), 1024, 100)["gbps"]  # as gpu_bench measures it
    print(f"copy bandwidth: {copy_gbps:.0f} GB/s")
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        for name, (fn, inputs, nbytes) in _cases(dtype, args.n).items():
            cells = {}
            with torch.no_grad():
                expected = fn(*inputs)
                for label, compiled in (("eager", fn), ("torch", torch.compile(fn)), ("kiln", kiln.compile(fn))):
                    torch.testing.assert_close(compiled(*inputs), expected)
                    ms = do_bench(lambda c=compiled, a=inputs: c(*a), return_mode="median")
                    cells[label] = (ms, nbytes / ms / 1e6 / copy_gbps)
            rows.append((f"{name}-{str(dtype).split('.')[-1]}", cells))
    print(f"\n{'case':<18}" + "".join(f"{c + ' ms (of copy)':>24}" for c in ("eager", "torch", "kiln")))
    for name, cells in rows:
        print(f"{name:<18}" + "".join(f"{cells[c][0]:>13.4f} ({cells[c][1]:>5.0%})   " for c in ("eager", "torch", "kiln")))


if __name__ == "__main__":
    main()
