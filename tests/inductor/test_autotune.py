"""max-autotune for Triton kernels (``inductor.max_autotune``, ``kiln.inductor.triton._autotune``):
the candidates of each kernel shape, each computing eager's answer, the choice kept in the
disk cache, no kernel run again for a kernel measured before (another graph, another
process, a graph from the whole-graph cache), the user's tensors never touched, the
heuristic without the option. Without a GPU the kernels run on CPU tensors in triton's
interpreter (``TRITON_INTERPRET=1``, set by this folder's conftest), where each candidate
runs once and is checked; on a GPU (``@pytest.mark.gpu``) they are timed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import sympy
import torch
import torch.nn.functional as F

import kiln
from kiln.inductor import InductorConfig, cache_identity

pytest.importorskip("triton")

from kiln.inductor._entries import EntryStore
from kiln.inductor.triton import _autotune
from kiln.inductor.triton._kernel import TritonKernel, _rows_launch
from kiln.inductor.triton._ops import COMPILE_OPTIONS

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


@pytest.fixture
def options(tmp_path):
    """max_autotune, Triton kernels (CPU tensors: the interpreter's), a cache of the test's own."""
    base = {"inductor.max_autotune": True, "inductor.cache_dir": str(tmp_path)}
    return base if CUDA else {**base, "inductor.cpu_backend": "triton"}


@pytest.fixture
def timed(monkeypatch):
    """The kernels whose candidates were run (timed on a GPU, checked under the interpreter)."""
    names = []
    original = _autotune._time_candidates

    def record(fn, launch, *args, **kwargs):
        names.append(launch.name)
        return original(fn, launch, *args, **kwargs)

    monkeypatch.setattr(_autotune, "_time_candidates", record)
    return names


def _check_tuned(graph):
    """Every kernel of ``graph`` was measured: all of its candidates ran (under the
    interpreter none dropped: each gave the heuristic's results; on a GPU one may not
    compile), the least time won, and the wrapper launches it."""
    assert graph.autotuned and len(graph.autotuned) == graph.kernels
    for result in graph.autotuned:
        assert not result.cached and result.ran == len(result.candidates) > 1
        if not CUDA:
            assert all(t is not None for t in result.timings), result.timings
        assert result.timings[0] is not None  # the heuristic's launch always runs
        best = min((k for k, t in enumerate(result.timings) if t is not None), key=lambda k: (result.timings[k], k))
        assert result.chosen == result.candidates[best]
        launch = ", ".join(f"{k}={v}" for k, v in result.chosen.items())
        assert launch in graph.wrapper_code


# ------------------------------------------------------------------------------ candidates
def _launch(shape, meta, width=None):
    return TritonKernel("kernel0", "", [], dict(meta), shape, sympy.Integer(4096), width)


def test_candidates_of_each_shape():
    policy = _autotune.AutotunePolicy()
    flat = _autotune.candidates(_launch("flat", {"XBLOCK": 1024, "num_warps": 4}), 100000)
    assert flat[0] == {"XBLOCK": 1024, "num_warps": 4}  # the heuristic first
    assert {c["XBLOCK"] for c in flat} == {256, 512, 1024, 2048, 4096}
    assert len(flat) == len({tuple(sorted(c.items())) for c in flat}) <= policy.max_candidates
    # never a block above the elements' next power of two
    small = _autotune.candidates(_launch("flat", {"XBLOCK": 512, "num_warps": 4}), 300)
    assert {c["XBLOCK"] for c in small} == {256, 512}

    persistent = _autotune.candidates(_launch("persistent", {"XBLOCK": 4, "RBLOCK": 1024, "num_warps": 4},
                                              width=1000), 4096)
    assert persistent[0] == {"XBLOCK": 4, "RBLOCK": 1024, "num_warps": 4}
    assert all(c["RBLOCK"] == 1024 for c in persistent)  # a whole row per block, always
    assert {c["XBLOCK"] for c in persistent} == {2, 4, 8, 16}  # 4 rows per block, then 8, 2, 16 (and 1: cut)
    assert all(c["XBLOCK"] * c["RBLOCK"] <= 16384 and 1 <= c["num_warps"] <= 32 for c in persistent)
    assert len(persistent) == policy.max_candidates
    one_row = _autotune.candidates(_launch("persistent", {"XBLOCK": 1, "RBLOCK": 32768, "num_warps": 16},
                                           width=32768), 1)
    assert [c["num_warps"] for c in one_row] == [16, 32, 8] and all(c["XBLOCK"] == 1 for c in one_row)

    looped = _autotune.candidates(_launch("looped", {"XBLOCK": 1, "RBLOCK": 2048, "num_warps": 8}), 3)
    assert looped[0] == {"XBLOCK": 1, "RBLOCK": 2048, "num_warps": 8}
    assert {c.get("num_stages") for c in looped[1:]} == {1, 2}
    assert all(c["XBLOCK"] <= 4 for c in looped) and len(looped) <= policy.max_candidates


def test_choose_takes_the_least_time_ties_to_the_first():
    cands = [{"XBLOCK": k} for k in range(4)]
    assert _autotune.choose(cands, [3.0, 1.0, None, 1.0]) == {"XBLOCK": 1}
    assert _autotune.choose(cands, [None] * 4) is None


# ------------------------------------------------------------------------------ end to end
CASES = {
    "pointwise": (lambda x: F.gelu(x) * 2 - torch.tanh(x), (1000,)),
    "softmax": (lambda x: torch.softmax(x, -1), (10, 33)),
    "layernorm": (lambda x: F.layer_norm(x, (50,)) * 3, (6, 50)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_autotuned_kernels_match_eager(graphs, timed, options, case):
    fn, shape = CASES[case]
    x = torch.randn(shape, device=DEVICE)
    torch.testing.assert_close(kiln.compile(fn, options=options)(x), fn(x))
    assert len(graphs) == 1 and graphs[0].kernels == 1 and not graphs[0].cpp_code
    _check_tuned(graphs[0])
    assert timed == ["kernel0"]
    if not CUDA:  # the interpreter's stand-in: a candidate's programs
        result = graphs[0].autotuned[0]
        n = shape[0] if result.candidates[0].get("RBLOCK") else x.numel()
        assert result.timings == [float(-(-n // c["XBLOCK"])) for c in result.candidates]


def test_looped_rows_of_a_symbolic_size(graphs, options):
    """A symbolic row is looped: its candidates (with pipeline stages) measured at the
    example's sizes; other sizes run with the choice."""
    fn = CASES["softmax"][0]
    compiled = kiln.compile(fn, options=options, dynamic=True)
    for rows, cols in ((3, 20), (5, 70)):
        x = torch.randn(rows, cols, device=DEVICE)
        torch.testing.assert_close(compiled(x), fn(x))
    assert len(graphs) == 1
    assert "for roffset in range(0, rnumel, RBLOCK):" in graphs[0].triton_code
    _check_tuned(graphs[0])
    assert any("num_stages" in c for c in graphs[0].autotuned[0].candidates)


def test_every_candidate_computes_eagers_answer(graphs, monkeypatch, options):
    """Each candidate launch of a softmax row kernel, made the only one: eager's answer."""
    fn = CASES["softmax"][0]
    x = torch.randn(10, 33, device=DEVICE)
    kiln.compile(fn, options=options)(x)
    every = graphs[0].autotuned[0].candidates
    assert len(every) > 4
    for k, meta in enumerate(every):
        kiln.reset()
        monkeypatch.setattr(_autotune, "candidates", lambda launch, xnumel, policy=None, meta=meta: [dict(meta)])
        compiled = kiln.compile(fn, options={**options, "inductor.graph_cache": False})
        torch.testing.assert_close(compiled(x), fn(x), msg=lambda m, meta=meta: f"{meta}: {m}")
        assert graphs[-1].autotuned[0].chosen == meta
        assert ", ".join(f"{k}={v}" for k, v in meta.items()) in graphs[-1].wrapper_code


def test_the_choice_is_kept_on_disk_and_not_measured_again(graphs, timed, options, tmp_path, monkeypatch):
    from kiln._config import config

    monkeypatch.setattr(config, "graph_cache", True)
    fn = CASES["layernorm"][0]
    x = torch.randn(6, 50, device=DEVICE)
    kiln.compile(fn, options=options)(x)
    first = graphs[0].autotuned[0]
    store = EntryStore(tmp_path, "autotune")
    record = store.read(first.key)
    assert record["chosen"] == first.chosen and record["candidates"] == first.candidates
    assert record["timings"] == first.timings
    assert timed == ["kernel0"]
    # a new process state, the whole-graph cache: the graph's wrapper holds the choice
    kiln.reset()
    torch.testing.assert_close(kiln.compile(fn, options=options)(x), fn(x))
    assert kiln.session().graph_cache.hits == 1 and len(graphs) == 1 and timed == ["kernel0"]
    # without the whole-graph cache: compiled again, the launch from the autotune cache
    monkeypatch.setattr(config, "graph_cache", False)
    kiln.reset()
    torch.testing.assert_close(kiln.compile(fn, options={**options, "inductor.graph_cache": False})(x), fn(x))
    again = graphs[1].autotuned[0]
    assert (again.cached, again.ran, again.chosen, again.key) == (True, 0, first.chosen, first.key)
    assert graphs[1].wrapper_code == graphs[0].wrapper_code and timed == ["kernel0"]
    # another graph with the same kernel (another function: the same kernel source and sizes)
    kiln.reset()
    kiln.compile(lambda t: F.layer_norm(t, (50,)) * 3, options={**options, "inductor.graph_cache": False})(x)
    assert graphs[2].autotuned[0].cached and timed == ["kernel0"]
    # other sizes are another key: measured
    kiln.reset()
    kiln.compile(fn, options=options)(torch.randn(7, 50, device=DEVICE))
    assert timed == ["kernel0", "kernel0"] and graphs[3].autotuned[0].key != first.key


def test_a_corrupt_record_is_measured_again(graphs, timed, options, tmp_path):
    fn = CASES["pointwise"][0]
    x = torch.randn(1000, device=DEVICE)
    kiln.compile(fn, options={**options, "inductor.graph_cache": False})(x)
    path = tmp_path / "autotune" / f"{graphs[0].autotuned[0].key}.json"
    path.write_bytes(path.read_bytes()[:-5])
    kiln.reset()
    torch.testing.assert_close(kiln.compile(fn, options={**options, "inductor.graph_cache": False})(x), fn(x))
    assert timed == ["kernel0", "kernel0"] and not graphs[1].autotuned[0].cached


def test_a_second_process_measures_nothing(tmp_path):
    script = textwrap.dedent(f"""
        import os
        os.environ["TRITON_INTERPRET"] = "1"
        import torch, torch.nn.functional as F
        import kiln
        from kiln.inductor.triton import _autotune
        runs = []
        original = _autotune._time_candidates
        def record(*args, **kwargs):
            runs.append(1)
            return original(*args, **kwargs)
        _autotune._time_candidates = record
        options = {{"inductor.max_autotune": True, "inductor.cpu_backend": "triton",
                    "inductor.cache_dir": {str(tmp_path)!r}, "inductor.graph_cache": False}}
        fn = lambda x: torch.softmax(x, -1) * 2
        x = torch.randn(12, 40)
        torch.testing.assert_close(kiln.compile(fn, options=options)(x), fn(x))
        print("RUNS", len(runs))
    """)
    counts = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "KILN_CACHE_DIR": str(tmp_path)})
        assert done.returncode == 0, done.stderr[-3000:]
        counts.append(int(done.stdout.split("RUNS")[-1]))
    assert counts == [1, 0]
    assert len(list((tmp_path / "autotune").glob("*.json"))) == 1


