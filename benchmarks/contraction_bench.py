"""What building kiln's C++ kernels without contraction (``-ffp-contract=off``, since
2026-12-07) costs: five memory- and math-bound kernels built with and without the flag in one
process (one thread), timed in interleaved rounds; medians in milliseconds.

Run: ``python benchmarks/contraction_bench.py``
"""

import statistics
import tempfile
import time

import torch
import torch.nn.functional as F

import kiln
from kiln.inductor.cpp import _build

torch.set_num_threads(1)
cases = {
    "gelu 1024x4096": (lambda x: F.gelu(x), (1024, 4096)),
    "layernorm 1024x4096": (lambda x: F.layer_norm(x, (4096,)), (1024, 4096)),
    "softmax 1024x4096": (lambda x: torch.softmax(x, -1), (1024, 4096)),
    "x*y+z*w chain 4M": (lambda x: x * 1.5 + x * x * 0.25 - x * 3.0, (4096, 1024)),
    "tanh(x)*sigmoid(x) 4M": (lambda x: torch.tanh(x) * torch.sigmoid(x), (4096, 1024)),
}
flags_on = _build._BASE_FLAGS
flags_off = tuple(f for f in flags_on if f != "-ffp-contract=off")
compiled = {}
for label, flags in (("off (head)", flags_on), ("contract (before)", flags_off)):
    _build._BASE_FLAGS = flags
    for name, (fn, shape) in cases.items():
        kiln.reset()
        f = kiln.compile(fn, options={"inductor.cache_dir": tempfile.mkdtemp()})
        x = torch.randn(shape)
        with torch.no_grad():
            f(x)
        compiled[(label, name)] = (f, x)
times = {}
with torch.no_grad():
    for _ in range(7):
        for key, (f, x) in compiled.items():
            for _ in range(2):
                f(x)
            t = time.perf_counter()
            for _ in range(5):
                f(x)
            times.setdefault(key, []).append((time.perf_counter() - t) / 5 * 1e3)
print(f"{'case':28s}{'no contraction ms':>20s}{'contraction ms':>18s}{'ratio':>8s}")
for name in cases:
    a = statistics.median(times[("off (head)", name)])
    b = statistics.median(times[("contract (before)", name)])
    print(f"{name:28s}{a:>20.3f}{b:>18.3f}{a / b:>8.2f}")
