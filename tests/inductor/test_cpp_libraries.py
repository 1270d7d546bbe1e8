"""A graph's C++ kernels split among libraries compiled at once (inductor/cpp/_libraries.py).

The split deals kernels to libraries of about equal length, keeps a short graph in one library
and is the same on every call; a graph compiled as several libraries gives eager's results
(and gradients), and is rebuilt from the disk cache as the same libraries."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import kiln
from kiln.inductor import _compile
from kiln.inductor.cpp import _libraries
from kiln.inductor.cpp._libraries import split_kernels


@dataclass
class _Kernel:
    name: str
    code: str


def _kernels(*lines):
    return [_Kernel(f"kernel{k}", "\n".join(["x"] * n)) for k, n in enumerate(lines)]


def test_a_short_graph_is_one_library():
    kernels = _kernels(100, 200, 250)
    assert split_kernels(kernels, 8) == [kernels]
    assert split_kernels([], 8) == []


def test_kernels_are_dealt_to_libraries_of_about_equal_length_in_the_graphs_order():
    kernels = _kernels(900, 300, 300, 300, 600, 200, 100)  # 2700 lines: 4 libraries of at least 600
    # (the longest first to the shortest library: 900 | 600 | 300 + 300 | 300 + 200 + 100)
    libraries = split_kernels(kernels, 8)
    assert [[k.name for k in library] for library in libraries] == \
        [["kernel0"], ["kernel4"], ["kernel1", "kernel3"], ["kernel2", "kernel5", "kernel6"]]
    assert split_kernels(kernels, 8) == libraries  # the same split every time
    assert [[k.name for k in library] for library in split_kernels(kernels, 2)] == \
        [["kernel0", "kernel2", "kernel5"], ["kernel1", "kernel3", "kernel4", "kernel6"]]
    assert split_kernels(kernels, 1) == [kernels]


class _Block(torch.nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 2 * d)
        self.scale = 1.0 + k / 8  # another program per block: no twins

    def forward(self, x):
        return x + self.up(self.norm(x)).chunk(2, -1)[0].sigmoid() * F.gelu(x) * self.scale


def test_a_graph_in_several_libraries_is_compiled_and_rebuilt(monkeypatch, graphs, tmp_path):
    monkeypatch.setattr(kiln.config, "graph_cache", True)
    monkeypatch.setattr(kiln.config, "frame_cache", False)
    monkeypatch.setattr(_libraries, "_MIN_LINES", 40)  # this small model's kernels in three libraries
    monkeypatch.setattr(_compile, "build_jobs", lambda: 3)
    kiln.reset()
    # float64: the weights' gradients are sums in another order than eager's (about 5e-6 apart
    # in float32 here, split or not), not what this test is about
    model = torch.nn.Sequential(*[_Block(16, k) for k in range(4)]).double()
    x = torch.randn(4, 16, dtype=torch.float64, requires_grad=True)
    options = {"inductor.cache_dir": str(tmp_path)}

    def step(compiled):
        model.zero_grad()
        x.grad = None
        out = compiled(x)
        out.square().sum().backward()
        return out, x.grad.clone(), [p.grad.clone() for p in model.parameters()]

    expected = step(model)
    torch.testing.assert_close(step(kiln.compile(model, options=options)), expected)
    assert [len(g.cpp_libraries) for g in graphs] == [3, 3]
    assert all(g.cpp_code == "".join(g.cpp_libraries) for g in graphs)
    (builder,) = kiln.session().kernels.values()
    assert builder.stats.compiled == 6
    kiln.reset()  # a new session: both graphs rebuilt from the disk cache, their libraries loaded
    torch.testing.assert_close(step(kiln.compile(model, options=options)), expected)
    assert (kiln.session().graph_cache.hits, kiln.session().graph_cache.misses) == (1, 0)
    (builder,) = kiln.session().kernels.values()
    assert (builder.stats.compiled, builder.stats.disk_hits) == (0, 6)
