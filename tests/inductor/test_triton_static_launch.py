"""Compiled Triton kernels launched through torch's static CUDA launcher (triton/_static_launch.py).

On CPU: how a kernel's signature and metadata become the launcher's parameters, and every
case refused (triton's launcher used). On a GPU: triton kernels compiled by triton, loaded and
launched through ``Launch`` with the static launcher, with the answers of triton's own launch:
64-bit and unsigned integers, a launch of many programs; an integer triton specialized as 1
is left to triton's launcher."""

from __future__ import annotations

import textwrap
from collections import namedtuple

import pytest
import torch
from triton_support import compile_for_an_h100

from kiln.inductor.triton._static_launch import (
    StaticKernel,
    as_static,
    declared_of,
    launcher,
    static_form,
)

# the fields of triton 3.6's kernel metadata that decide the launch (its namedtuple has more)
Meta = namedtuple("Meta", "num_ctas launch_cooperative_grid launch_pdl global_scratch_size profile_scratch_size "
                          "cluster_dims tensordesc_meta num_warps shared", defaults=(1, False, False, 0, 0, (1, 1, 1),
                                                                                   None, 4, 0))
NAMES = ["out", "x", "n", "k", "seed", "XBLOCK"]
SIGNATURE = {"out": "*bf16", "x": "*fp32", "n": "i32", "k": "i64", "seed": "u64", "XBLOCK": "constexpr"}


def test_the_parameters_are_the_launchs_arguments_then_the_scratch_pointers():
    assert static_form(NAMES, SIGNATURE, Meta(), 5) == ("OOilKOO", (None, None))
    # the kernel's own constexpr among triton's constants (by path, or by name)
    assert static_form(NAMES, SIGNATURE, Meta(), 5, [(5,)]) == ("OOilKOO", (None, None))
    assert static_form(NAMES, SIGNATURE, Meta(), 5, ["XBLOCK"]) == ("OOilKOO", (None, None))
    # a triton whose metadata names one scratch area: one null pointer
    Older = namedtuple("Older", "num_warps shared global_scratch_size")
    assert static_form(NAMES, SIGNATURE, Older(4, 0, 0), 5) == ("OOilKO", (None,))
    assert static_form(NAMES, {**SIGNATURE, "k": "fp32"}, Meta(), 5) == ("OOifKOO", (None, None))


@pytest.mark.parametrize("constants", [[(2,)], ["n"], [(7, 0)], [None]])
def test_a_launch_argument_among_tritons_constants_is_refused(constants):
    """(triton 3.2 and before kept an integer equal to 1 typed and made it a constant; a path
    or name the launch does not know is refused too)"""
    assert static_form(NAMES, SIGNATURE, Meta(), 5, constants) is None


@pytest.mark.parametrize("change", [
    {"signature": {**SIGNATURE, "k": "i1"}},  # a bool
    {"signature": {**SIGNATURE, "k": "fp16"}},  # a half-precision scalar
    {"signature": {**SIGNATURE, "x": "tensordesc<fp32[16]>"}},  # a tensor descriptor
    {"signature": dict(reversed(SIGNATURE.items()))},  # not in the function's order
    {"signature": {**SIGNATURE, "XBLOCK": "i32"}},  # a constexpr of the kernel's own as an argument
    {"signature": {**SIGNATURE, "n": "constexpr"}},  # an integer triton specialized as 1, compiled in
    {"meta": Meta(global_scratch_size=128)},
    {"meta": Meta(profile_scratch_size=64)},
    {"meta": Meta(num_ctas=2)},
    {"meta": Meta(cluster_dims=(2, 1, 1))},
    {"meta": Meta(launch_cooperative_grid=True)},
    {"meta": Meta(launch_pdl=True)},
    {"meta": Meta(tensordesc_meta=[{"block": 16}])},
    {"meta": namedtuple("Unknown", "num_warps shared")(4, 0)},  # no scratch field: another convention
])
def test_a_launch_the_static_launcher_may_not_do_as_triton_is_refused(change):
    assert static_form(NAMES, change.get("signature", SIGNATURE), change.get("meta", Meta()), 5) is None


def test_the_declared_arguments_are_those_before_the_functions_constexprs():
    class Fn:
        arg_names = NAMES
        constexprs = [5]

    assert declared_of(Fn()) == 5

    class Inner(Fn):  # a constexpr between arguments: Launch passes no such function's arguments
        constexprs = [2, 5]

    assert declared_of(Inner()) is None
    assert declared_of(object()) is None  # (triton's interpreter's function)


