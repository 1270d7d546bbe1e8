"""The torch-internal helpers: what they build and when they decline."""

import torch

from kiln.guards import _torch_internals as native


def spec(t):
    return (type(t), native.dispatch_keys(t), t.dtype, t.device, t.layout, t.requires_grad,
            tuple(t.shape), tuple(t.stride()))


def test_dispatch_keys_include_thread_local_state():
    t = torch.randn(2)
    plain = native.dispatch_keys(t)
    with torch.autocast("cpu"):
        assert native.dispatch_keys(t) != plain
    assert "CPU" in native.dispatch_key_text(plain)


def test_native_checker_matches_what_it_was_built_for():
    a, b = torch.randn(2, 3), torch.nn.Parameter(torch.randn(4))
    checker = native.native_tensor_checker([spec(a), spec(b)])
    assert checker is not None
    assert checker.check(torch.randn(2, 3), torch.nn.Parameter(torch.randn(4)))
    assert not checker.check(torch.randn(2, 3), torch.randn(4))
    assert not checker.check(torch.randn(3, 3), torch.nn.Parameter(torch.randn(4)))


def test_native_checker_declines_what_a_stand_in_cannot_reproduce():
    class Sub(torch.Tensor):
        pass

    assert native.native_tensor_checker([spec(torch.randn(2).as_subclass(Sub))]) is None
    assert native.native_tensor_checker([spec(torch.randn(2).to_sparse())]) is None
    conj = torch.randn(2, dtype=torch.complex64).conj()
    assert native.native_tensor_checker([spec(conj)]) is None


def test_mode_stack_readers_and_global_snapshot():
    readers = native.mode_stack_length_readers()
    assert readers["function_modes"]() == 0 and readers["dispatch_modes"]() == 0
    snap = native.native_global_state()
    assert snap is not None and snap.check()
    with torch.no_grad():
        assert not snap.check()
    assert native.function_mode_types() == () and native.dispatch_mode_types() == ()
