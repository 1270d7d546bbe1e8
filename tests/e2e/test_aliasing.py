"""Aliased inputs: one object reached twice (the same argument passed twice, an argument that
is also a module's tensor, lists, dicts and objects passed twice) is one object in the trace,
and the assumption, either way, is guarded: a later call under the other assumption never
reuses the entry. Views of one base changed in place are never treated as separate memory."""

import copy

import pytest
import torch
from e2e_support import CountingBackend
from torch import nn

import kiln
from kiln.guards import NoAliasing, NoStorageSharing


def _calls(fn, calls, *, copy_args=True):
    """Compile ``fn`` once and call it with each argument tuple (and eager on deep copies,
    which keep the aliasing inside a tuple, unless ``copy_args`` is False: arguments that
    are a module's own tensors); every result and argument must agree."""
    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    for args in calls:
        eager_args = copy.deepcopy(args) if copy_args else args
        expected = fn(*eager_args)
        got = compiled(*args)
        torch.testing.assert_close(got, expected)
        for a, e in zip(args, eager_args, strict=True):
            if isinstance(e, torch.Tensor):
                torch.testing.assert_close(a, e)
    return backend


def test_the_same_tensor_passed_twice_is_one_object():
    def f(x, y):
        return x * 10 if x is y else x + y

    a, b = torch.ones(2), torch.full((2,), 2.0)
    backend = _calls(f, [(a, a), (a, b), (a, a), (b, b), (b, a), (a, b)])
    assert len(backend.graphs) == 2  # one entry per assumption, each reused


def test_distinct_first_then_the_same_tensor_recompiles():
    def f(x, y):
        return x * 10 if x is y else x + y

    a, b = torch.ones(2), torch.full((2,), 2.0)
    backend = _calls(f, [(a, b), (a, a), (b, a), (b, b)])
    assert len(backend.graphs) == 2


def test_membership_and_keys_see_one_object():
    def f(x, y):
        return x in {y}, y in {x, x * 2}, len({x, y}), x * 1

    a, b = torch.ones(2), torch.ones(2)
    backend = _calls(f, [(a, a), (a, b), (a, a)])
    assert len(backend.graphs) == 2


def test_inplace_change_through_one_alias_is_seen_through_the_other():
    def f(x, y):
        x.add_(1)
        y.mul_(2)
        return x + y, y is x

    backend = _calls(f, [(t := torch.ones(2), t), (torch.ones(2), torch.ones(2))])
    assert len(backend.graphs) == 2


class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(2))
        self.register_buffer("b", torch.zeros(2))

    def forward(self, x):
        if x is self.b:
            return x * 10
        return x + self.b + (x is self.w)


def test_an_argument_that_is_a_module_buffer_is_one_object():
    m = _Model()
    backend = _calls(m, [(m.b,), (torch.ones(2),), (m.b,), (torch.zeros(2),)], copy_args=False)
    assert len(backend.graphs) == 2
    kiln.reset()  # the entries above would serve this model too (same code, same structure)
    m = _Model()
    backend = _calls(m, [(torch.ones(2),), (m.b,), (torch.ones(2),)], copy_args=False)
    assert len(backend.graphs) == 2


def test_an_argument_that_is_a_module_parameter_is_one_object():
    m = _Model()
    with torch.no_grad():
        backend = _calls(m, [(torch.ones(2, requires_grad=True),), (m.w,)], copy_args=False)
    assert len(backend.graphs) == 2


def test_a_module_tensor_of_other_metadata_adds_no_aliasing_guard():
    def f(lin, x, y):
        return lin(x) + y

    from kiln.symexec import capture

    # the weight and the bias cannot be x (another shape); y has the bias's metadata
    cap = capture(f.__code__, {"lin": nn.Linear(4, 3), "x": torch.randn(2, 4), "y": nn.Parameter(torch.randn(3))},
                  f.__globals__)
    (guard,) = [g for g in cap.guards if isinstance(g, NoAliasing)]
    assert [str(s) for s in guard.items] == ["L['x']", "L['y']", "L['lin']._parameters['bias']"]


def test_the_same_list_passed_twice():
    def f(a, b):
        a.append(1)
        return len(b), a is b, torch.ones(1) * len(b)

    shared = [0]
    backend = _calls(f, [(shared, shared), ([0], [0]), (s := [5], s)])
    assert shared == [0, 1]
    assert len(backend.graphs) == 3  # the third call changes the length guard, not aliasing


