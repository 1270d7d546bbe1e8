"""kiln.compile_context(): while a callable backend runs, the graph's ShapeEnv and fake
example inputs (sizes as SymInts where the graph is symbolic); None anywhere else."""

from __future__ import annotations

import pytest
import torch

import kiln
from kiln.symshapes.bridge import FakeTensor, from_torch


class Recording:
    """A backend that keeps the context it saw and runs the graph's own code."""

    def __init__(self, fail=False):
        self.seen = []
        self.fail = fail

    def __call__(self, gm, example_inputs):
        context = kiln.compile_context()
        self.seen.append((context, list(example_inputs)))
        if self.fail:
            raise ValueError("backend failed")
        return gm.forward


def _f(x, y):
    return (x * 2).sum(0) + y.sum() + y.shape[0]


def test_a_symbolic_graph_gives_its_backend_fake_inputs_with_symint_sizes():
    backend = Recording()
    x, y = torch.randn(4, 3), torch.randn(5)
    out = kiln.compile(_f, backend=backend, dynamic=True)(x, y)
    torch.testing.assert_close(out, _f(x, y))
    (context, examples), = backend.seen
    assert context.code is _f.__code__
    assert len(context.fake_inputs) == len(examples) == 2
    assert all(isinstance(f, FakeTensor) for f in context.fake_inputs)
    assert [tuple(int(s) for s in f.shape) for f in context.fake_inputs] == [(4, 3), (5,)]
    assert context.symbolic and context.symbolic_dims() == [(0, 1), (0,)]
    env = context.shape_env
    sources = {str(env.source_of(from_torch(s).expr)) for f in context.fake_inputs for s in f.shape}
    assert sources == {"L['x'].size(0)", "L['x'].size(1)", "L['y'].size(0)"}
    assert kiln.compile_context() is None


def test_a_static_graph_has_concrete_fake_inputs():
    backend = Recording()
    kiln.compile(_f, backend=backend, dynamic=False)(torch.randn(4, 3), torch.randn(5))
    (context, _), = backend.seen
    assert not context.symbolic and context.symbolic_dims() == [(), ()]
    assert [tuple(f.shape) for f in context.fake_inputs] == [(4, 3), (5,)]


def test_automatic_dynamic_makes_the_second_graph_symbolic():
    backend = Recording()
    compiled = kiln.compile(_f, backend=backend)
    for n in (4, 6, 9):
        x, y = torch.randn(n, 3), torch.randn(5)
        torch.testing.assert_close(compiled(x, y), _f(x, y))
    assert [c.symbolic_dims() for c, _ in backend.seen] == [[(), ()], [(0, 1), ()]]


def test_the_context_is_gone_after_a_backend_fails():
    backend = Recording(fail=True)
    with pytest.raises(kiln.BackendCompilerFailed):
        kiln.compile(_f, backend=backend, dynamic=True)(torch.randn(4, 3), torch.randn(5))
    assert backend.seen[0][0] is not None
    assert kiln.compile_context() is None


# -- the stages' configs, the guard sink, the phase timings ------------------------------------

def test_the_context_carries_the_stage_configs_of_the_compile():
    backend = Recording()
    kiln.compile(_f, backend=backend, options={"aotgrad.partitioner": "save_all"}, fullgraph=True,
                 dynamic=False)(torch.randn(4, 3), torch.randn(5))
    kiln.compile(_g, backend=backend, mode="reduce-overhead")(torch.randn(2))
    (first, _), (second, _) = backend.seen
    assert first.configs.aotgrad.partitioner == "save_all"
    assert first.configs.capture.fullgraph is True and first.configs.capture.dynamic is False
    assert second.configs.inductor.cudagraphs and not second.configs.inductor.max_autotune
    assert second.configs.aotgrad.partitioner == "min_cut" and second.configs.capture.dynamic is None


def _g(x):
    return x + 1


def _tagged(x, tag):
    return x * 2  # reads no tag: only the backend's guard makes it matter


class Specializing:
    """A backend that assumes ``tag`` is "a" and says so with a guard through the context."""

    def __init__(self):
        self.calls = 0

    def __call__(self, gm, example_inputs):
        from kiln.guards import EqualsMatch, LocalSource

        self.calls += 1
        kiln.compile_context().guards.append(EqualsMatch(LocalSource("tag"), "a"))
        return gm.forward


def test_a_guard_a_backend_adds_is_checked_with_the_frames_guards():
    backend = Specializing()
    compiled = kiln.compile(_tagged, backend=backend)
    x = torch.randn(3)
    for tag in ("a", "a"):
        torch.testing.assert_close(compiled(x, tag), x * 2)
    assert backend.calls == 1
    torch.testing.assert_close(compiled(x, "b"), x * 2)  # fails the backend's guard: recompiles
    assert backend.calls == 2
    assert kiln.session().stats.entries == 2


def test_a_guard_added_after_the_checker_is_compiled_is_an_error():
    backend = Recording()
    kiln.compile(_g, backend=backend)(torch.randn(2))
    (context, _), = backend.seen
    from kiln.guards import EqualsMatch, LocalSource

    with pytest.raises(RuntimeError, match="compiled already"):
        context.guards.append(EqualsMatch(LocalSource("x"), 1))
    with pytest.raises(TypeError, match="Guard"):
        kiln.CompileContext(_g.__code__, None, ()).guards.append("x == 1")


def test_each_phase_is_timed_and_logged_with_kiln_logs_perf(caplog):
    import logging

    backend = Recording()
    kiln.set_logs("perf")
    try:
        with caplog.at_level(logging.INFO, logger="kiln.perf"):
            kiln.compile(_g, backend=backend)(torch.randn(2))
    finally:
        kiln.set_logs()
    (context, _), = backend.seen
    assert set(context.timings) == {"capture", "backend", "guards"}
    assert all(seconds > 0 for seconds in context.timings.values())
    (record,) = [r for r in caplog.records if r.name == "kiln.perf"]
    message = record.getMessage()
    assert message.startswith("compile of _g (") and "capture " in message and " ms, backend " in message
    assert "guards " in message
