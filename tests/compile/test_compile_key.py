"""Cache entries belong to the kiln.compile configuration that made them: another backend
or other options compile anew (as torch.compile recompiles for another backend), the same
backend and options share entries, and frames run under no configuration may use any."""

from __future__ import annotations

import copy

import torch

import kiln


def _counting(name: str, calls: list[str]):
    def backend(gm, example_inputs):
        calls.append(name)
        return gm.forward

    return backend


def test_another_backend_compiles_anew_and_each_keeps_its_entry():
    calls: list[str] = []
    a, b = _counting("a", calls), _counting("b", calls)

    def f(x):
        return x.sin() + 1

    x = torch.randn(3)
    for backend in (a, b, a, b):
        torch.testing.assert_close(kiln.compile(f, backend=backend)(x), f(x))
    assert calls == ["a", "b"]
    assert kiln.session().stats.captures == 2


def test_the_same_backend_and_options_share_entries_and_other_options_do_not():
    calls: list[str] = []
    a = _counting("a", calls)

    def f(x):
        return x.cos() * 2

    x = torch.randn(3)
    kiln.compile(f, backend=a)(x)
    kiln.compile(f, backend=a)(x)
    assert calls == ["a"]
    kiln.compile(f, backend=a, dynamic=False)(x)
    assert calls == ["a", "a"]
    torch.testing.assert_close(kiln.compile(f)(x), f(x))  # the default backend: its own entry
    torch.testing.assert_close(kiln.compile(f, options={"inductor.fuse": False})(x), f(x))
    assert kiln.session().stats.captures == 4


def test_a_copy_of_a_module_under_another_backend_calls_that_backend():
    calls: list[str] = []
    model = torch.nn.Linear(3, 3)
    other = copy.deepcopy(model)
    x = torch.randn(2, 3)
    with torch.no_grad():
        kiln.compile(model, backend=_counting("a", calls))(x)
        torch.testing.assert_close(kiln.compile(other, backend=_counting("b", calls))(x), other(x))
    assert calls == ["a", "b"]
