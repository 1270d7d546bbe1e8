"""Pointwise values only their own Triton kernel reads (``Stage.private``) stay in registers
where every read of them took the value just computed: a persistent softmax's exponentials
(realized, as they are read by the sum and the division) were stored and then overwritten by
the output, a third memory access per element (the fp32 softmax rows' deficit on the H100).
Where a read needs memory (another element of the row, a later loop of a looped kernel) the
store stays. Checked against eager; CUDA tensors on a GPU, otherwise CPU tensors through
triton's interpreter."""

from __future__ import annotations

import re

import pytest
import torch
from triton_support import DEVICE, OPTIONS
from triton_support import run_like_eager as _run

import kiln

pytest.importorskip("triton")

WIDE = 40000  # above triton_persistent_max (32768): a looped row


def _stores(code):
    return code.count("tl.store(")


def _allocated(wrapper):
    """The buffers the wrapper allocates."""
    return set(re.findall(r"(buf\d+) = empty_strided", wrapper)) | set(re.findall(r"(buf\d+) = _empty", wrapper))


def test_persistent_softmax_stores_only_its_output(graphs):
    _run(lambda x: torch.softmax(x, -1), torch.randn(6, 4096))
    assert [g.kernels for g in graphs] == [1]
    code = graphs[0].triton_code
    assert _stores(code) == 1
    assert "kept in registers" in code


def test_softmax_in_float32_at_32768_columns(graphs):
    x = torch.randn(2, 32768) * 4
    x[1, 100] = float("inf")
    _run(lambda x: torch.softmax(x, -1), x)
    assert _stores(graphs[0].triton_code) == 1


def test_a_private_value_not_taken_as_an_output_is_not_allocated(graphs):
    def f(x):
        e = torch.exp(x - x.amax(-1, keepdim=True))
        return (e / e.sum(-1, keepdim=True)).double()  # another layout: nothing takes e's memory

    _run(f, torch.randn(4, 512))
    graph = graphs[0]
    assert graph.kernels == 1
    kept = re.findall(r"# (buf\d+): pointwise of .*, kept in registers", graph.triton_code)
    assert len(kept) == 1
    assert kept[0] not in graph.wrapper_code  # neither allocated nor passed


def test_a_read_of_another_element_keeps_the_store(graphs):
    def f(x):
        e = torch.exp(x - x.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True) + e.flip(-1)  # the flip reads e in memory

    _run(f, torch.randn(4, 256))
    code = graphs[0].triton_code
    assert "kept in registers" not in code
    assert _stores(code) == graphs[0].kernels + 1


def test_a_looped_row_keeps_what_a_later_loop_reads(graphs):
    def f(x):
        e = torch.exp(torch.sin(x) * 3 - 2)
        return e / e.sum(-1, keepdim=True)

    _run(f, torch.randn(3, WIDE))
    code = graphs[0].triton_code
    assert "for roffset" in code
    assert "kept in registers" not in code


def test_a_flat_kernel_keeps_a_shared_value_in_registers(graphs):
    def f(x):
        y = torch.sin(x) * torch.cos(x) + torch.tanh(x) * torch.exp(x)  # read twice: realized once
        return y * 2 + torch.sigmoid(y)

    _run(f, torch.randn(1000))
    code = graphs[0].triton_code
    assert graphs[0].kernels == 1
    assert _stores(code) == 1


def test_an_output_value_is_still_stored(graphs):
    def f(x):
        y = torch.sin(x) * torch.cos(x) + torch.tanh(x) * torch.exp(x)
        return y * 2 + torch.sigmoid(y), y

    _run(f, torch.randn(1000))
    assert _stores(graphs[0].triton_code) == 2


def _to_bfloat16(x):
    """float32 to bfloat16 as the kernels convert: to nearest, ties to even (triton's
    interpreter too: this folder's conftest gives it the GPU's rounding)."""
    return x.to(torch.bfloat16)


