"""Outputs of CUDA graph replays lent as the recording's memory (``_cudagraph_lend``), on CPU
tensors with ``EagerRecorder`` (its replay writes the recorded outputs' memory again, as a
CUDA graph's does); the GPU cases run in test_cudagraphs.py's pipeline tests.

Outputs of every size are lent (``LENDS``, on every torch kiln supports); each test checks that
whatever a caller still holds of an earlier call (the tensor, a view, the storage object, a
saved activation) keeps its values and version, while outputs nobody holds are lent again
without a copy."""

from __future__ import annotations

import copy
import gc
import logging

import pytest
import torch
from test_cudagraphs import EagerRecorder, _boxed, _messages, _mlp
from test_cudagraphs import recorded_on_cpu as recorded_on_cpu  # the fixture, shared

import kiln
from kiln.inductor import _cudagraph_lend
from kiln.inductor._cudagraphs import CudagraphGroup, CudaGraphRunner


def _runner(fn, group=None):
    return CudaGraphRunner(_boxed(fn), (), 8, EagerRecorder(), group=group or CudagraphGroup())


def _source(runner, group=0):
    return next(iter(runner.recordings.values())).sources[group]


def test_an_output_nobody_holds_is_lent_again_without_a_copy():
    runner = _runner(lambda x: (x.sin() * 2,))
    addresses = set()
    for _ in range(4):
        x = torch.randn(6)
        out = runner([x])[0]
        torch.testing.assert_close(out, x.sin() * 2)
        addresses.add(out.data_ptr())
        del out
    assert addresses == {_source(runner).data_ptr()}
    assert runner.stats.replays == 4 and next(iter(runner.recordings.values())).lend == [True]


@pytest.mark.parametrize("hold", ["tensor", "view", "storage"])
def test_an_output_still_held_keeps_its_values_and_is_copied_from_then_on(hold, caplog):
    runner = _runner(lambda x: (x.cos() + 1,))
    x1 = torch.randn(8)
    out = runner([x1])[0]
    version = out._version
    if hold == "tensor":
        held = out
    elif hold == "view":
        held = out[2:].view(2, 3)
    else:
        held = out.untyped_storage()
    del out
    with caplog.at_level(logging.WARNING, logger="kiln.perf_hints"):
        x2 = torch.randn(8)
        torch.testing.assert_close(runner([x2])[0], x2.cos() + 1)
        x3 = torch.randn(8)
        out3 = runner([x3])[0]
    torch.testing.assert_close(out3, x3.cos() + 1)
    assert out3.data_ptr() != _source(runner).data_ptr()  # copied now
    expected = x1.cos() + 1
    if hold == "tensor":
        torch.testing.assert_close(held, expected)
        assert held._version == version
    elif hold == "view":
        torch.testing.assert_close(held, expected[2:].view(2, 3))
    else:
        values = torch.empty(0).set_(held, 0, (8,), (1,))
        torch.testing.assert_close(values, expected)
    assert len(_messages(caplog, "still in use at the next call")) == 1
    assert runner.stats.replays == 3 and runner.stats.plain_calls == 0


def test_small_outputs_are_lent():
    assert _cudagraph_lend.LENDS
    runner = _runner(lambda x: (x.sum() * 2,))  # a 0-d output (a loss)
    for _ in range(2):
        x = torch.randn(5)
        out = runner([x])[0]
        torch.testing.assert_close(out, x.sum() * 2)
        assert out.data_ptr() == _source(runner).data_ptr()
        del out
    assert next(iter(runner.recordings.values())).lend == [True]


def _qkv(x):
    # views of one intermediate's storage (a copy group), the first 24 bytes in (not aligned to
    # the group's 16), none at its start
    y = (x * 2 + 1).view(3, 5)
    return y[1, 1:], y[2], y[2, ::2]


def _expected_qkv(x):
    y = (x * 2 + 1).view(3, 5)
    return y[1, 1:], y[2], y[2, ::2]


def test_views_of_one_storage_are_lent_at_their_offsets():
    runner = _runner(_qkv)
    for _ in range(3):
        x = torch.randn(15)
        outs = runner([x])
        torch.testing.assert_close(outs, _expected_qkv(x))
        source = _source(runner)
        assert all(o.untyped_storage().data_ptr() == source.untyped_storage().data_ptr() for o in outs)
        del outs
    assert runner.stats.replays == 3 and next(iter(runner.recordings.values())).lend == [True]


def test_a_held_view_of_a_lent_group_keeps_its_values_and_the_group_is_copied_from_then_on():
    runner = _runner(_qkv)
    x1 = torch.randn(15)
    _, k, _ = runner([x1])
    version = k._version
    for _ in range(2):
        x = torch.randn(15)
        outs = runner([x])
        torch.testing.assert_close(outs, _expected_qkv(x))
    torch.testing.assert_close(k, _expected_qkv(x1)[1])
    assert k._version == version
    assert next(iter(runner.recordings.values())).lend == [False]
    assert all(o.untyped_storage().data_ptr() != _source(runner).untyped_storage().data_ptr() for o in outs)