def test_lists_compared_by_identity_are_guarded_distinct():
    def f(a, b, x):
        return x * (2 if a is b else 3)

    l1, l2 = [1], [1]
    x = torch.ones(2)
    backend = _calls(f, [(l1, l2, x), (l1, l1, x), (l2, l1, x)])
    assert len(backend.graphs) == 2


def test_the_same_dict_and_object_passed_twice():
    class Obj:
        pass

    def f(d, e, o, p, x):
        d["k"] = 5
        o.v = 7
        return e.get("k", 0), getattr(p, "v", 0), x + 1

    d, o = {}, Obj()
    backend = CountingBackend()
    compiled = kiln.compile(f, backend=backend)
    assert compiled(d, d, o, o, torch.ones(1))[:2] == (5, 7)
    d2, o2 = {}, Obj()
    assert compiled({}, d2, Obj(), o2, torch.ones(1))[:2] == (0, 0)
    assert d2 == {} and not hasattr(o2, "v")
    assert len(backend.graphs) == 2


def test_views_of_one_base_changed_in_place_match_eager():
    def f(a, b):
        a.add_(1)
        return b * 2

    base = torch.zeros(4)
    _calls(f, [(base[0:2], base[1:3])])
    torch.testing.assert_close(base, torch.tensor([1.0, 1.0, 0.0, 0.0]))

    def g(a, b):
        b.mul_(3)
        a += 1
        return a * b.sum()

    base = torch.ones(4)
    _calls(g, [(base, base[1:3])])


def test_views_of_one_base_do_not_reuse_an_entry_made_for_separate_tensors():
    def f(a, b):
        a.add_(1)
        return b * 2

    backend = CountingBackend()
    compiled = kiln.compile(f, backend=backend)
    compiled(torch.zeros(2), torch.zeros(2))
    assert len(backend.graphs) == 1
    base = torch.zeros(4)
    expected_base = base.clone()
    expected = f(expected_base[0:2], expected_base[1:3])
    torch.testing.assert_close(compiled(base[0:2], base[1:3]), expected)
    torch.testing.assert_close(base, expected_base)
    assert len(backend.graphs) > 1  # not the entry made for separate memory

    from kiln.symexec import capture

    cap = capture(f.__code__, {"a": torch.zeros(2), "b": torch.zeros(2)}, f.__globals__)
    assert any(isinstance(g, NoStorageSharing) for g in cap.guards)
    cap = capture((lambda a, b: a + b).__code__, {"a": torch.zeros(2), "b": torch.zeros(2)}, {})  # no change
    assert not any(isinstance(g, NoStorageSharing) for g in cap.guards)



class _Plain:
    pass


def _eq(a, b, x):
    return x * (2 if a == b else 3)


def _in_set(a, b, x):
    return x * (2 if a in {b} else 3), len({a, b})


def _in_list(a, b, x):
    return x * (2 if a in [b] else 3)


@pytest.mark.parametrize("fn", [_eq, _in_set, _in_list], ids=["==", "in set", "in list"])
def test_user_objects_told_apart_by_identity_are_guarded(fn):
    u, v, x = _Plain(), _Plain(), torch.ones(1)
    backend = CountingBackend()
    compiled = kiln.compile(fn, backend=backend)
    for a, b in [(u, v), (u, u), (v, u), (v, v)]:
        assert str(compiled(a, b, x)) == str(fn(a, b, x))
    assert len(backend.graphs) == 2


class _Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = torch.zeros(2)  # a plain attribute, not a buffer

    def forward(self, x):
        x.add_(1)
        return self.t * 1, x is self.t


_GLOBAL = torch.zeros(2)


def _with_global(x):
    x.mul_(2)
    x.add_(1)
    return _GLOBAL + 0, x is _GLOBAL


def test_an_argument_that_is_a_plain_module_attribute_or_a_global():
    m = _Holder()
    backend = CountingBackend()
    compiled = kiln.compile(m, backend=backend)
    got = [compiled(torch.zeros(2)), compiled(m.t), compiled(m.t), compiled(torch.zeros(2))]
    m2 = _Holder()
    expected = [m2(torch.zeros(2)), m2(m2.t), m2(m2.t), m2(torch.zeros(2))]
    torch.testing.assert_close(got, expected)
    assert len(backend.graphs) == 2

    backend = CountingBackend()
    compiled = kiln.compile(_with_global, backend=backend)
    got = [compiled(torch.zeros(2)), compiled(_GLOBAL)]
    assert got[1][1] is True
    torch.testing.assert_close(_GLOBAL, torch.ones(2))
    assert len(backend.graphs) == 2