def test_a_half_value_is_kept_rounded_in_registers(graphs):
    # each half op's value is rounded as eager rounds it (its store would round it so): its
    # readers take the rounded register (so it need not be stored), never the unrounded one.
    # Exact, with no tolerance: products and sums of bfloat16 values computed in float32 and
    # rounded after each op are eager's bits
    def f(a, b, c, d):
        y = a * b + c * d + a * d + b * c  # read twice, and too long to recompute: realized
        return y * 2 + y * y

    a, b, c, d = (torch.randn(4096, dtype=torch.bfloat16).to(DEVICE) for _ in range(4))
    with torch.no_grad():
        actual = kiln.compile(f, options=OPTIONS)(a, b, c, d)
        expected = f(a, b, c, d)
    a32, b32, c32, d32 = (v.float() for v in (a, b, c, d))
    y32 = a32 * b32 + c32 * d32 + a32 * d32 + b32 * c32
    assert not torch.equal(expected, _to_bfloat16(y32 * 2 + y32 * y32))  # the inputs tell rounding apart
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    code = graphs[0].triton_code
    assert "kept in registers" in code
    assert _stores(code) == 1
    assert ".to(tl.bfloat16).to(tl.float32)" in code
    # without contraction: on an H100 (triton 3.6) LLVM narrowed the roundings' float32 ops to
    # bfloat16 ones and fused each product with its sum into one fma, the product never
    # rounded (44% of the elements an ulp from eager's; benchmarks/half_rounding.py)
    assert "enable_fp_fusion=False" in graphs[0].wrapper_code


def test_every_kernel_is_compiled_without_contraction(graphs):
    # float32 too: a value must have the same bits inline as stored (the C++ kernels' rule:
    # tests/inductor/test_kernel_fuzz.py, wide seed 1150), and the launch says so
    _run(lambda x: torch.tanh(x * 2 + 1) * x, torch.randn(4096))
    _run(lambda x: (x.float() * 3 + 1).sum(-1), torch.randn(8, 512, dtype=torch.bfloat16))
    assert all("enable_fp_fusion=False" in g.wrapper_code for g in graphs) and len(graphs) == 2


def test_a_half_value_stored_for_another_kernel_is_read_rounded(graphs):
    # y is an output too: stored, and the later stage reads the rounded value (the register,
    # rounded as the store rounds), not the float32 sum: eager's bits, both outputs
    def f(a, b, c, d):
        y = a * b + c * d + a * d + b * c
        return y * 2 + y * y, y

    a, b, c, d = (torch.randn(4096, dtype=torch.bfloat16).to(DEVICE) for _ in range(4))
    with torch.no_grad():
        out, y_out = kiln.compile(f, options=OPTIONS)(a, b, c, d)
        expected, y = f(a, b, c, d)
    torch.testing.assert_close(y_out, y, rtol=0, atol=0)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    assert _stores(graphs[0].triton_code) == 2


def test_softmax_of_a_float_view_of_half_input(graphs):
    x = torch.randn(4, 1024, dtype=torch.bfloat16)
    _run(lambda x: torch.softmax(x.float() * 3, -1).to(torch.bfloat16) * x, x)
    assert _stores(graphs[0].triton_code) == 1


def test_symbolic_rows_loop_and_keep_the_store(graphs):
    f = kiln.compile(lambda x: torch.softmax(x * 2, -1), options=OPTIONS, dynamic=True)
    for n in (300, 517):
        x = torch.randn(3, n, device=DEVICE)
        with torch.no_grad():
            torch.testing.assert_close(f(x), torch.softmax(x * 2, -1))
    assert len(graphs) == 1 and "for roffset" in graphs[0].triton_code


def test_max_autotune_measures_the_kernel_without_the_store(graphs, tmp_path):
    options = {**(OPTIONS or {}), "inductor.max_autotune": True, "inductor.cache_dir": str(tmp_path)}
    x = torch.randn(64, 1024, device=DEVICE)
    with torch.no_grad():
        out = kiln.compile(lambda x: torch.softmax(x, -1), options=options)(x)
    torch.testing.assert_close(out, torch.softmax(x, -1))
    (graph,) = graphs
    assert _stores(graph.triton_code) == 1
    (result,) = graph.autotuned
    assert len(result.candidates) > 1 and all(t is not None for t in result.timings[:1])
