"""Kernels that differ only in names share one compiled function (inductor/_twins.py).

A model of repeated layers compiles one C++ function, or one Triton kernel, per distinct
program and gives eager's results (its gradients too), also when loaded from the disk cache;
kernels that differ in anything but names (a constant, which argument goes where, a type) are
never twins."""

from __future__ import annotations

import logging
import re

import torch
import torch.nn.functional as F
from triton_support import DEVICE, OPTIONS

import kiln
from kiln.inductor._twins import canonical, twins

GELU = '''extern "C" void {name}(float* __restrict__ {a}, const float* __restrict__ {b}, int64_t kiln_threads)
{{
    #pragma omp simd
    for (int64_t r0 = 0; r0 < 512; ++r0)
    {{
        // {c}: pointwise of view_{n}
        float tmp0 = {b}[r0];
        float {acc} = tmp0 * float({k});
        {a}[r0] = {acc} - {b}[r0];
    }}
}}'''


def _kernel(name, a="buf3", b="arg0", c="buf4", n=1, k="0.5", acc="val_buf4"):
    return GELU.format(name=name, a=a, b=b, c=c, n=n, k=k, acc=acc)


def test_kernels_that_differ_in_names_and_comments_are_twins():
    codes = {"kernel0": _kernel("kernel0"),
             "kernel1": _kernel("kernel1", a="buf17", b="buf12", c="buf18", n=7, acc="val_buf18"),
             "kernel2": _kernel("kernel2", k="0.25"),  # another constant
             "kernel3": _kernel("kernel3", a="arg1", b="buf9", c="buf2", n=3, acc="val_buf2")}
    assert twins(codes, "//") == {"kernel1": "kernel0", "kernel3": "kernel0"}
    assert "<kernel>(float* __restrict__ <0>, const float* __restrict__ <1>" in canonical(codes["kernel1"], "kernel1", "//")


def test_kernels_that_use_their_arguments_differently_are_not_twins():
    """Same text up to which parameter a use names: another program."""
    swapped = _kernel("kernel1").replace("float tmp0 = arg0[r0];", "float tmp0 = buf3[r0];")
    typed = _kernel("kernel2").replace("const float*", "const double*")
    codes = {"kernel0": _kernel("kernel0"), "kernel1": swapped, "kernel2": typed}
    assert twins(codes, "//") == {}


def test_the_renaming_never_meets_a_name_of_the_code():
    """Its names are no identifiers: a ``v0`` or ``KERNEL`` of the code stays itself."""
    code = "void kernel4(float* buf3) { float v0 = buf3[0]; float KERNEL = val_buf3; kernel40(v0); }"
    assert canonical(code, "kernel4", "//") == \
        "void <kernel>(float* <0>) { float v0 = <0>[0]; float KERNEL = val_<0>; kernel40(v0); }"


def _functions(code):
    return len(re.findall(r'extern "C" void kernel\d+\(', code))


class _Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 2 * d)
        self.down = torch.nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x)), approximate="tanh"))


def test_repeated_layers_compile_one_function_per_program(monkeypatch, graphs, tmp_path):
    monkeypatch.setattr(kiln.config, "graph_cache", True)  # (the captured frames' disk cache off)
    monkeypatch.setattr(kiln.config, "frame_cache", False)
    kiln.reset()
    model = torch.nn.Sequential(*[_Block(32) for _ in range(6)]).eval()
    x = torch.randn(4, 8, 32)
    options = {"inductor.cache_dir": str(tmp_path)}
    with torch.no_grad():
        expected = model(x)
        torch.testing.assert_close(kiln.compile(model, options=options)(x), expected)
        (graph,) = graphs
        assert (graph.kernels, _functions(graph.cpp_code)) == (13, 5)  # the first layer, its last kernel, the rest twins
        kiln.reset()  # a new session: the graph is rebuilt from the disk cache, each twin's call its function's
        torch.testing.assert_close(kiln.compile(model, options=options)(x), expected)
        assert (kiln.session().graph_cache.hits, kiln.session().graph_cache.misses) == (1, 0)


def _triton_kernels(code):
    return len(re.findall(r"^def kernel\d+\(", code, re.MULTILINE))


def test_repeated_layers_compile_one_triton_kernel_per_program(monkeypatch, graphs, tmp_path):
    """The same on the Triton path (a GPU's, or triton's interpreter on CPU tensors), a
    training step's forward and backward: each program is one kernel of the module, every
    twin launches it with its own arguments."""
    monkeypatch.setattr(kiln.config, "graph_cache", True)
    monkeypatch.setattr(kiln.config, "frame_cache", False)
    kiln.reset()
    model = torch.nn.Sequential(*[_Block(32) for _ in range(6)]).to(DEVICE)
    x = torch.randn(4, 8, 32, device=DEVICE)
    options = {**(OPTIONS or {}), "inductor.cache_dir": str(tmp_path)}

    def step(compiled):
        model.zero_grad()
        out = compiled(x)
        out.square().mean().backward()
        return out, [p.grad.clone() for p in model.parameters()]

    expected = step(model)
    torch.testing.assert_close(step(kiln.compile(model, options=options)), expected)
    forward, backward = graphs
    assert (forward.kernels, _triton_kernels(forward.triton_code)) == (13, 5)
    assert (backward.kernels, _triton_kernels(backward.triton_code)) == (36, 14)
    kiln.reset()  # a new session: both graphs rebuilt from the disk cache
    torch.testing.assert_close(step(kiln.compile(model, options=options)), expected)
    assert (kiln.session().graph_cache.hits, kiln.session().graph_cache.misses) == (1, 0)  # the step's both graphs


def test_under_max_autotune_a_twin_takes_its_firsts_measured_launch(monkeypatch, graphs, tmp_path, caplog):
    """Only each program's first kernel is measured; its twins launch with the launch it
    chose (the same program over the same sizes), with eager's values."""
    monkeypatch.setattr(kiln.config, "graph_cache", False)
    kiln.reset()
    model = torch.nn.Sequential(*[_Block(32) for _ in range(3)]).to(DEVICE).eval()
    x = torch.randn(4, 8, 32, device=DEVICE)
    options = {**(OPTIONS or {}), "inductor.cache_dir": str(tmp_path), "inductor.max_autotune": True}
    with torch.no_grad(), caplog.at_level(logging.DEBUG, logger="kiln"):
        torch.testing.assert_close(kiln.compile(model, options=options)(x), model(x))
    (graph,) = graphs
    (line,) = [r.getMessage() for r in caplog.records if "twins:" in r.getMessage()]
    pairs = [pair.split(" -> ") for pair in line.split("twins: ")[1].rstrip(")").split(", ")]
    launched = dict(re.findall(r"_launch_(kernel\d+)\(.*#\s*(.*)$", graph.wrapper_code, re.MULTILINE))
    measured = {result.kernel for result in graph.autotuned}
    assert len(pairs) == graph.kernels - _triton_kernels(graph.triton_code) > 0
    assert measured == set(launched) - {twin for twin, _ in pairs}
    assert all(launched[twin] == launched[first] for twin, first in pairs)
