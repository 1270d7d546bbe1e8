"""Random ops under CUDA graphs (``inductor.cudagraphs``): graphs that draw random numbers are
recorded, and every replay draws new ones.

- kiln's own random kernels (``inductor.random_in_kernels``) read the call's seed from device
  memory (``_lower_random.SeedCell``, ``_ir.SEED_PTR``), which the runner writes before each
  call, replay or plain; the recorded launches keep the pointer, not a seed;
- ATen random calls draw from the default CUDA generator, which a capture registers (torch's
  graph-safe generator state): checked on a GPU only.

Without a GPU the runner records with ``EagerRecorder`` (``test_cudagraphs``), the kernels run
in triton's interpreter."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_cudagraphs import EagerRecorder
from test_random import _words

import kiln
from kiln.inductor import InductorConfig, _compile, _graph_cache, _lower_random, cache_identity
from kiln.inductor._cudagraphs import CudagraphGroup, CudaGraphRunner
from kiln.inductor._lower_random import SeedCell

CUDA = torch.cuda.is_available()
gpu = [pytest.mark.gpu, pytest.mark.skipif(not CUDA, reason="needs a CUDA device")]
DEVICE = "cuda" if CUDA else "cpu"
BACKEND = {} if CUDA else {"inductor.cpu_backend": "triton"}
RECORDED = {"inductor.cudagraphs": True, "inductor.random_in_kernels": True, **BACKEND}
PLAIN = {"inductor.random_in_kernels": True, **BACKEND}


@pytest.fixture
def runners(monkeypatch, graphs):
    """Runners recording with ``EagerRecorder`` on CPU tensors (the compile's and the
    whole-graph cache's), in the order made."""
    made = []

    def wrap(compiled, config, group=None):
        if config.cudagraphs:
            compiled.call = CudaGraphRunner(compiled.call, compiled.cudagraph_facts.mutated,
                                            config.cudagraph_max_shapes, EagerRecorder(),
                                            group=group or CudagraphGroup(), seed=compiled.seed)
            made.append(compiled.call)
        return compiled

    monkeypatch.setattr(_compile, "with_cudagraphs", wrap)
    monkeypatch.setattr(_graph_cache, "with_cudagraphs", wrap)
    return made


@pytest.fixture
def draws(monkeypatch):
    """The seeds drawn for compiled graphs (``_lower_random.draw_seed``), in order."""
    drawn = []
    original = _lower_random.draw_seed

    def draw():
        drawn.append(original())
        return drawn[-1]

    monkeypatch.setattr(_lower_random, "draw_seed", draw)
    return drawn


def _dropout(x):
    return F.dropout(x, 0.5, training=True) * 3


def test_random_kernels_read_the_seed_from_memory_and_compute_the_same_numbers(graphs):
    """Under CUDA graphs a random kernel loads its seed from ``kiln_seed_ptr``; for one state of
    torch's generator it computes what the kernel taking the seed as an argument computes. On
    CPU tensors no runner manages the cell: the wrapper draws one seed per call. On a GPU the
    first call is recorded: the runner draws a seed for the warm-up, then one for the replay
    whose result the call returns (the plain kernel gets that second seed here)."""
    x = torch.ones(4, 300, device=DEVICE)
    for seed in (0, 1):
        kiln.reset()  # each time a first call (on a GPU: a recording)
        plain = kiln.compile(_dropout, options=PLAIN)
        in_memory = kiln.compile(lambda t: _dropout(t), options=RECORDED)
        torch.manual_seed(seed)
        got = in_memory(x)
        after = torch.randint(0, 2**62, ())
        torch.manual_seed(seed)
        if CUDA:
            _lower_random.draw_seed()  # the warm-up's
        expected = plain(x)
        assert torch.equal(got, expected)
        assert torch.equal(torch.randint(0, 2**62, ()), after)  # as many draws both ways
    in_memory_graphs = [g for g in graphs if g.seed is not None]
    assert len(in_memory_graphs) == 2 and all(isinstance(g.seed, SeedCell) for g in in_memory_graphs)
    assert all("tl.load(kiln_seed_ptr)" in g.triton_code for g in in_memory_graphs)
    assert all("kiln_seed_ptr" not in g.triton_code for g in graphs if g.seed is None)


def test_random_graphs_are_recorded_and_each_replay_draws_a_seed(runners, draws):
    compiled = kiln.compile(_dropout, options=RECORDED)
    x = torch.ones(8, 256, device=DEVICE)
    outs = [compiled(x) for _ in range(4)]
    (runner,) = runners
    assert (runner.stats.recordings, runner.stats.replays, runner.stats.plain_calls) == (1, 4, 0)
    assert runner.seed is not None and runner.seed.managed
    # the recording: one seed for its warm-up, then one per replay (the wrapper draws none)
    assert len(draws) == 1 + 4
    for k, y in enumerate(outs):
        assert set(y.unique().tolist()) <= {0.0, 6.0}
        assert 0.4 < (y == 0).float().mean().item() < 0.6
        assert all(not torch.equal(y, other) for other in outs[k + 1:])  # no mask replayed


def test_a_replay_reads_the_seed_the_runner_drew_for_it(runners, draws):
    """Element i of each replay's ``rand_like`` is Philox(seed, 0, i) of the seed drawn before
    that replay (``test_random``'s reference): the recorded launch reads the cell."""
    compiled = kiln.compile(lambda t: torch.rand_like(t) * 1, options=RECORDED)
    x = torch.ones(2, 40, device=DEVICE)
    recorded = [compiled(x).flatten().tolist() for _ in range(3)]
    assert len(draws) == 1 + 3
    for seed, values in zip(draws[1:], recorded, strict=True):  # after the warm-up's
        assert values == [(_words(seed, 0, i)[0] >> 8) / 2**24 for i in range(80)]


def _dropout_steps(rows: int, d_in: int, d_out: int, device: str, options: dict) -> list[torch.Tensor]:
    """Three training steps of ``dropout(x @ w, 0.25)`` compiled with ``options``, each
    checked against its own mask (read off the output): the output, and ``w``'s gradient;
    the masks."""
    torch.manual_seed(0)
    w = torch.randn(d_in, d_out, device=device, requires_grad=True)
    compiled = kiln.compile(lambda x: F.dropout(x @ w, 0.25, training=True), options=options)
    masks = []
    for _ in range(3):
        x = torch.randn(rows, d_in, device=device)
        y = compiled(x)
        y.sum().backward()
        mask = (y != 0).float()
        torch.testing.assert_close(y, (x @ w).detach() * mask / 0.75)
        torch.testing.assert_close(w.grad, x.t() @ mask / 0.75)
        w.grad = None
        masks.append(mask)
        del y  # (an output held at the next call is copied out of the recording from then on)
    return masks


def test_a_training_step_with_dropout_is_recorded_and_its_gradients_follow_its_mask(runners):
    masks = _dropout_steps(6, 16, 32, DEVICE, RECORDED)
    # (the backward's recordings are left uncounted here: triton's interpreter holds the last
    # kernel's arguments until its next launch, so the forward's output looks still in use)
    assert [(r.stats.replays, r.stats.plain_calls) for r in runners] == [(3, 0), (3, 0)]
    assert runners[0].stats.recordings == 1
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])


