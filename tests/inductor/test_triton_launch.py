"""A Triton kernel's launch past triton's JITFunction.run (triton/_launch.py).

Everywhere: the key a launch keeps its compiled kernels by is at least as fine as triton's own
specialization of the arguments (checked against triton's specializer); under the interpreter
every launch takes triton's path. On a GPU: launches after the first reuse the compiled kernel
directly, and a new specialization (an input at an unaligned offset, a size that is or is not a
multiple of 16), a new seed, a side stream and triton's launch hooks each give what eager gives."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from triton_support import CUDA, DEVICE, OPTIONS

import kiln
from kiln.inductor.triton._launch import (
    Launch,
    _hooked,
    _int_class,
    _key_function,
    _runtime_knobs,
    launch_state,
)


def _triton_specialization(value, specialize=True):
    """What triton's specializer makes of ``value`` (a tensor or an int) as a kernel argument."""
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import native_specialize_impl

    return native_specialize_impl(BaseBackend, value, False, specialize, True)


_INTS = st.one_of(st.integers(-40, 40), st.integers(-2**40, 2**40), st.integers(2**63 - 40, 2**64 - 1),
                  st.sampled_from([2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**32, 2**63 - 1, 2**63, -2**63]))


@settings(max_examples=300, deadline=None)
@given(a=_INTS, b=_INTS)
def test_equal_int_keys_mean_equal_triton_specializations(a, b):
    if _int_class(a) == _int_class(b):
        assert _triton_specialization(a) == _triton_specialization(b)


@settings(max_examples=100, deadline=None)
@given(a=_INTS, b=_INTS)
def test_equal_seed_keys_mean_equal_triton_specializations(a, b):
    key = _key_function(("seed",))
    if key(0, a) == key(0, b):
        assert _triton_specialization(a, specialize=False) == _triton_specialization(b, specialize=False)


def test_equal_tensor_keys_mean_equal_triton_specializations():
    key = _key_function(("tensor",))
    base = torch.zeros(64, dtype=torch.float16)
    views = [base[k:] for k in range(24)]
    for u, v in itertools.combinations(views, 2):
        if key(0, u) == key(0, v):
            assert _triton_specialization(u) == _triton_specialization(v)
    assert len({key(0, v) for v in views}) == 8  # an fp16 address modulo 16 takes 8 values


def test_a_launch_hook_counts_only_when_it_calls_something():
    from triton import knobs

    hook = knobs.runtime.launch_enter_hook
    assert not _hooked(None) and not _hooked(hook)  # nothing set: triton's empty chain, or None
    assert _hooked(print)
    if hasattr(hook, "calls"):
        hook.add(print)
        try:
            assert _hooked(hook)
        finally:
            hook.remove(print)
        assert not _hooked(hook)


def _launches(graph):
    return {name: obj for name, obj in graph.call.__globals__.items() if isinstance(obj, Launch)}


def _fn(x, y):
    return torch.softmax(x * 2, -1) + y.sum(-1, keepdim=True), torch.relu(y) * x.size(0)