_COMPILE_FOR_AN_H100 = textwrap.dedent("""
    import json, sys
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kiln.inductor.triton._static import _Read, _Source, static_entry
    from kiln.inductor.triton._static_launch import declared_of, static_form

    @triton.jit
    def axpy(out, x, n, k, XBLOCK: tl.constexpr):
        i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
        m = i < n
        tl.store(out + i, tl.load(x + i, m) * k, m)

    signature = {"out": "*fp32", "x": "*fp32", "n": "i32", "k": "fp32", "XBLOCK": "constexpr"}
    compiled = triton.compile(ASTSource(axpy, signature, {(4,): 128}, {}), target=GPUTarget("cuda", 90, 32))
    src = compiled.src
    form = static_form(axpy.arg_names, dict(src.signature), compiled.metadata, 4, list(src.constants))
    entry = static_entry(compiled, (0, 0, 0, 17, 0))
    files = {f: p for f, p in compiled.metadata_group.items() if f in ("axpy.json", "axpy.cubin")}
    read = _Read(_Source(entry), compiled.name, files)
    form_read = static_form(read.src.fn.arg_names, dict(read.src.signature), read.metadata, 4, list(read.src.constants))
    print(json.dumps({"declared": declared_of(axpy), "form": form, "form_read": form_read,
                      "warps": [read.metadata.num_warps, compiled.metadata.num_warps],
                      "shared": [read.metadata.shared, compiled.metadata.shared]}))
""")


def test_the_form_of_a_kernel_triton_compiled_as_read_back_from_its_cache(tmp_path):
    """triton compiles for an H100 without one (its own ptxas); a warm start reads the cache
    entry's metadata (``_static._Read``) instead of building triton's ``CompiledKernel``: both
    give the launcher the same parameters. (In a new process: triton's interpreter, once it
    ran in a process, leaves ``triton.language`` patched for itself.)"""
    got = compile_for_an_h100(_COMPILE_FOR_AN_H100, tmp_path)
    assert got["declared"] == 4
    codes, extra = got["form"]
    assert codes.startswith("OOif") and codes[4:] == "O" * len(extra)
    assert got["form_read"] == got["form"]
    assert got["warps"][0] == got["warps"][1] and got["shared"][0] == got["shared"][1]


def test_the_launcher_is_torchs_where_it_has_one_and_nothing_else_is_loaded_for_it():
    has = torch.cuda.is_available() and torch.version.hip is None and hasattr(torch._C, "_StaticCudaLauncher")
    assert (launcher() is not None) == has
    assert as_static(object(), 0, 5) is None  # not a compiled kernel: triton's launcher (or none) is used
    assert as_static(object(), 0, None) is None  # a launch whose arguments are not known


# -- on a GPU ---------------------------------------------------------------------------------


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["seed"])
    def axpy(out, x, n, k, seed, XBLOCK: tl.constexpr):
        i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
        m = i < n
        v = tl.load(x + i, m)
        tl.store(out + i, v * tl.cast(k, tl.float32) + (seed % 1000).to(tl.float32), m)

    return axpy


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(("n", "k", "seed"), [
    (1000, 3, 12345),  # i32 sizes, i32 seed
    (1000, 1, 2**40 + 7),  # k specialized as 1 (not passed), an i64 seed
    (70000, -5, 2**63 + 11),  # many programs, a negative factor, an unsigned 64-bit seed
    (4096, 2**33, 3),  # an i64 factor
])
def test_a_static_launch_gives_tritons_answer(n, k, seed):
    from kiln.inductor.triton._launch import Launch, _key_function, launch_state

    if launcher() is None:
        pytest.skip("this torch has no static CUDA launcher")
    fn = _kernel()
    x = torch.randn(n + 5, device="cuda")[5:]  # off the allocator's alignment
    expected = torch.empty(n, device="cuda", dtype=torch.float32)
    fn[(triton_cdiv(n, 256),)](expected, x, n, k, seed, XBLOCK=256)
    kinds = ["tensor", "tensor", "int", "int", "seed"]
    launch = Launch(fn, ["out", "x", "n", "k", "seed"], kinds, {"XBLOCK": 256})
    out = torch.full((n,), float("nan"), device="cuda")
    compiled = fn.warmup(out, x, n, k, seed, grid=(1,), XBLOCK=256)
    static = as_static(compiled, torch.cuda.current_device(), declared_of(fn))
    if dict(compiled.src.signature)["k"] == "constexpr":  # k == 1 compiled in: triton's launcher launches it
        assert static is None
        return
    assert isinstance(static, StaticKernel)
    key = _key_function(tuple(kinds))(torch.cuda.current_device(), out, x, n, k, seed)
    assert launch.seed(key, static)
    launch(launch_state(None), triton_cdiv(n, 256), out, x, n, k, seed)
    torch.cuda.synchronize()
    # one binary launched two ways reads and writes the same values: bit for bit
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
