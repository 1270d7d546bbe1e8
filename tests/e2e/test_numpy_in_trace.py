"""numpy inside compiled functions (issue 13): numpy calls on ndarrays become torch ops of one
graph, results come back as ndarrays (or numpy scalars) where eager gives them, with eager's
dtypes; where no faithful translation exists (np.random, a dtype torch._numpy gets wrong, data
needed in Python) the graph breaks there and the results still equal eager's.

Each test compares with eager (dtype and type exactly, values to torch's default tolerances)
and asserts kiln's graph count, which is at most torch.compile's on the same function (run
beside it with a counting backend) except where torch.compile's single graph gives numbers
or types other than eager's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from e2e_support import CountingBackend, check_one_graph, clone_args

import kiln


def same(actual, expected, path="result"):
    """Equal structure and types; ndarrays and numpy scalars of the same dtype and shape, values
    to torch's default tolerances for that dtype (numpy sums pairwise, torch does not)."""
    assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
    if isinstance(expected, (np.ndarray, np.generic)):
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert np.shape(actual) == np.shape(expected), f"{path}: shape {np.shape(actual)} != {np.shape(expected)}"
        torch.testing.assert_close(torch.from_numpy(np.array(actual)), torch.from_numpy(np.array(expected)),
                                   msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            same(a, e, f"{path}[{i}]")
    elif isinstance(expected, float):
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def check(fn, *args, graphs=1, breaks=0, seed=None):
    """``fn`` compiled equals eager (twice: the second call runs the cache) with ``graphs``
    graphs and ``breaks`` graph breaks. ``seed``: numpy's global seed before each run."""
    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting)
    for _ in range(2):
        if seed is not None:
            np.random.seed(seed)
        expected = fn(*clone_args(args))
        if seed is not None:
            np.random.seed(seed)
        same(compiled(*clone_args(args)), expected)
    assert len(counting.graphs) == graphs
    assert len(kiln.session().stats.breaks) == breaks, kiln.session().stats.breaks
    return counting


def torch_graphs(fn, *args):
    """How many graphs torch.compile makes of ``fn`` (a counting backend, eager runs)."""
    counting = CountingBackend()
    torch._dynamo.reset()
    try:
        torch.compile(fn, backend=counting)(*clone_args(args))
    finally:
        torch._dynamo.reset()
    return len(counting.graphs)


def floats(*shape, dtype=np.float32, seed=0):
    return np.random.RandomState(seed).rand(*shape).astype(dtype) + 0.5


def test_the_issue_round_trip_tensor_numpy_math_tensor_is_one_graph():
    def fn(x):
        a = x.numpy()
        b = np.exp(a) + np.ones_like(a) * 2
        return torch.from_numpy(b).sum() + float(np.finfo(np.float32).eps)

    x = torch.randn(4)
    check(fn, x)
    assert torch_graphs(fn, x) == 1


def test_numpy_of_a_tensor_and_from_numpy_share_memory_as_in_eager():
    def fn(x):
        a = (x * 2).numpy()
        a += 1  # changes the tensor a is over
        t = torch.from_numpy(a)
        t.mul_(3)  # and t changes a
        return a, t

    counting = CountingBackend()
    compiled = check_one_graph(counting, fn, torch.randn(3))
    a, t = compiled(torch.randn(3))
    t.add_(1)  # the returned array and tensor still share memory
    torch.testing.assert_close(torch.from_numpy(a), t)


def test_numpy_of_an_input_tensor_changes_it_in_place():
    def fn(x):
        a = x.numpy()
        a *= 2
        return np.sin(a)

    x = torch.randn(5)
    y = x.clone()
    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting)
    same(compiled(x), fn(y))
    torch.testing.assert_close(x, y)
    assert len(counting.graphs) == 1


def test_numpy_of_a_tensor_that_requires_grad_breaks_and_raises_like_eager():
    def fn(x):
        y = x * 2
        return y.numpy()

    compiled = kiln.compile(fn, backend=CountingBackend())
    with pytest.raises(RuntimeError, match="requires grad"):
        compiled(torch.randn(3, requires_grad=True))


def test_numpy_of_a_tensor_whose_size_changes_is_traced_for_each_size_without_breaks():
    def fn(x):
        a = x.numpy()
        return torch.from_numpy(np.cumsum(a) * a.shape[0])

    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting)
    for n in (4, 5, 4):
        x = torch.randn(n)
        same(compiled(x), fn(x))
    # the second size makes x dynamic; numpy code specializes it (a guard), so 4 reuses the first graph
    assert len(counting.graphs) == 2
    assert kiln.session().stats.breaks == []


