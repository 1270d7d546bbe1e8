"""EqualsMatch on torch constants (dtype, device), and FunctionMatch on a module's forward."""

import torch

from kiln.guards import AttrSource, EqualsMatch, FunctionMatch, GuardSet, LocalSource, evaluate

X = LocalSource("x")


def test_equals_dtype_is_identity():
    guard = EqualsMatch(X, torch.float32)
    check = GuardSet([guard]).compile()
    assert check({"x": torch.float32})
    assert not check({"x": torch.float16})
    assert not check({"x": "torch.float32"})
    assert evaluate(guard, {"x": torch.float16}) == (
        "L['x'] == torch.float32: expected torch.float32, got torch.float16")


def test_equals_device_compares_type_and_value():
    guard = EqualsMatch(X, torch.device("cpu"))
    check = GuardSet([guard]).compile()
    assert check({"x": torch.device("cpu")})
    assert not check({"x": torch.device("meta")})
    assert not check({"x": "cpu"})
    assert evaluate(guard, {"x": "cpu"}) == (
        "L['x'] == device(type='cpu'): expected device(type='cpu'), got 'cpu'")
    assert len(GuardSet([guard, EqualsMatch(X, torch.device("cpu"))])) == 1


def test_equals_tuple_of_torch_constants():
    guard = EqualsMatch(X, (torch.float32, torch.device("cpu"), 2))
    check = GuardSet([guard]).compile()
    assert check({"x": (torch.float32, torch.device("cpu"), 2)})
    assert not check({"x": (torch.float64, torch.device("cpu"), 2)})


def test_function_match_on_bound_forward_function():
    net = torch.nn.Linear(2, 2)
    fn = type(net).forward
    guard = FunctionMatch.from_function(AttrSource(X, "forward"), fn)
    check = GuardSet([guard]).compile()
    assert check({"x": type(net)})
    assert not check({"x": torch.nn.Conv1d})
    assert evaluate(guard, {"x": torch.nn.Conv1d}).startswith(
        "L['x'].forward code: expected <code object forward")
