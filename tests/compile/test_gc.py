"""Full garbage collections deferred while kiln compiles a frame (kiln/_gc.py).

Seen from a backend callable (inside the compile): the oldest generation's threshold is out of
reach and the young ones are as they were; after the compile, whether it succeeded or the
backend raised, the thresholds are those found; thresholds someone set during the compile, and
a collector switched off, are left as they are."""

from __future__ import annotations

import gc

import pytest
import torch

import kiln
from kiln._gc import deferred_full_collections


@pytest.fixture(autouse=True)
def _thresholds():
    found = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*found)


def _seen_by(backend_fn):
    seen = []

    def backend(gm, example_inputs):
        seen.append(gc.get_threshold())
        backend_fn()
        return gm.forward

    return seen, backend


def test_a_compile_defers_full_collections_and_restores_the_thresholds():
    seen, backend = _seen_by(lambda: None)
    f = kiln.compile(lambda x: torch.sin(x) + 1, backend=backend)
    x = torch.randn(8)
    torch.testing.assert_close(f(x), torch.sin(x) + 1)
    assert seen == [(700, 10, 2**31 - 1)]
    assert gc.get_threshold() == (700, 10, 10)


def test_the_thresholds_are_restored_when_the_backend_raises():
    def fail():
        raise RuntimeError("the backend's own error")

    seen, backend = _seen_by(fail)
    f = kiln.compile(lambda x: torch.cos(x) * 2, backend=backend)
    with pytest.raises(Exception, match="the backend's own error"):
        f(torch.randn(8))
    assert seen == [(700, 10, 2**31 - 1)]
    assert gc.get_threshold() == (700, 10, 10)


def test_thresholds_set_during_the_compile_are_kept():
    seen, backend = _seen_by(lambda: gc.set_threshold(500, 20, 30))
    kiln.compile(lambda x: x * 3 - 1, backend=backend)(torch.randn(8))
    assert seen == [(700, 10, 2**31 - 1)]
    assert gc.get_threshold() == (500, 20, 30)


def test_a_collector_switched_off_stays_off():
    gc.set_threshold(0, 10, 10)
    seen, backend = _seen_by(lambda: None)
    kiln.compile(lambda x: x.exp(), backend=backend)(torch.randn(8))
    assert seen == [(0, 10, 10)]
    assert gc.get_threshold() == (0, 10, 10)


def test_nested_deferrals_restore_once_at_the_outermost_end():
    with deferred_full_collections():
        with deferred_full_collections():
            assert gc.get_threshold() == (700, 10, 2**31 - 1)
        assert gc.get_threshold() == (700, 10, 2**31 - 1)
    assert gc.get_threshold() == (700, 10, 10)
