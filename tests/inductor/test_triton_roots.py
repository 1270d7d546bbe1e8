"""kiln_sqrt and kiln_rsqrt (``triton._runtime.resolve_roots``): libdevice's float32 square
roots as the one instruction libdevice compiles to, without linking libdevice into the kernel.

Anywhere: triton compiles for an H100 target (its own ptxas, no GPU needed) in a new process,
and the instructions are compared with libdevice's; the interpreter's stand-ins are numpy's.
On a GPU: the same bits as libdevice's, and eager's values, over ordinary, tiny, huge and
special numbers.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch
from triton_support import compile_for_an_h100

from kiln.inductor.triton._runtime import resolve_roots

# ``ours`` and ``theirs`` store sqrt(x) at out[:n] and rsqrt(x) at out[n:], through kiln's roots
# and through libdevice (the same module for both tests: triton reads it from its file)
_KERNELS = """
import triton
import triton.language as tl
from triton.language.extra import libdevice

from kiln.inductor.triton._runtime import resolve_roots

kiln_sqrt, kiln_rsqrt = resolve_roots()


@triton.jit
def ours(out, x, n, XBLOCK: tl.constexpr):
    i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    m = i < n
    v = tl.load(x + i, m)
    tl.store(out + i, kiln_sqrt(v), m)
    tl.store(out + n + i, kiln_rsqrt(v), m)


@triton.jit
def theirs(out, x, n, XBLOCK: tl.constexpr):
    i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    m = i < n
    v = tl.load(x + i, m)
    tl.store(out + i, libdevice.sqrt(v), m)
    tl.store(out + n + i, libdevice.rsqrt(v), m)
"""

_COMPILE = """
import json, re
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

got = {}
for dtype in ("fp32", "fp64"):
    signature = {"out": f"*{dtype}", "x": f"*{dtype}", "n": "i32", "XBLOCK": "constexpr"}
    for fn in (ours, theirs):
        ptx = triton.compile(ASTSource(fn, signature, {(3,): 256}, {}), target=GPUTarget("cuda", 90, 32)).asm["ptx"]
        roots = sorted({m.group(0) for m in re.finditer(r"\\br?sqrt\\.[a-z0-9.]+", ptx)})
        got[f"{fn.__name__}-{dtype}"] = {"roots": roots, "libdevice": "__nv_" in ptx}
print(json.dumps(got))
"""


def test_the_roots_are_libdevices_instructions_without_libdevice(tmp_path):
    got = compile_for_an_h100(_KERNELS + _COMPILE, tmp_path)
    # float32: the same two instructions; libdevice's kernel inlined __nv_ functions, ours none
    assert got["ours-fp32"]["roots"] == got["theirs-fp32"]["roots"] == ["rsqrt.approx.ftz.f32", "sqrt.approx.ftz.f32"]
    assert got["theirs-fp32"]["libdevice"] and not got["ours-fp32"]["libdevice"]
    # float64: libdevice's own functions, both ways
    assert got["ours-fp64"] == got["theirs-fp64"]
    assert got["ours-fp64"]["roots"] == ["rsqrt.approx.f64", "sqrt.rn.f64"]


def test_under_the_interpreter_the_roots_are_numpys(monkeypatch):
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # (resolve_roots reads it as triton does)
    sqrt, rsqrt = resolve_roots()
    data = np.array([4.0, 0.25, 2.0, 1e-3], dtype=np.float32)
    x = tl.tensor(TensorHandle(data, tl.float32), tl.block_type(tl.float32, [4]))
    np.testing.assert_array_equal(sqrt(x).handle.data, np.sqrt(data))
    np.testing.assert_array_equal(rsqrt(x).handle.data, 1 / np.sqrt(data))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_roots_give_libdevices_bits(dtype, tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # (triton decides when a kernel is defined)
    path = tmp_path / f"kiln_roots_test_{dtype}.py".replace("torch.", "")
    path.write_text(_KERNELS)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, path.stem, module)
    spec.loader.exec_module(module)
    special = torch.tensor([0.0, -0.0, 1.0, 4.0, -1.0, float("inf"), float("-inf"), float("nan"),
                            1e-45, 1e-40, 1e-38, 3e38], dtype=dtype)
    spread = torch.exp(torch.empty(100_000, dtype=torch.float64).uniform_(-80, 80)).to(dtype)
    x = torch.cat([special, spread, torch.rand(10_000, dtype=dtype)]).cuda()
    n = x.numel()
    a = torch.empty(2 * n, dtype=dtype, device="cuda")
    b = torch.empty(2 * n, dtype=dtype, device="cuda")
    grid = (-(-n // 256),)
    module.ours[grid](a, x, n, XBLOCK=256)
    module.theirs[grid](b, x, n, XBLOCK=256)
    torch.cuda.synchronize()
    # exact: the same instructions on the same inputs
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    # and eager's values (default tolerances of the dtype), away from the subnormals libdevice
    # flushes to zero
    normal = x.abs() >= torch.finfo(dtype).tiny
    torch.testing.assert_close(a[:n][normal], torch.sqrt(x)[normal], equal_nan=True)
    torch.testing.assert_close(a[n:][normal], torch.rsqrt(x)[normal], equal_nan=True)
