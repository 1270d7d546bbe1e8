"""kiln_sqrt and kiln_rsqrt (``triton._runtime.resolve_roots``): libdevice's float32 square
roots as the one instruction libdevice compiles to, without linking libdevice into the kernel.

On this CPU: triton compiles for an H100 target (its own ptxas) in a new process (triton's
interpreter, once it ran in a process, leaves ``triton.language`` patched for itself), and the
instructions are compared with libdevice's. On a GPU: the same bits as libdevice's, and eager's
values, over ordinary, tiny, huge and special numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from kiln.inductor.triton._runtime import interpreting, resolve_roots

_COMPILE_FOR_AN_H100 = textwrap.dedent("""
    import json, re
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.language.extra import libdevice

    from kiln.inductor.triton._runtime import resolve_roots

    kiln_sqrt, kiln_rsqrt = resolve_roots()

    @triton.jit
    def ours(out, x, n, XBLOCK: tl.constexpr):
        i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
        m = i < n
        v = tl.load(x + i, m)
        tl.store(out + i, kiln_sqrt(v) + kiln_rsqrt(v), m)

    @triton.jit
    def theirs(out, x, n, XBLOCK: tl.constexpr):
        i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
        m = i < n
        v = tl.load(x + i, m)
        tl.store(out + i, libdevice.sqrt(v) + libdevice.rsqrt(v), m)

    got = {}
    for dtype in ("fp32", "fp64"):
        signature = {"out": f"*{dtype}", "x": f"*{dtype}", "n": "i32", "XBLOCK": "constexpr"}
        for fn in (ours, theirs):
            ptx = triton.compile(ASTSource(fn, signature, {(3,): 256}, {}), target=GPUTarget("cuda", 90, 32)).asm["ptx"]
            roots = sorted({m.group(0) for m in re.finditer(r"\\br?sqrt\\.[a-z0-9.]+", ptx)})
            got[f"{fn.__name__}-{dtype}"] = {"roots": roots, "libdevice": "__nv_" in ptx}
    print(json.dumps(got))
""")


def test_the_roots_are_libdevices_instructions_without_libdevice(tmp_path):
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    env.pop("TRITON_INTERPRET", None)
    script = tmp_path / "compile.py"  # (triton reads a kernel's source from its file)
    script.write_text(_COMPILE_FOR_AN_H100)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    # float32: the same two instructions; libdevice's kernel inlined __nv_ functions, ours none
    assert got["ours-fp32"]["roots"] == got["theirs-fp32"]["roots"] == ["rsqrt.approx.ftz.f32", "sqrt.approx.ftz.f32"]
    assert got["theirs-fp32"]["libdevice"] and not got["ours-fp32"]["libdevice"]
    # float64: libdevice's own functions, both ways
    assert got["ours-fp64"] == got["theirs-fp64"]
    assert got["ours-fp64"]["roots"] == ["rsqrt.approx.f64", "sqrt.rn.f64"]


def test_under_the_interpreter_the_roots_are_numpys():
    import numpy as np

    if not interpreting():
        pytest.skip("TRITON_INTERPRET is off in this process")
    sqrt, rsqrt = resolve_roots()
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    data = np.array([4.0, 0.25, 2.0, 1e-3], dtype=np.float32)
    x = tl.tensor(TensorHandle(data, tl.float32), tl.block_type(tl.float32, [4]))
    np.testing.assert_array_equal(sqrt(x).handle.data, np.sqrt(data))
    np.testing.assert_array_equal(rsqrt(x).handle.data, 1 / np.sqrt(data))


# -- on a GPU ---------------------------------------------------------------------------------


def _kernels():
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice

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

    return ours, theirs


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_roots_give_libdevices_bits(dtype):
    if interpreting():
        pytest.skip("TRITON_INTERPRET is on in this process")
    ours, theirs = _kernels()
    special = torch.tensor([0.0, -0.0, 1.0, 4.0, -1.0, float("inf"), float("-inf"), float("nan"),
                            1e-45, 1e-40, 1e-38, 3e38], dtype=dtype)
    spread = torch.exp(torch.empty(100_000, dtype=torch.float64).uniform_(-80, 80)).to(dtype)
    x = torch.cat([special, spread, torch.rand(10_000, dtype=dtype)]).cuda()
    n = x.numel()
    a = torch.empty(2 * n, dtype=dtype, device="cuda")
    b = torch.empty(2 * n, dtype=dtype, device="cuda")
    grid = (-(-n // 256),)
    ours[grid](a, x, n, XBLOCK=256)
    theirs[grid](b, x, n, XBLOCK=256)
    torch.cuda.synchronize()
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)  # the same instructions
    # and eager's values, away from the subnormals libdevice flushes to zero
    normal = x.abs() >= torch.finfo(dtype).tiny
    torch.testing.assert_close(a[:n][normal], torch.sqrt(x)[normal], equal_nan=True)
    torch.testing.assert_close(a[n:][normal], torch.rsqrt(x)[normal], equal_nan=True)