# the sizes' heuristic launch of the 10 x 33 softmax (``_kernel._rows_launch``), as the
# wrapper's comment shows it (with the compile options)
_HEURISTIC = "  # {}\n".format(", ".join(f"{k}={v}" for k, v in {**_rows_launch(sympy.Integer(10), 33, True),
                                                                  **COMPILE_OPTIONS}.items()))


def test_without_max_autotune_the_heuristic_launch(graphs, timed, tmp_path):
    options = {"inductor.cache_dir": str(tmp_path)} if CUDA else {"inductor.cache_dir": str(tmp_path),
                                                                 "inductor.cpu_backend": "triton"}
    fn = CASES["softmax"][0]
    x = torch.randn(10, 33, device=DEVICE)
    torch.testing.assert_close(kiln.compile(fn, options=options)(x), fn(x))
    assert graphs[0].autotuned == [] and timed == [] and not (tmp_path / "autotune").exists()
    assert _HEURISTIC in graphs[0].wrapper_code


def test_max_autotune_is_part_of_the_graph_key():
    assert cache_identity(InductorConfig()) != cache_identity(InductorConfig(max_autotune=True))


# ------------------------------------------------------------------------------ safety
def test_in_place_kernels_never_run_on_the_users_tensors(graphs, timed, options):
    """An in-place update's candidates run on scratch copies: the user's tensors are
    written once, by the call."""
    def step(p, g, m):
        m.mul_(0.9).add_(g, alpha=0.1)
        p.add_(m, alpha=-0.01)

    p, g, m = (torch.randn(3000, device=DEVICE) for _ in range(3))
    ep, em = p.clone(), m.clone()
    step(ep, g, em)
    kiln.compile(step, options=options)(p, g, m)
    torch.testing.assert_close(p, ep)
    torch.testing.assert_close(m, em)
    assert timed and graphs[0].autotuned and all(not r.cached for r in graphs[0].autotuned)


