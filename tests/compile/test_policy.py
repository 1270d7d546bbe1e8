"""The compile policy's error rules: what the user's code raises reaches the user unchanged
(type, message, the very object), whether kiln captured the frame, broke its graph or ran it
eagerly; only what kiln cannot capture falls back to eager."""

import pytest
import torch

import kiln
from kiln import _policy


class UserError(Exception):
    pass


ERROR = UserError("the user's own")


def _raise_held(x):
    _ = x + 1  # a tensor op before the raise
    raise ERROR


def _raise_new(x):
    y = x * 2
    raise UserError(f"made here: {y.shape}")


def _missing_key(x):
    return x + {"a": 1}["b"]


def _bad_view(x):
    return x.relu().view(7)


def _bad_broadcast(x):
    return torch.ones(3) + x


def _after_a_graph_break(x):
    y = x * 2
    if y.sum().item() > -1e9:
        raise ERROR
    return y


def _helper(x):
    raise ERROR


def _in_a_helper(x):
    return _helper(x + 1)


@kiln.disable
def _disabled(x):
    raise ERROR


def _in_a_disabled_helper(x):
    return _disabled(x.sin()) + 1


def _in_a_loop(x):
    for i in range(3):
        x = x + i
        if i == 2:
            raise ERROR
    return x


CASES = [_raise_held, _raise_new, _missing_key, _bad_view, _bad_broadcast, _after_a_graph_break,
         _in_a_helper, _in_a_disabled_helper, _in_a_loop]


def _eager_error(fn, x):
    try:
        fn(x)
    except Exception as e:
        return e
    raise AssertionError("expected an exception")


@pytest.mark.parametrize("suppress", [False, True])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_what_the_users_code_raises_reaches_the_user_unchanged(fn, suppress, monkeypatch):
    monkeypatch.setattr(kiln.config, "suppress_errors", suppress)
    x = torch.randn(6)
    expected = _eager_error(fn, x)
    compiled = kiln.compile(fn, backend="eager")
    for _ in range(2):  # the first call compiles, the second hits the cache (or runs eagerly)
        with pytest.raises(type(expected)) as info:
            compiled(x)
        assert type(info.value) is type(expected)
        assert str(info.value) == str(expected)
        if expected is ERROR:
            assert info.value is ERROR
        assert not isinstance(info.value, kiln.BackendCompilerFailed)


def test_a_user_exception_caught_in_the_compiled_function_behaves_as_eager():
    def fn(x):
        try:
            _helper(x)
        except UserError as e:
            return x + len(str(e))
        return x

    compiled = kiln.compile(fn, backend="eager")
    x = torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), fn(x))


def test_an_unsupported_frame_still_falls_back_to_eager_with_suppress_errors_off(caplog):
    # what kiln cannot capture is not an error: it breaks or runs eagerly, whatever
    # suppress_errors says
    assert kiln.config.suppress_errors is False

    def fn(x):
        return torch.tensor([float(v) for v in x.tolist()]) * 2

    compiled = kiln.compile(fn, backend="eager")
    x = torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), fn(x))
    assert kiln.session().stats.breaks  # logged as a break or a fallback, not raised


def test_an_internal_error_of_kiln_runs_the_frame_eagerly_with_a_warning(monkeypatch, caplog):
    # A bug of kiln's own while capturing is a limit of kiln, not the user's error: without
    # fullgraph the frame runs eagerly (logged with the traceback), the program goes on.
    monkeypatch.setattr(kiln.config, "raise_internal_errors", False)

    def broken_capture(*args, **kwargs):
        raise KeyError("kiln bug")

    monkeypatch.setattr(_policy, "capture", broken_capture)

    def fn(x):
        return x * 2

    compiled = kiln.compile(fn, backend="eager")
    x = torch.randn(3)
    with caplog.at_level("WARNING", logger="kiln"):
        for _ in range(2):
            torch.testing.assert_close(compiled(x), fn(x))
    warned = [r for r in caplog.records if "running it eagerly" in r.getMessage()]
    assert len(warned) == 1 and "kiln bug" in warned[0].getMessage() and warned[0].exc_info
    assert fn.__code__ in kiln.session().stats.eager_codes
    # with fullgraph, or when asked to (kiln's tests), the error is raised
    kiln.reset()
    with pytest.raises(KeyError, match="kiln bug"):
        kiln.compile(fn, backend="eager", fullgraph=True)(x)
    kiln.reset()
    monkeypatch.setattr(kiln.config, "raise_internal_errors", True)
    with pytest.raises(KeyError, match="kiln bug"):
        kiln.compile(fn, backend="eager")(x)