def test_float_of_a_numpy_scalar_breaks_at_the_call():
    def fn(a):
        return float(np.sum(a)) + 1  # needs the value in Python: eager's float() after the graph

    check(fn, floats(3, 4), graphs=1, breaks=1)


def test_ndarray_inputs_are_graph_inputs_and_results_are_ndarrays():
    def fn(a):
        return np.sin(a).sum(axis=0) * 2

    a = floats(3, 4)
    counting = check(fn, a)
    assert [n.op for n in counting.graphs[0].graph.nodes].count("placeholder") == 1
    assert torch_graphs(fn, a) == 1


def test_ndarray_inputs_are_guarded_on_dtype_and_shape():
    def fn(a):
        return a * 2 + 1

    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting)
    for arr in (floats(3, 4), floats(3, 4, seed=1), floats(3, 4, dtype=np.float64), floats(5, 4),
                floats(3, 4).astype(np.int64)):
        same(compiled(arr), fn(arr))
    # same dtype and shape reuse the graph; float64, a new shape and int64 recompile
    assert len(counting.graphs) == 4
    assert kiln.session().stats.breaks == []


def test_an_ndarray_input_changed_in_place_is_changed_for_the_caller():
    def fn(a, b):
        a += b
        a[0] = -1.0
        np.multiply(a, 2, out=a)
        return a

    a, b = floats(4), floats(4, seed=1)
    expected_a = a.copy()
    fn(expected_a, b)
    compiled = kiln.compile(fn, backend=CountingBackend())
    result = compiled(a, b)
    assert result is a
    same(a, expected_a)


def test_ufuncs_operators_and_comparisons_keep_numpy_dtypes():
    def fn(a, b, i):
        return (np.sin(a), np.exp(b), np.add(a, b), np.maximum(a, b), a - b, a / b, a ** 2, -a, abs(a),
                a > b, a == b, a * i, i + 1, np.sqrt(i), a + 1.5, i * 2.5)

    check(fn, floats(3, 4), floats(3, 4, seed=1), np.arange(12, dtype=np.int32).reshape(3, 4))


def test_reductions_with_axis_and_keepdims_and_numpy_scalars():
    def fn(a, i):
        return (a.sum(axis=0), a.mean(axis=1, keepdims=True), a.max(), np.sum(a, axis=1),
                np.max(a, axis=0, keepdims=True), a.sum(), np.mean(i), i.sum(), a.min(axis=-1), np.sin(a).sum() * 2)

    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    result = kiln.compile(fn, backend=CountingBackend())(floats(3, 4), i)
    assert type(result[2]) is np.float32 and type(result[6]) is np.float64 and type(result[7]) is np.int64
    kiln.reset()
    check(fn, floats(3, 4), i)


def test_factories_use_numpy_default_dtypes():
    def fn(a):
        return (np.ones_like(a), np.zeros_like(a), np.ones((2, 3)), np.zeros(4, dtype=np.float32), np.arange(5),
                np.arange(1.0, 3.0, 0.5), np.zeros_like(a, dtype=np.int64) + a.shape[0])

    a = floats(3, 4)
    check(fn, a)
    assert torch_graphs(fn, a) == 1


def test_reshape_transpose_and_indexing():
    def fn(a):
        b = a.reshape(4, 3)
        return (b, a.T, a.transpose(1, 0), a[0], a[:, 1], a[1:, ::2], a[0, 1], a[None, ..., 1], a.shape, a.ndim,
                a.size, np.transpose(a) @ a, a.flatten(), a[np.array([2, 0])])

    check(fn, floats(3, 4))


def test_an_element_read_is_a_copy_and_a_slice_is_a_view_as_in_eager():
    def fn(a):
        x = a[0, 1]
        row = a[0]
        a[0, 1] = 100.0
        return x, row, a.astype(np.float32) is a

    check(fn, floats(2, 3))


def test_a_reversed_slice_a_view_in_numpy_but_a_copy_in_torch_runs_eagerly():
    def fn(a):
        r = a[::-1]
        r[0] = 0.0  # writes a's last element
        return a * 2

    # torch.compile makes one graph here whose result misses the write
    check(fn, floats(4), graphs=0, breaks=2)


def test_iinfo_and_finfo_are_constants_at_trace_time():
    def fn(a, i):
        eps = np.finfo(a.dtype).eps
        top = np.iinfo(np.int32).max
        return a + eps * 4, np.minimum(i, top - 1), np.finfo(np.float64).tiny > 0, int(np.iinfo(i.dtype).bits)

    # (torch.compile runs this function eagerly: it does not trace ``ndarray.dtype``)
    counting = check(fn, floats(3), np.arange(3, dtype=np.int32))
    assert not any("finfo" in str(n.target) for n in counting.graphs[0].graph.nodes)


