"""Replacement code: objects without a literal are bound wherever the compiler puts them."""

import types

import pytest
import torch

import kiln
from kiln.symexec._codegen import ReplacementSource, build_replacement


def _function(code, body_lines, objects):
    body = ReplacementSource(list(body_lines), dict(objects))
    new = build_replacement(code, body)
    return types.FunctionType(new, {})


def _no_sentinel(value):
    if isinstance(value, str):
        assert "kiln:" not in value, value
    elif isinstance(value, (tuple, list, frozenset, set)):
        for v in value:
            _no_sentinel(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            _no_sentinel(k)
            _no_sentinel(v)


def test_objects_in_a_folded_tuple_constant_are_bound():
    def f(x):
        pass

    size, marker = torch.Size([3]), object()
    fn = _function(f.__code__, ["return (__kiln_k0, 1, (__kiln_k1, 'a'))"],
                   {"__kiln_k0": size, "__kiln_k1": marker})
    assert fn(0) == (size, 1, (marker, "a"))
    assert fn(0)[2][0] is marker


def test_objects_in_a_folded_frozenset_and_nested_code_are_bound():
    def f(x):
        pass

    size = torch.Size([2])
    fn = _function(f.__code__, ["g = lambda: (__kiln_k0, 2)", "return x in {__kiln_k0, 5}, g()"],
                   {"__kiln_k0": size})
    assert fn(torch.Size([2])) == (True, (size, 2))
    assert fn(3) == (False, (size, 2))


@pytest.mark.parametrize("case", ["closure_out", "returned_tuple", "stored_in_object", "nested_tuple"])
def test_sizes_of_out_tensors_are_returned_as_sizes(case, fresh_kiln):
    class Box:
        pass

    def outer(x):
        o1, o2 = torch.empty(3), torch.empty(3)

        def inner():
            torch.add(x, 1, out=o1)
            torch.mul(x, 2, out=o2)
            return o1.size(), o2.size()

        return inner()

    def returned_tuple(x, o):
        torch.mul(x, 2, out=o)
        return (o.size(), 1)

    def stored_in_object(x, o, box):
        torch.mul(x, 2, out=o)
        box.size = (o.size(), o.shape)
        return box

    def nested_tuple(x, o):
        torch.mul(x, 2, out=o)
        return ((o.size(), (o.shape, "s")), x.dtype)

    x = torch.ones(3)
    if case == "closure_out":
        fn, args = outer, lambda: (x,)
    elif case == "returned_tuple":
        fn, args = returned_tuple, lambda: (x, torch.empty(3))
    elif case == "stored_in_object":
        fn, args = stored_in_object, lambda: (x, torch.empty(3), Box())
    else:
        fn, args = nested_tuple, lambda: (x, torch.empty(3))
    expected = fn(*args())
    got = kiln.compile(fn, backend="eager")(*args())
    if case == "stored_in_object":
        expected, got = expected.size, got.size
    _no_sentinel(got)
    assert got == expected
    assert type(got) is type(expected)


def test_strings_that_spell_a_reference_stay_strings(fresh_kiln):
    def f(x):
        return x + 1, "__kiln_graph", {"__kiln_k1": "__kiln_k1"}, torch.Size([2]), "a __kiln_k0 b"

    expected = f(torch.ones(2))
    got = kiln.compile(f, backend="eager")(torch.ones(2))
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:]
    _no_sentinel(got[1:])


def test_reference_names_after_a_dot_are_attributes():
    def f(x):
        pass

    holder = types.SimpleNamespace(__kiln_k0="attribute")
    fn = _function(f.__code__, ["return __kiln_k0.__kiln_k0, '__kiln_k0'"], {"__kiln_k0": holder})
    assert fn(0) == ("attribute", "__kiln_k0")


def test_a_call_over_thousands_of_references_on_one_line_is_bound():
    # a graph over a 512-layer model is called with ~6000 inputs on one line (Python 3.12's
    # tokenize module was quadratic in a line's length: the build now parses instead)
    def f(x):
        pass

    refs = {f"__kiln_k{i}": i for i in range(6000)}
    fn = _function(f.__code__, [f"return x + sum(({', '.join(refs)},)), __kiln_k7, 'x.__kiln_k1'"],
                   refs)
    assert fn(1) == (1 + sum(range(6000)), 7, "x.__kiln_k1")