def test_a_cached_random_graph_gets_a_seed_cell_of_its_own(runners, graphs, tmp_path):
    from kiln.aotgrad import aot_compile
    from kiln.inductor import aten_compiler, decompositions

    config = InductorConfig(cache_dir=str(tmp_path), cudagraphs=True, random_in_kernels=True,
                            cpu_backend="cpp" if CUDA else "triton")

    def backend(gm, example_inputs):
        compiler = aten_compiler(config)
        return aot_compile(gm, example_inputs, kiln.compile_context(), fw_compiler=compiler,
                           bw_compiler=compiler, decompositions=decompositions())

    x = torch.ones(4, 128, device=DEVICE)
    pairs = []
    for _ in range(2):
        kiln.reset()
        compiled = kiln.compile(_dropout, backend=backend)
        pairs.append((compiled(x), compiled(x)))
    assert [g.from_cache for g in graphs] == [False, True]
    assert isinstance(graphs[1].seed, SeedCell) and graphs[1].seed is not graphs[0].seed
    assert graphs[1].seed.managed and runners[1].stats.replays == 2
    y1, y2 = pairs[1]
    assert not torch.equal(y1, y2) and set(y1.unique().tolist()) <= {0.0, 6.0}


def test_only_random_kernels_under_cuda_graphs_change_the_cache_key():
    assert cache_identity(InductorConfig()) == cache_identity(InductorConfig(cudagraphs=True))
    assert cache_identity(InductorConfig(random_in_kernels=True)) \
        != cache_identity(InductorConfig(random_in_kernels=True, cudagraphs=True))


# ------------------------------------------------------------------------------- on a GPU
@pytest.mark.parametrize("in_kernels,autotune", [(False, False), (True, False), (True, True)],
                         ids=["aten", "kernels", "kernels-autotuned"])
@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_random_graphs_are_recorded_on_cuda(graphs, in_kernels, autotune, tmp_path):
    """Dropout (an ATen call, or computed in kiln's kernel, its launch measured or not)
    recorded into a CUDA graph: each replay draws a new mask."""
    options = {"inductor.cudagraphs": True, "inductor.random_in_kernels": in_kernels,
               "inductor.max_autotune": autotune, "inductor.cache_dir": str(tmp_path)}
    compiled = kiln.compile(lambda t: F.dropout(t, 0.5, training=True) + 0, options=options)
    x = torch.ones(4096, device="cuda")
    outs = [compiled(x).clone() for _ in range(4)]
    runner = graphs[0].call
    assert isinstance(runner, CudaGraphRunner)
    assert (runner.stats.recordings, runner.stats.replays, runner.stats.plain_calls) == (1, 4, 0)
    for k, y in enumerate(outs):
        assert set(y.unique().tolist()) <= {0.0, 2.0}
        assert 0.45 < (y == 0).float().mean().item() < 0.55
        assert all(not torch.equal(y, other) for other in outs[k + 1:])


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_a_training_step_with_dropout_is_recorded_on_cuda(graphs):
    masks = _dropout_steps(32, 64, 128, "cuda", {"inductor.cudagraphs": True, "inductor.random_in_kernels": True})
    assert all(isinstance(g.call, CudaGraphRunner) and g.call.stats.replays == 3 for g in graphs)
    assert not torch.equal(masks[0], masks[1])
