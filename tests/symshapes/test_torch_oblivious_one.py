"""Fake tensors over a ShapeEnv with oblivious_one: which of torch's questions about a size
that may be 1 are answered size-obliviously, and the re-run by example values when such an
answer breaks a kernel's check."""

from __future__ import annotations

import _thread
import functools
import itertools
import sys
import threading

import pytest
import sympy
import torch

from kiln.symshapes import ShapeEnv, ShapeEnvConfig
from kiln.symshapes.bridge import FakeTensorMode, from_torch


def _mode():
    env = ShapeEnv(ShapeEnvConfig(duck_shape=False, oblivious_one=True))
    return env, FakeTensorMode(env)


def _guards(env):
    return [str(g.expr) for g in env.guards]


def test_broadcasting_a_symbolic_size_against_the_initial_1_needs_no_guard():
    env, mode = _mode()
    x = mode.from_real(torch.randn(1, 4), dynamic_dims=(0,))
    bias = mode.from_real(torch.randn(4))
    with mode:
        y = x + bias
    assert from_torch(y.shape[0]).expr == from_torch(x.shape[0]).expr
    assert _guards(env) == []


def test_broadcasting_a_real_1_against_a_3_reruns_the_kernel_by_example_values():
    env, mode = _mode()
    x = mode.from_real(torch.randn(1, 4), dynamic_dims=(0,))
    y = mode.from_real(torch.randn(3, 4), dynamic_dims=(0,))
    with mode:
        z = x + y
    s0, s1 = (from_torch(t.shape[0]).expr for t in (x, y))
    assert from_torch(z.shape[0]).expr == s1
    assert "Eq(s0, 1)" in _guards(env)  # this graph is for a broadcast 1
    assert env.size_hint(s0) == 1 and env.simplify(s0) == 1


def test_squeeze_is_decided_by_the_example_value():
    env, mode = _mode()
    x = mode.from_real(torch.randn(1, 4), dynamic_dims=(0,))
    with mode:
        y = x.squeeze(0)
    assert y.dim() == 1
    assert "Eq(s0, 1)" in _guards(env)
    env, mode = _mode()
    x = mode.from_real(torch.randn(3, 4), dynamic_dims=(0,))
    with mode:
        y = x.squeeze(0)
    assert y.dim() == 2 and "Ne(s0, 1)" in _guards(env)


def test_a_user_reshape_is_decided_by_the_example_values():
    """reshape of (5, n).t() to one dim is a view only for n == 1: not answered obliviously
    (a copy where torch makes a view would hide an aliasing)."""
    env, mode = _mode()
    x = mode.from_real(torch.randn(5, 1), dynamic_dims=(1,))
    with mode:
        y = x.t().reshape(-1)
    assert y._base is not None or y.fake_storage is x.fake_storage
    assert any("s0" in g and "1" in g for g in _guards(env))


def test_a_merged_dims_stride_does_not_guard_a_batch_that_may_be_1():
    env, mode = _mode()
    x = mode.from_real(torch.randn(1, 4, 6, 8), dynamic_dims=(0, 2))
    with mode:
        y = x.view(x.shape[0] * 4, x.shape[2], 8)
    b = from_torch(x.shape[0]).expr
    assert all(sympy.sympify(g).free_symbols != {b} for g in _guards(env)), _guards(env)
    assert y.shape[1] == x.shape[2]


@pytest.mark.parametrize("n", [1, 3])
def test_matmul_of_a_batch_that_may_be_1_guards_nothing_about_it(n):
    env, mode = _mode()
    q = mode.from_real(torch.randn(n, 4, 6, 8), dynamic_dims=(0, 2))
    k = mode.from_real(torch.randn(n, 4, 8, 6), dynamic_dims=(0, 3))
    with mode:
        att = q @ k
    b = from_torch(q.shape[0]).expr
    assert not [g for g in _guards(env) if sympy.sympify(g).free_symbols == {b}], _guards(env)
    assert att.dim() == 4



def _call_from_a_bare_thread(fn, args, monkeypatch):
    """fn(*args) called straight from C on a new thread, no Python frame beneath it (as on the
    autograd engine's device threads, where the backward of CUDA tensors runs while aotgrad
    traces): the thread's target and the call are C (partial, list.extend, starmap)."""
    results, errors, done = [], [], threading.Event()
    monkeypatch.setattr(sys, "unraisablehook", lambda u: errors.append(u.exc_value))

    def finish():
        done.set()

    target = functools.partial(results.extend, itertools.chain(itertools.starmap(fn, [args]),
                                                               itertools.starmap(finish, [()])))
    _thread.start_new_thread(target, ())
    done.wait(10)
    return results, errors


def test_decisions_asked_from_a_thread_with_no_python_frames_beneath(monkeypatch):
    _, mode = _mode()
    x = mode.from_real(torch.randn(1, 4), dynamic_dims=(0,))
    node = (x.shape[0] == 1).node
    calls = {"guard_or_false": (node.guard_or_false, ("", 0)), "guard_or_true": (node.guard_or_true, ("", 0)),
             "bool": (node.bool_, ()), "evaluate_sym_node": (node.shape_env.evaluate_sym_node, (node, False, False))}
    for name, (fn, args) in calls.items():
        results, errors = _call_from_a_bare_thread(fn, args, monkeypatch)
        assert errors == [], f"{name}: {errors!r}"
        assert len(results) == 2 and isinstance(results[0], bool), name