def test_dtype_objects_comparisons_and_astype():
    def fn(a):
        b = a.astype(np.float64)
        c = a.astype(np.int32)
        if a.dtype == np.float32 and b.dtype != a.dtype:  # decided at trace time
            d = b * np.float32(2.5)
        else:
            d = b
        return b, c, d, a.astype(float), str(a.dtype), np.dtype("float16"), np.float32(2.5) * a, np.float32(3)

    a = floats(3)
    check(fn, a)
    assert torch_graphs(fn, a) == 1


def test_numpy_random_under_a_seed_breaks_at_each_call_and_gives_eagers_numbers():
    def fn(x):
        np.random.seed(1)
        a = np.random.rand(3)
        return x + torch.from_numpy(a)

    # seed and rand run eagerly (two breaks, no op before either): the only graph is the add
    check(fn, torch.randn(3, dtype=torch.float64), graphs=1, breaks=2, seed=0)


def test_numpy_random_between_tensor_ops_is_a_clean_break():
    def fn(x):
        y = x * 2
        a = np.random.randn(3)
        return y + torch.from_numpy(a) + torch.from_numpy(np.random.rand(3))

    # torch.compile makes one graph here, with numbers other than eager's; kiln breaks at each call
    check(fn, torch.randn(3, dtype=torch.float64), graphs=3, breaks=2, seed=0)


def test_numpy_random_with_fullgraph_raises_naming_the_call():
    def fn(x):
        return x + torch.from_numpy(np.random.rand(3))

    with pytest.raises(kiln.Unsupported, match="random"):
        kiln.compile(fn, fullgraph=True, backend=CountingBackend())(torch.randn(3, dtype=torch.float64))


def test_a_promotion_torch_numpy_gets_wrong_breaks_and_keeps_numpys_dtype():
    def fn(i):
        return i / 2, i + 1  # int32 / int: numpy gives float64 (torch._numpy float32)

    counting = check(fn, np.arange(4, dtype=np.int32), graphs=0, breaks=1)
    result = kiln.compile(fn, backend=counting)(np.arange(4, dtype=np.int32))
    assert result[0].dtype == np.float64


def test_arrays_and_numpy_scalars_cross_a_graph_break():
    @kiln.disable
    def opaque(v):
        return v

    def fn(a):
        b = np.cos(a) * 3
        s = b.sum()
        b, s = opaque(b), opaque(s)  # a break: both go on as numpy values
        return b - s, s * 2, type(s)

    check(fn, floats(2, 3), graphs=2, breaks=2)


def test_a_branch_on_array_data_breaks_at_the_jump():
    def fn(a):
        b = a * 2
        if (b > 1).any():
            return b + 1
        return b - 1

    check(fn, floats(4), graphs=2, breaks=1)


def test_a_numpy_function_without_translation_breaks_there():
    def fn(a):
        b = a + 1
        bits = np.packbits(b > 1.2)  # torch._numpy has no packbits
        return b * 2, bits + 1

    check(fn, floats(6), graphs=2, breaks=1)


def test_a_numpy_result_of_data_dependent_size_breaks_there():
    def fn(i):
        j = i * 2
        counts = np.bincount(j)  # its length is the largest value plus one
        return counts, j - 1

    check(fn, np.array([0, 3, 1, 3]), graphs=2, breaks=1)


def test_graphs_run_through_aotgrad_and_inductor():
    def fn(x, a):
        b = x.numpy()
        c = np.sin(a).sum(axis=0, keepdims=True) * 2 + b
        c += 1
        return c, torch.from_numpy(c).sum(), c.astype(np.float64)[0, 1], a.T @ a

    for backend in ("aot_eager", "inductor"):
        kiln.reset()
        counting = CountingBackend(backend)
        compiled = kiln.compile(fn, backend=counting)
        args = (torch.randn(4), floats(3, 4))
        same(compiled(*clone_args(args)), fn(*clone_args(args)))
        assert len(counting.graphs) == 1 and counting.refused == []
        assert kiln.session().stats.breaks == []


def test_numpy_functions_written_in_python_are_never_roots():
    """After the break at a numpy call kiln does not translate (np.unique), numpy's own
    Python frames run as they are: two graphs and one break, as torch.compile gives."""

    def fn(x):
        y = x * 2
        u = np.unique(y.numpy().round())
        return torch.from_numpy(u) + 1

    x = torch.randn(10)
    counting = CountingBackend()
    torch.testing.assert_close(kiln.compile(fn, backend=counting)(x), fn(x))
    assert len(counting.graphs) == 2
    assert len(kiln.session().stats.breaks) == 1