def test_a_held_output_is_kept_through_the_replays_of_other_shapes():
    runner = _runner(lambda x: (x * 3,))
    x = torch.randn(5)
    kept = runner([x])[0]
    for n in (7, 5, 9):
        y = torch.randn(n)
        torch.testing.assert_close(runner([y])[0], y * 3)
    torch.testing.assert_close(kept, x * 3)


def test_a_runner_never_reads_its_own_lent_memory_in_place():
    runner = _runner(lambda h: (torch.tanh(h) * 2 + 1,))
    h = torch.randn(16)
    reference = h.clone()
    for _ in range(5):
        h = runner([h])[0]
        reference = torch.tanh(reference) * 2 + 1
        torch.testing.assert_close(h, reference)
    assert not any(s.borrowed for r in runner.recordings.values() for s in r.inputs)


def test_another_runner_of_the_group_reads_lent_memory_by_address_and_keeps_no_reference():
    group = CudagraphGroup()
    first, second = _runner(lambda x: (x.exp(),), group), _runner(lambda a: (a * a + 1,), group)
    for _ in range(3):
        x = torch.randn(6)
        a = first([x])[0]
        torch.testing.assert_close(second([a])[0], x.exp() ** 2 + 1)
        del a
    (recording,) = second.recordings.values()
    assert recording.inputs[0].borrowed and recording.inputs[0].address == _source(first).data_ptr()
    assert recording.inputs[0].static.numel() == 0 and recording.statics[0] is None
    assert first.stats.replays == 3 and second.stats.recordings == 1
    assert next(iter(first.recordings.values())).lend == [True]  # never held: still lent
    moved = torch.randn(6)  # an input elsewhere: recorded again, with a buffer there
    torch.testing.assert_close(second([moved])[0], moved * moved + 1)
    assert second.stats.recordings == 2 and not next(iter(second.recordings.values())).inputs[0].borrowed


def test_only_memory_a_live_runner_of_the_group_lends_is_borrowed():
    group = CudagraphGroup()
    first, second = _runner(lambda x: (x.exp(),), group), _runner(lambda a: (a * a + 1,), group)
    outsider = _runner(lambda a: (a * a + 1,))  # another graph's runner
    a = first([torch.randn(6)])[0]
    assert group.borrowable(a, second) and not group.borrowable(a, first)
    assert not outsider.group.borrowable(a, outsider)
    assert not group.borrowable(a.clone(), second)
    del first  # the lender is gone: its memory is the caller's now, read through a buffer
    gc.collect()  # (the test recorder's replay refers back to its runner)
    assert not group.borrowable(a, second)
    torch.testing.assert_close(second([a])[0], a * a + 1)
    assert not next(iter(second.recordings.values())).inputs[0].borrowed


@pytest.mark.parametrize("hold_loss", [False, True])
def test_a_training_loop_lends_activations_to_the_backward(request, hold_loss):
    runners = request.getfixturevalue("recorded_on_cpu")
    model = _mlp()
    reference = copy.deepcopy(model)
    compiled = kiln.compile(model, mode="reduce-overhead")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    losses = []
    for _ in range(3):  # (a fourth step drifts by float rounding, lent or copied alike)
        x = torch.randn(5, 8)
        for m, opt in ((compiled, optimizer), (reference, reference_optimizer)):
            opt.zero_grad()
            loss = torch.log_softmax(m(x), -1).sum()
            loss.backward()
            opt.step()
            losses.append(loss)
        if not hold_loss:
            losses.clear()
    for p, r in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, r)
    if hold_loss:
        torch.testing.assert_close(torch.stack(losses[0::2]), torch.stack(losses[1::2]))
    forward, backward = runners()
    assert [(r.stats.recordings, r.stats.replays, r.stats.plain_calls) for r in (forward, backward)] == [(1, 3, 0)] * 2
    (fw,) = forward.recordings.values()
    (bw,) = backward.recordings.values()
    assert bw.by_address  # the saved activations, read where the forward's replay wrote them
    assert all(bw.inputs[[s.slot for s in bw.inputs].index(k)].borrowed for k in bw.by_address)
    assert sum(fw.lend) >= len(bw.by_address)  # nobody held them: still lent after 3 steps


class _ReplayThenRaise(EagerRecorder):
    """A recorder whose replays write the outputs' memory and then, once ``broken``, raise
    (a replay that fails part way)."""

    broken = False

    def record(self, warm, run, device, inputs):
        replay, result, keep = super().record(warm, run, device, inputs)

        def failing():
            replay()
            if self.broken:
                raise RuntimeError("replay failed")

        return failing, result, keep


def test_a_held_output_keeps_its_values_when_a_replay_fails():
    recorder = _ReplayThenRaise()
    runner = CudaGraphRunner(_boxed(lambda x: (x * 5,)), (), 8, recorder)
    x1 = torch.randn(6)
    held = runner([x1])[0]
    recorder.broken = True
    with pytest.raises(RuntimeError, match="replay failed"):
        runner([torch.randn(6)])
    torch.testing.assert_close(held, x1 * 5)