@pytest.mark.skipif(CUDA, reason="launches under triton's interpreter, which the test suite switches on only without a CUDA device")
def test_under_the_interpreter_every_launch_takes_triton_path(graphs):
    x, y = torch.randn(6, 40), torch.randn(6, 40)
    out = kiln.compile(_fn, options=OPTIONS)(x, y)
    torch.testing.assert_close(out, _fn(x, y))
    launches = _launches(graphs[0])
    assert launches and all(launch.kernels == {} and launch._tail is None for launch in launches.values())
    assert "_launch_state(" not in graphs[0].wrapper_code  # CPU tensors: no CUDA launch state


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("dynamic", [False, True])
def test_launches_reuse_the_kernel_of_their_specialization(graphs, dynamic):
    from triton import knobs

    assert _runtime_knobs() is not None  # this triton's launchers are called directly
    assert launch_state(None) is not None, (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
    compiled = kiln.compile(_fn, dynamic=dynamic)
    shapes = [(48, 80), (48, 80), (17, 80), (16, 80), (33, 80)] if dynamic else [(48, 80)] * 3
    for rows, cols in shapes:
        x = torch.randn(rows, cols, device=DEVICE)
        y = torch.randn(rows * cols + 1, device=DEVICE)[1:].view(rows, cols)  # 4 bytes past alignment
        torch.testing.assert_close(compiled(x, y), _fn(x, y))
        y = y.clone()  # aligned: another specialization of the same launch
        torch.testing.assert_close(compiled(x, y), _fn(x, y))
    assert len(graphs) == 1
    launches = _launches(graphs[0])
    assert launches and all(launch._tail is not None for launch in launches.values())
    kept = {name: len(launch.kernels) for name, launch in launches.items()}
    assert max(kept.values()) == 2 or dynamic  # aligned and unaligned y
    assert all(n >= 1 for n in kept.values())
    torch.testing.assert_close(compiled(x, y), _fn(x, y))
    assert {name: len(launch.kernels) for name, launch in launches.items()} == kept  # nothing new


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_a_random_kernel_keeps_one_kernel_for_every_seed(graphs):
    def fn(x):
        return F.dropout(x, 0.5) * 3

    compiled = kiln.compile(fn, options={"inductor.random_in_kernels": True})
    x = torch.ones(64, 64, device=DEVICE)
    results = [compiled(x) for _ in range(4)]
    for out in results:
        assert set(out.unique().tolist()) <= {0.0, 6.0}
    assert len({tuple(out.flatten().tolist()) for out in results}) == 4  # a new seed per call
    (launch,) = _launches(graphs[0]).values()
    assert len(launch.kernels) == 1


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_a_side_stream_launches_on_that_stream(graphs):
    compiled = kiln.compile(_fn)
    x, y = torch.randn(64, 256, device=DEVICE), torch.randn(64, 256, device=DEVICE)
    torch.testing.assert_close(compiled(x, y), _fn(x, y))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        assert launch_state(None)[1] == stream.cuda_stream
        torch.cuda._sleep(50_000_000)  # the stream is busy: a launch on another stream would run first
        out = compiled(x, y)
    torch.cuda.current_stream().wait_stream(stream)
    torch.testing.assert_close(out, _fn(x, y))


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_triton_launch_hooks_see_every_launch(graphs, monkeypatch):
    from triton import knobs

    compiled = kiln.compile(_fn)
    x, y = torch.randn(8, 32, device=DEVICE), torch.randn(8, 32, device=DEVICE)
    compiled(x, y)
    seen = []
    hook = knobs.runtime.launch_enter_hook
    if hasattr(hook, "calls"):  # a HookChain (triton 3.5 on)
        monkeypatch.setattr(hook, "calls", [seen.append])
    else:
        monkeypatch.setattr(knobs.runtime, "launch_enter_hook", seen.append)
    assert launch_state(None) is None
    torch.testing.assert_close(compiled(x, y), _fn(x, y))
    assert len(seen) == len(_launches(graphs[0])) >= 1


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA or torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_tensors_on_a_device_that_is_not_the_current_one(graphs):
    """Tensors on cuda:1 while cuda:0 is current (a model moved with ``.to("cuda:1")``): the
    kernels run on cuda:1 (triton alone launches on the current device), first call and
    later ones, and the current device is left as it was."""
    compiled = kiln.compile(_fn)
    x, y = torch.randn(64, 256, device="cuda:1"), torch.randn(64, 256, device="cuda:1")
    assert torch.cuda.current_device() == 0
    assert launch_state(1) == 1
    for _ in range(3):
        out = compiled(x, y)
        assert out[0].device == x.device and torch.cuda.current_device() == 0
        torch.testing.assert_close(out, _fn(x, y))
    with torch.cuda.device(1):
        torch.testing.assert_close(compiled(x, y), _fn(x, y))
    assert len(graphs) == 1