def test_a_kernel_checking_indices_keeps_the_heuristic(graphs, timed, options):
    """Scratch indices could fire its device-side assert: it is not measured."""
    w = torch.randn(10, 4, device=DEVICE)
    i = torch.tensor([1, 9, 0], device=DEVICE)
    fn = lambda w, i: F.embedding(i, w) * 2  # noqa: E731
    torch.testing.assert_close(kiln.compile(fn, options=options)(w, i), fn(w, i))
    assert "debug=True" in graphs[0].triton_code and graphs[0].autotuned == [] and timed == []


def test_random_numbers_do_not_depend_on_the_launch(graphs, options):
    """An element's random numbers are a function of its index: every launch draws the same."""
    def fn(x):
        return F.dropout(x, 0.5) + torch.rand_like(x), torch.softmax(torch.randn_like(x), -1)

    x = torch.randn(100, 33, device=DEVICE)
    results = []
    for tune in (False, True):
        kiln.reset()
        torch.manual_seed(5)
        results.append(kiln.compile(fn, options={**options, "inductor.max_autotune": tune,
                                                 "inductor.random_in_kernels": True})(x))
    assert graphs[1].autotuned and (CUDA or any(r.chosen != r.candidates[0] for r in graphs[1].autotuned))
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b)
        assert torch.equal(a == 0, b == 0)


