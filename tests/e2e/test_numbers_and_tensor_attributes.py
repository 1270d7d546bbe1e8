"""Python numbers as graph inputs and tensors as Python objects (issue 13): methods of int and
float values the graph takes as inputs (specialized: guarded by value, so another value
recompiles), custom attributes set on input, intermediate and new tensors (and present on the
real tensors after the call, as in eager), ``hasattr``/``getattr`` on tensors, iteration over
a tensor and ``tensor.type(...)``. Compared with eager, with exact graph counts and no break."""

import torch
from e2e_support import assert_same

import kiln


def _calls(counting, fn, *calls, graphs):
    """Each call of ``calls`` (argument tuples) through kiln and eagerly: equal results, then
    ``graphs`` graphs in all and no graph break."""
    compiled = kiln.compile(fn, backend=counting)
    for args in calls:
        assert_same(compiled(*args), fn(*args))
    assert len(counting.graphs) == graphs
    assert kiln.session().stats.breaks == []
    return compiled


X = torch.randn(3)


def test_int_graph_input_bit_length_and_friends(counting):
    def fn(x, n):
        return x * n.bit_length(), n.conjugate(), n.real, n.imag, n.__abs__(), n.__round__()

    # 2, 3: the number becomes a graph input; its methods specialize it, so 5 recompiles
    _calls(counting, fn, (X, 2), (X, 3), (X, 5), graphs=3)


def test_specialized_int_reuses_the_graph_for_the_same_value(counting):
    def fn(x, n):
        return x + n.bit_length()

    compiled = _calls(counting, fn, (X, 2), (X, 3), (X, 3), graphs=2)
    assert_same(compiled(X, 3), fn(X, 3))
    assert len(counting.graphs) == 2
    assert_same(compiled(X, 2), fn(X, 2))  # the first graph, guarded on 2
    assert len(counting.graphs) == 2


def test_specialized_value_recompiles_with_a_different_answer(counting):
    def fn(x, n):
        return x * n.bit_length()

    # bit_length 2 for 3, 3 for 4: a wrong guard would reuse the graph for 3
    _calls(counting, fn, (X, 1), (X, 3), (X, 4), (X, 7), graphs=4)


def test_float_graph_input_is_integer(counting):
    def fn(x, f):
        if f.is_integer():
            return x * f
        return x - f

    _calls(counting, fn, (X, 2.5), (X, 3.0), (X, 4.25), graphs=3)


def test_float_graph_input_as_integer_ratio_and_hex(counting):
    def fn(x, f):
        num, den = f.as_integer_ratio()
        return x * num / den, f.hex(), f.conjugate(), f.real, f.imag

    _calls(counting, fn, (X, 0.5), (X, 0.75), (X, 1.25), graphs=3)


def test_float_graph_input_round_and_abs_methods(counting):
    def fn(x, f):
        return x + f.__round__(1) + f.__abs__(), f.__round__()

    _calls(counting, fn, (X, -1.26), (X, 2.71), (X, 3.14), graphs=3)


def test_int_graph_input_hex_builtin(counting):
    def fn(x, n):
        return x + n.bit_length(), hex(n)

    _calls(counting, fn, (X, 10), (X, 255), graphs=2)


def test_attribute_set_on_input_tensor_is_read_back_and_kept(counting):
    def fn(x):
        x.tag = "seen"
        x.scale = 2.0
        return x * x.scale, x.tag

    compiled = kiln.compile(fn, backend=counting)
    a = torch.randn(3)
    b = a.clone()
    expected = fn(b)
    assert_same(compiled(a), expected)
    assert a.tag == "seen" and a.scale == 2.0
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def test_attribute_set_on_intermediate_and_new_tensors(counting):
    def fn(x):
        y = x + 1
        y.scale = 3.0
        z = torch.ones(3)
        z.tag = "ones"
        return y * y.scale + z, z.tag

    _calls(counting, fn, (X,), graphs=1)


def test_attribute_on_returned_tensor_exists_after_the_call(counting):
    def fn(x):
        y = x * 2
        y.tag = "doubled"
        y.weight = 0.5
        return y

    compiled = kiln.compile(fn, backend=counting)
    out = compiled(X)
    assert_same(out, fn(X))
    assert out.tag == "doubled" and out.weight == 0.5
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def test_attribute_of_input_tensor_is_guarded_on_its_value(counting):
    def fn(x):
        return x * x.scale

    compiled = kiln.compile(fn, backend=counting)
    a = torch.randn(3)
    a.scale = 2
    assert_same(compiled(a), fn(a))
    assert_same(compiled(a), fn(a))
    assert len(counting.graphs) == 1
    a.scale = 5
    assert_same(compiled(a), fn(a))
    assert len(counting.graphs) == 2
    assert kiln.session().stats.breaks == []


def test_attribute_string_of_input_tensor_chooses_the_branch(counting):
    def fn(x):
        if x.tag == "double":
            return x * 2
        return x + 1

    compiled = kiln.compile(fn, backend=counting)
    a = torch.randn(3)
    a.tag = "double"
    assert_same(compiled(a), fn(a))
    a.tag = "inc"
    assert_same(compiled(a), fn(a))
    assert len(counting.graphs) == 2
    assert kiln.session().stats.breaks == []


def test_hasattr_and_getattr_with_default_on_tensors(counting):
    def fn(x):
        y = x.relu()
        before = hasattr(y, "tag"), getattr(y, "tag", "none"), hasattr(x, "tag")
        y.tag = "relu"
        return y, before, hasattr(y, "tag"), getattr(y, "tag", "none"), getattr(x, "missing", 7)

    _calls(counting, fn, (X,), graphs=1)


def test_hasattr_on_input_tensor_recompiles_once_it_is_set(counting):
    def fn(x):
        return x * (2 if hasattr(x, "tag") else 3)

    compiled = kiln.compile(fn, backend=counting)
    a = torch.randn(3)
    assert_same(compiled(a), fn(a))
    a.tag = 1
    assert_same(compiled(a), fn(a))
    assert len(counting.graphs) == 2
    assert kiln.session().stats.breaks == []


def test_iter_and_for_over_tensor_rows(counting):
    def fn(x):
        it = iter(x)
        first = next(it)
        total = first * 0
        for row in x:
            total = total + row.sum()
        return first, total, [r * i for i, r in enumerate(x)]

    _calls(counting, fn, (torch.randn(4, 2),), graphs=1)


def test_tensor_type_string(counting):
    def fn(x):
        return x + 1, x.type(), x.long().type(), x.type() == "torch.FloatTensor"

    _calls(counting, fn, (X,), graphs=1)


def test_tensor_type_conversions(counting):
    def fn(x):
        return (x.type(torch.HalfTensor), x.type(torch.float16), x.type(torch.float32),
                x.type("torch.DoubleTensor"), x.type(torch.LongTensor).type())

    _calls(counting, fn, (X,), graphs=1)


def test_tensor_type_same_dtype_is_the_tensor_itself(counting):
    def fn(x):
        return x.type(torch.float32) is x, x.type(torch.FloatTensor) * 2

    _calls(counting, fn, (X,), graphs=1)
