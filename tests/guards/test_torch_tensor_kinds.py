"""TensorMatch on real tensors: holds as traced, fails on each change with the expected text;
the native batched check, the pure-Python check and the explanation agree."""

import pytest
import torch

from kiln.guards import (
    EqualsMatch,
    GuardSet,
    LocalSource,
    NoAliasing,
    TensorMatch,
    TensorSizeSource,
    TensorStorageOffsetSource,
    TensorStrideSource,
    evaluate,
)

X = LocalSource("x")


class MyTensor(torch.Tensor):
    pass


def checkers(*guards):
    gs = GuardSet(guards)
    return gs.compile(), gs.compile(native=False)


def assert_all_agree(guards, frame, expected):
    native_check, python_check = checkers(*guards)
    assert native_check(frame) is expected
    assert python_check(frame) is expected
    assert (GuardSet(guards).explain(frame) is None) is expected


def test_native_path_is_used_for_plain_tensors():
    native_check, python_check = checkers(TensorMatch.from_tensor(X, torch.randn(2, 3)))
    assert ".check(v0)" in native_check.source
    assert ".check(" not in python_check.source
    assert "x.dtype" not in native_check.source


@pytest.mark.parametrize(
    ("changed", "text"),
    [
        (torch.randn(16, 4), "tensor L['x'] size(0): expected 8, got 16"),
        (torch.randn(8, 5), "tensor L['x'] size(1): expected 4, got 5"),
        (torch.randn(8, 4, 1), "tensor L['x'] ndim: expected 2, got 3"),
        (torch.randn(8, 4, dtype=torch.float64), "tensor L['x'] dtype: expected torch.float32, got torch.float64"),
        (torch.randn(4, 8).t(), "tensor L['x'] stride(0): expected 4, got 1"),
        (torch.randn(8, 4, requires_grad=True), "tensor L['x'] requires_grad: expected False, got True"),
        (torch.empty(8, 4, device="meta"), "tensor L['x'] device: expected cpu, got meta"),
        (torch.nn.Parameter(torch.randn(8, 4), requires_grad=False),
         "tensor L['x'] type: expected torch.Tensor, got torch.nn.parameter.Parameter"),
        (torch.randn(8, 4).as_subclass(MyTensor),
         f"tensor L['x'] type: expected torch.Tensor, got {MyTensor.__module__}.MyTensor"),
        (torch.randn(8, 4).to_sparse(), "tensor L['x'] layout: expected torch.strided, got torch.sparse_coo"),
        ([[0.0] * 4] * 8, "tensor L['x'] type: expected torch.Tensor, got list"),
        (None, "tensor L['x'] type: expected torch.Tensor, got NoneType"),
    ],
)
def test_each_change_fails_and_is_explained(changed, text):
    guard = TensorMatch.from_tensor(X, torch.randn(8, 4))
    assert_all_agree([guard], {"x": torch.randn(8, 4)}, True)
    assert_all_agree([guard], {"x": changed}, False)
    assert evaluate(guard, {"x": changed}) == text


def test_dispatch_keys_are_guarded():
    z = torch.randn(3, dtype=torch.complex64)
    guard = TensorMatch.from_tensor(X, z)
    conj = z.conj()  # same metadata, plus the Conjugate dispatch key
    assert_all_agree([guard], {"x": torch.randn(3, dtype=torch.complex64)}, True)
    assert_all_agree([guard], {"x": conj}, False)
    assert evaluate(guard, {"x": conj}).startswith("tensor L['x'] dispatch keys: expected DispatchKeySet(")


def test_conjugate_tensor_falls_back_to_python_and_still_matches():
    conj = torch.randn(3, dtype=torch.complex64).conj()
    guard = TensorMatch.from_tensor(X, conj)
    native_check, _ = checkers(guard)
    assert ".check(" not in native_check.source  # the stand-in cannot carry the conj bit
    assert_all_agree([guard], {"x": torch.randn(3, dtype=torch.complex64).conj()}, True)
    assert_all_agree([guard], {"x": torch.randn(3, dtype=torch.complex64)}, False)


def test_parameters_and_subclasses():
    p = torch.nn.Parameter(torch.randn(3, 3))
    guard = TensorMatch.from_tensor(X, p)
    assert guard.requires_grad is True and guard.pytype is torch.nn.Parameter
    assert_all_agree([guard], {"x": torch.nn.Parameter(torch.randn(3, 3))}, True)
    assert_all_agree([guard], {"x": torch.randn(3, 3, requires_grad=True)}, False)
    sub = TensorMatch.from_tensor(X, torch.randn(2).as_subclass(MyTensor))
    assert_all_agree([sub], {"x": torch.randn(2).as_subclass(MyTensor)}, True)
    assert_all_agree([sub], {"x": torch.randn(2)}, False)


def test_free_dims():
    guard = TensorMatch.from_tensor(X, torch.randn(8, 4), dynamic_sizes=[0], dynamic_strides=[0])
    assert guard.sizes == (None, 4) and guard.strides == (None, 1)
    for n in (1, 8, 100):
        assert_all_agree([guard], {"x": torch.randn(n, 4)}, True)
    assert_all_agree([guard], {"x": torch.randn(8, 5)}, False)
    assert_all_agree([guard], {"x": torch.randn(8)}, False)
    assert evaluate(guard, {"x": torch.randn(8)}) == "tensor L['x'] ndim: expected 2, got 1"