def test_a_failing_measurement_keeps_the_heuristic(graphs, monkeypatch, options, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("no device")

    monkeypatch.setattr(_autotune, "_time_candidates", broken)
    fn = CASES["softmax"][0]
    x = torch.randn(10, 33, device=DEVICE)
    torch.testing.assert_close(kiln.compile(fn, options=options)(x), fn(x))
    assert graphs[0].autotuned == [] and "autotuning kernel0 failed" in caplog.text
    assert _HEURISTIC in graphs[0].wrapper_code


# ------------------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", ["pointwise", "softmax", "layernorm", "softmax_looped", "rmsnorm_wide"])
def test_gpu_timed_choice_and_numerics(graphs, timed, options, case, dtype):
    fns = {
        "pointwise": (lambda x: F.gelu(x) * 2 - torch.tanh(x), (4096, 1024)),
        "softmax": (lambda x: torch.softmax(x, -1), (4096, 1024)),
        "layernorm": (lambda x: F.layer_norm(x, (1024,)) * 3, (4096, 1024)),
        "softmax_looped": (lambda x: torch.softmax(x, -1), (64, 50000)),
        "rmsnorm_wide": (lambda x: x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype),
                         (256, 32768)),
    }
    fn, shape = fns[case]
    x = torch.randn(shape, device="cuda", dtype=dtype)
    # kiln rounds each bfloat16 op's result as eager does (its kernels compiled without
    # contraction, which would skip a product's rounding): eager's result is the reference
    torch.testing.assert_close(kiln.compile(fn, options=options)(x), fn(x))
    graph = graphs[0]
    _check_tuned(graph)
    for result in graph.autotuned:
        assert all(0 < t < 1000 for t in result.timings if t is not None)  # milliseconds, measured
        assert sum(t is not None for t in result.timings) >= len(result.timings) // 2
    assert timed == [r.kernel for r in graph.autotuned]
    print(case, dtype, [(r.chosen, min(t for t in r.timings if t is not None), r.timings[0], round(r.seconds, 2))
                        for r in graph.autotuned])
