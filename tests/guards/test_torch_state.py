"""TorchGlobalState: holds in the captured state, fails (compiled, both paths, and explained)
after each kind of global change, and holds again once the state is restored."""

import contextlib

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from kiln.guards import GuardSet, TorchGlobalState, evaluate


class NoopFunctionMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class NoopDispatchMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def default_dtype(dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


@contextlib.contextmanager
def deterministic():
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


@contextlib.contextmanager
def threads(n):
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


CHANGES = [
    (torch.no_grad, "global torch state grad_enabled: expected True, got False"),
    (torch.inference_mode, "global torch state grad_enabled: expected True, got False"),
    (lambda: default_dtype(torch.float64),
     "global torch state default_dtype: expected torch.float32, got torch.float64"),
    (deterministic, "global torch state deterministic_algorithms: expected False, got True"),
    (lambda: torch.autocast("cpu"), "global torch state autocast_cpu: expected False, got True"),
    (NoopFunctionMode, "global torch state function_modes: expected (), got "),
    (NoopDispatchMode, "global torch state dispatch_modes: expected (), got "),
    (torch._C.DisableTorchFunction,
     "global torch state torch_function_enabled: expected True, got False"),
    (lambda: threads(torch.get_num_threads() + 1), "global torch state num_threads: expected"),
]


@pytest.mark.parametrize(("change", "text"), CHANGES)
def test_each_change_fails_and_is_explained(change, text):
    guard = TorchGlobalState.capture()
    native_check = GuardSet([guard]).compile()
    python_check = GuardSet([guard]).compile(native=False)
    assert native_check({}) and python_check({})
    with change():
        assert native_check({}) is False
        assert python_check({}) is False
        assert evaluate(guard, {}).startswith(text)
    assert native_check({}) and python_check({})
    assert evaluate(guard, {}) is None


def test_inference_mode_with_grad_enabled_is_still_caught():
    guard = TorchGlobalState.capture()
    check = GuardSet([guard]).compile()
    with torch.inference_mode(), torch.enable_grad():
        assert check({}) is False
        assert evaluate(guard, {}) == "global torch state inference_mode: expected False, got True"


def test_state_captured_inside_a_mode_holds_there_only():
    with torch.no_grad():
        guard = TorchGlobalState.capture()
        check = GuardSet([guard]).compile()
        assert check({})
    assert not check({})
    assert evaluate(guard, {}) == "global torch state grad_enabled: expected False, got True"


def test_mode_stack_types_are_compared():
    with NoopFunctionMode():
        guard = TorchGlobalState.capture()
        check = GuardSet([guard]).compile()
        assert check({})
    with NoopFunctionMode(), NoopFunctionMode():
        assert not check({})
    assert not check({})


def test_captures_dedup():
    assert len(GuardSet([TorchGlobalState.capture(), TorchGlobalState.capture()])) == 1
    with torch.no_grad():
        other = TorchGlobalState.capture()
    assert len(GuardSet([TorchGlobalState.capture(), other])) == 2


def test_default_device_is_part_of_the_state():
    guard = TorchGlobalState.capture()
    check = GuardSet([guard]).compile()
    try:
        torch.set_default_device("meta")
        assert not check({})
        assert evaluate(guard, {}).startswith("global torch state function_modes: expected ()")
        on_meta = TorchGlobalState.capture()
        meta_check = GuardSet([on_meta]).compile()
        assert meta_check({})
        torch.set_default_device("cpu")
        assert not meta_check({})
        assert "meta" in evaluate(on_meta, {})
    finally:
        torch.set_default_device(None)
    assert check({})


def test_saved_tensors_hooks_are_part_of_the_state():
    guard = TorchGlobalState.capture()
    check = GuardSet([guard]).compile()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        assert not check({})
        assert not GuardSet([guard]).compile(native=False)({})
        assert evaluate(guard, {}).startswith(
            "global torch state saved_tensors_hooks: expected None, got (<function")
    assert check({})


def test_random_state_changes_agree_across_paths():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    guard = TorchGlobalState.capture()
    native_check = GuardSet([guard]).compile()
    python_check = GuardSet([guard]).compile(native=False)

    @settings(max_examples=60, deadline=None)
    @given(picks=st.lists(st.sampled_from(range(len(CHANGES))), max_size=3, unique=True))
    def run(picks):
        with contextlib.ExitStack() as stack:
            for i in picks:
                stack.enter_context(CHANGES[i][0]())
            result = native_check({})
            assert python_check({}) is result
            assert (evaluate(guard, {}) is None) is result
            assert result is (not picks)
        assert native_check({}) and python_check({})

    run()


def test_global_module_hooks_are_part_of_the_state():
    import torch

    from kiln.guards import GuardSet, TorchGlobalState

    for native in (True, False):
        check = GuardSet([TorchGlobalState.capture()]).compile({}, native=native)
        assert check({})
        handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
        try:
            assert not check({})
            assert "global_module_hooks" in GuardSet([TorchGlobalState.capture()]).ordered()[0].describe()
        finally:
            handle.remove()
        assert check({})