def test_free_size_keeps_static_stride():
    guard = TensorMatch.from_tensor(X, torch.randn(8, 4), dynamic_sizes=[0])
    assert_all_agree([guard], {"x": torch.randn(5, 4)}, True)
    assert_all_agree([guard], {"x": torch.randn(5, 8)[:, :4]}, False)
    assert evaluate(guard, {"x": torch.randn(5, 8)[:, :4]}) == "tensor L['x'] stride(0): expected 4, got 8"


def test_many_tensors_one_native_call():
    names = [f"t{i}" for i in range(5)]
    tensors = [torch.randn(i + 1, 2) for i in range(5)]
    guards = [TensorMatch.from_tensor(LocalSource(n), t) for n, t in zip(names, tensors, strict=True)]
    native_check, _ = checkers(*guards)
    # one native call checks all five; single-tensor checks run only after it fails
    batched = [line for line in native_check.source.splitlines() if ".check(" in line]
    assert len(batched) == 1
    assert ".check(v0, v1, v2, v3, v4) or (" in batched[0]
    frame = dict(zip(names, [torch.randn(i + 1, 2) for i in range(5)], strict=True))
    assert_all_agree(guards, frame, True)
    frame["t3"] = torch.randn(9, 2)
    assert_all_agree(guards, frame, False)
    assert GuardSet(guards).explain(frame) == "tensor L['t3'] size(0): expected 4, got 9"


def test_grad_tensor_nested_under_matched_tensor_stays_out_of_batch():
    x = torch.randn(2, requires_grad=True)
    x.grad = torch.randn(2)
    from kiln.guards import AttrSource

    guards = [TensorMatch.from_tensor(X, x), TensorMatch.from_tensor(AttrSource(X, "grad"), x.grad)]
    native_check, _ = checkers(*guards)
    src = native_check.source
    assert src.index(".check(v0)") < src.index("v0.grad")
    assert_all_agree(guards, {"x": x}, True)
    y = torch.randn(2, requires_grad=True)
    assert_all_agree(guards, {"x": y}, False)


def test_guards_under_a_batched_tensor_wait_for_the_batch():
    from kiln.guards import AttrSource

    x = torch.randn(2, requires_grad=True)
    x.grad = torch.randn(2)
    y = torch.randn(3)
    guards = [TensorMatch.from_tensor(X, x),
              TensorMatch.from_tensor(AttrSource(X, "grad"), x.grad),
              EqualsMatch(TensorSizeSource(X, 0), 2),
              TensorMatch.from_tensor(LocalSource("y"), y)]
    native_check, _ = checkers(*guards)
    src = native_check.source
    batch_at = src.index(".check(")
    assert "v0, " in src[batch_at:batch_at + 20]  # x and y in one native call
    assert batch_at < src.index(".grad") and batch_at < src.index(".size(0)")
    assert_all_agree(guards, {"x": x, "y": y}, True)
    assert_all_agree(guards, {"x": torch.randn(2), "y": y}, False)


def test_tensor_property_sources():
    t = torch.randn(6, 4)[1:, ::2]
    guards = [TensorMatch.from_tensor(X, t, dynamic_sizes=[0, 1], dynamic_strides=[0, 1]),
              EqualsMatch(TensorSizeSource(X, 1), 2),
              EqualsMatch(TensorStrideSource(X, 1), 2),
              EqualsMatch(TensorStorageOffsetSource(X), 4)]
    assert_all_agree(guards, {"x": t}, True)
    assert_all_agree(guards, {"x": torch.randn(6, 4)[1:, :2]}, False)
    assert GuardSet(guards).explain({"x": torch.randn(6, 4)[1:, :2]}) == (
        "L['x'].stride(1) == 2: expected 2, got 1")


def test_no_aliasing_between_tensor_inputs():
    a, b = torch.randn(2), torch.randn(2)
    guard = NoAliasing((LocalSource("a"), LocalSource("b")))
    assert_all_agree([guard], {"a": a, "b": b}, True)
    assert_all_agree([guard], {"a": a, "b": a}, False)
    assert evaluate(guard, {"a": a, "b": a}) == (
        "L['a'] and L['b']: expected distinct objects, got the same object")


def test_hostile_values_never_raise(hostile_values):
    native_check, python_check = checkers(TensorMatch.from_tensor(X, torch.randn(2)))
    for value in hostile_values:
        assert native_check({"x": value}) is False
        assert python_check({"x": value}) is False


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode,
                                     lambda: torch.autocast("cpu")])
def test_native_and_python_agree_under_thread_local_state(context):
    guard = TensorMatch.from_tensor(X, torch.randn(2, 2))
    native_check, python_check = checkers(guard)
    frame = {"x": torch.randn(2, 2)}
    with context():
        inside = native_check(frame)
        assert python_check(frame) is inside
        assert (evaluate(guard, frame) is None) is inside
        captured = TensorMatch.from_tensor(X, frame["x"])
        assert checkers(captured)[0](frame) and checkers(captured)[1](frame)
    assert native_check(frame) and python_check(frame)


def test_same_tensor_under_two_sources_passes_native_and_python():
    # torch's batched native check rejects one tensor passed twice (tied weights); the
    # checker must still accept it, and still reject a real mismatch.
    import torch

    from kiln.guards import GuardSet, LocalSource, TensorMatch

    t = torch.randn(3)
    gs = GuardSet([TensorMatch.from_tensor(LocalSource("a"), t),
                   TensorMatch.from_tensor(LocalSource("b"), t)])
    for native in (True, False):
        check = gs.compile({}, native=native)
        assert check({"a": t, "b": t})
        assert check({"a": t, "b": torch.randn(3)})
        assert not check({"a": t, "b": torch.randn(4)})
        assert not check({"a": torch.randn(2), "b": t})
