"""Python side effects made before a graph op that raises at run time (an index out of range,
overlapping memory in ``index_add_``/``copy_``) happen under kiln as in eager: the same
exception type, the same globals, lists, dicts, attributes and printed lines. When nothing
raises, the compiled function still gives eager's outputs and effects, in one graph.

Each case is ``fn(x, lst, d, obj, m, n, idx)``; ``idx`` is a tensor index, out of range in
the raising run and in range in the other one."""

import copy

import pytest
import torch
from e2e_support import eager_item
from torch import nn

import kiln

G = None
GT = torch.ones(3)


class Obj:
    def __init__(self):
        self.a = 0
        self.t = torch.ones(3)


class Mod(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))
        self.count = 0


def _state():
    """Fresh arguments (x, lst, d, obj, m) of one run."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=g)
    lst = [torch.randn(3, generator=g), torch.randn(3, generator=g), 7]
    d = {"a": torch.randn(4, 3, generator=g), "b": 2}
    return x, lst, d, Obj(), Mod()


def _global_store(x, lst, d, obj, m, n, idx):
    global G
    G = n
    return x[idx]


def _global_store_tensor(x, lst, d, obj, m, n, idx):
    global G
    G = x
    return x[idx] + 1


def _list_append(x, lst, d, obj, m, n, idx):
    lst.append(n)
    return x[idx]


def _list_pop(x, lst, d, obj, m, n, idx):
    v = lst.pop(0)
    return v, x[idx]


def _list_setitem(x, lst, d, obj, m, n, idx):
    lst[1] = x
    return x[idx]


def _list_slice_swap(x, lst, d, obj, m, n, idx):
    lst[0:2] = [lst[1], lst[0]]
    return x[idx]


def _dict_setitem(x, lst, d, obj, m, n, idx):
    d["k"] = n
    return x[idx]


def _dict_update(x, lst, d, obj, m, n, idx):
    d.update({"k": n, "b": x})
    return x[idx]


def _dict_pop(x, lst, d, obj, m, n, idx):
    d.pop("b")
    return x[idx]


def _attribute(x, lst, d, obj, m, n, idx):
    obj.a = n
    obj.t = x
    return x[idx]


def _module_attribute(x, lst, d, obj, m, n, idx):
    m.count = n
    return (x[idx] * m.w).detach()


def _print(x, lst, d, obj, m, n, idx):
    print("before", n, x)
    return x[idx]


def _everything(x, lst, d, obj, m, n, idx):
    global G
    G = n
    lst.append(n)
    obj.a = n
    d["k"] = n
    print("n is", n)
    x.add_(1)
    return x[idx]


def _index_add(x, lst, d, obj, m, n, idx):
    # overlapping memory: eager raises RuntimeError only when the source overlaps the target
    global G
    G = n
    lst.pop()
    src = d["a"][:2] if n > 2 else d["a"][2:].clone()
    d["a"].index_add_(0, torch.tensor([0, 2]), src)
    return x


def _copy_overlap(x, lst, d, obj, m, n, idx):
    v = lst.pop(0)
    obj.a = n
    src = d["a"][1:3] if n > 2 else d["a"][1:3].clone()
    d["a"][0:2].copy_(src)
    return v


def _global_read_then_rebound(x, lst, d, obj, m, n, idx):
    # the graph and the return value see the old GT, read before the store is replayed
    global GT
    y = GT
    GT = x
    return y, y[idx % 3] + x[idx].sum()


def _containers_made_in_trace(x, lst, d, obj, m, n, idx):
    global G
    G = [n, lst[0], (n, "a")]
    lst.append([1, {"k": n}])
    d["k"] = {"a": [n]}
    obj.a = [x, n]
    return x[idx]


def _after_ops_that_cannot_raise(x, lst, d, obj, m, n, idx):
    # float arithmetic, reductions, views and slices fail on no value: the effects eager
    # makes after them, before the indexing that raises, still happen
    global G
    y = (x * 2 + 1).relu()
    s = x.sum()
    z = d["a"][:2].transpose(0, 1)
    G = n
    lst.append(n)
    obj.a = n
    d["k"] = [n]
    print("after the float ops", n)
    return y[idx] + s, z


def _after_the_raising_op(x, lst, d, obj, m, n, idx):
    # eager raises before these effects: kiln must not make them either
    global G
    y = x[idx]
    G = n
    lst.append(n)
    obj.a = n
    print("not printed when the indexing raised")
    return y


def _after_an_integer_division(x, lst, d, obj, m, n, idx):
    # an integer division by zero raises (RuntimeError) when idx is 9
    global G
    q = x.long() // (idx - 9)
    G = n
    d.pop("b")
    return q


def _before_a_graph_break(x, lst, d, obj, m, n, idx):
    global G
    G = n
    lst.append(n)
    y = x[idx]
    v = eager_item(y.sum())  # a graph break: the second graph runs only when the first did not raise
    return y * v


CASES = [_after_ops_that_cannot_raise, _after_the_raising_op, _after_an_integer_division,
         _containers_made_in_trace, _global_read_then_rebound, _global_store, _global_store_tensor, _list_append, _list_pop, _list_setitem, _list_slice_swap,
         _dict_setitem, _dict_update, _dict_pop, _attribute, _module_attribute, _print, _everything,
         _index_add, _copy_overlap]


def _snapshot(result, args):
    """Everything a case can change, copied (tensors cloned), with the globals; a function
    stored in a list of ``G`` is called (compared by what it gives)."""
    x, lst, d, obj, m = args
    g = [v() if callable(v) else v for v in G] if isinstance(G, list) else G
    return copy.deepcopy({"result": result, "x": x, "lst": lst, "d": d, "obj.a": obj.a,
                          "obj.t": obj.t, "m.count": m.count, "G": g, "GT": GT,
                          "lst_is": [v is x for v in lst], "G_is_x": G is x, "obj.t_is_x": obj.t is x})


def _run(fn, n, idx, capsys):
    """(exception type or None, snapshot, printed text) of one call of ``fn``."""
    global G, GT
    G, GT = None, torch.ones(3)
    args = _state()
    error, result = None, None
    try:
        result = fn(*args, n, idx)
    except Exception as e:  # compared with eager's
        error = type(e)
    return error, _snapshot(result, args), capsys.readouterr().out


def _same(actual, expected, path="state"):
    assert type(actual) is type(expected), path
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), path
        for k in expected:
            _same(actual[k], expected[k], f"{path}[{k!r}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _compare(fn, n, idx, counting, capsys, graphs):
    want = _run(fn, n, idx, capsys)
    got = _run(kiln.compile(fn, backend=counting), n, idx, capsys)
    assert got[0] is want[0]
    _same(got[1], want[1])
    assert got[2] == want[2]
    assert len(counting.graphs) == graphs


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__.strip("_") for f in CASES])
def test_effects_before_a_raising_graph_happen(fn, counting, capsys):
    _compare(fn, 5, torch.tensor([9]), counting, capsys, 1)


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__.strip("_") for f in CASES])
def test_effects_when_nothing_raises(fn, counting, capsys):
    _compare(fn, 1, torch.tensor([2]), counting, capsys, 1)


@pytest.mark.parametrize("n,idx,graphs", [(5, torch.tensor([9]), 1), (1, torch.tensor([2]), 2)],
                         ids=["raises", "ok"])
def test_effects_before_a_graph_break(n, idx, graphs, counting, capsys):
    _compare(_before_a_graph_break, n, idx, counting, capsys, graphs)


def test_raising_graph_error_is_eager_error(counting, capsys):
    want = _run(_everything, 5, torch.tensor([9]), capsys)
    assert want[0] is IndexError and want[1]["G"] == 5 and want[1]["lst"][-1] == 5
    _compare(_everything, 5, torch.tensor([9]), counting, capsys, 1)


# --- effects made after a graph op, or needing one, stay after the graph ---------------------


def _effects_after_ops(x, lst, d, obj, m, n, idx):
    global G
    y = x + 1
    G = y
    lst.append(y)
    obj.a = n
    d["k"] = y.sum()
    return x[idx]


def _pop_then_read(x, lst, d, obj, m, n, idx):
    # the graph reads the list's old item 1 (the new item 0): read before the pop is replayed
    v = lst.pop(0)
    lst.append(n)
    return lst[0] * 2 + x[idx], v


def _write_then_read(x, lst, d, obj, m, n, idx):
    obj.t = x * 0 + n
    obj.a = n
    m.count = n
    return obj.t + obj.a + m.count + x[idx]


def _prefix_and_returned_list(x, lst, d, obj, m, n, idx):
    lst.insert(0, n)
    return [x[idx] + 1, n]


def _prefix_and_list_reading_it(x, lst, d, obj, m, n, idx):
    # the returned list, built after the graph, reads lst[0] as it was at entry
    global G
    G = [n, lst[0]]
    lst.insert(0, n)
    return [x[idx] + 1, lst[1]]


def _container_changed_after_a_safe_op(x, lst, d, obj, m, n, idx):
    # changed after an op that cannot fail, before the one that may: final before it
    global G
    inner = [n]
    G = inner
    obj.a = {"k": inner}
    y = x + 1
    inner.append(2)
    return y[idx]


def _container_changed_after_an_op(x, lst, d, obj, m, n, idx):
    # stored before the first op that may raise, changed after it: kept after the graph
    global G
    inner = [n]
    G = inner
    obj.a = {"k": inner}
    y = x[idx]
    inner.append(2)
    return y + 1


def _effect_after_an_in_place_op(x, lst, d, obj, m, n, idx):
    # an in-place op (out=) counts as one that may raise: the store after it stays after
    v = torch.sin(d["a"], out=d["a"])
    m.count += 1
    return v[idx]


def _function_made_in_trace(x, lst, d, obj, m, n, idx):
    # a function (and its closure cell) the trace made: rebuilt after the graph, as before
    global G
    k = n

    def g():
        return k

    G = [g]
    k = n + 1
    return x[idx] * g()


AROUND = {"function_made_in_trace": _function_made_in_trace, "container_changed_after_a_safe_op": _container_changed_after_a_safe_op,
          "container_changed_after_an_op": _container_changed_after_an_op,
          "effect_after_an_in_place_op": _effect_after_an_in_place_op, "effects_after_ops": _effects_after_ops, "pop_then_read": _pop_then_read,
          "write_then_read": _write_then_read, "prefix_and_returned_list": _prefix_and_returned_list,
          "prefix_and_list_reading_it": _prefix_and_list_reading_it}
# Effects kiln still replays after the graph (see _capture._split_effects): made after a graph
# op that may raise (a tensor index, an in-place op), storing a value the graph computes or a
# container changed after such an op, or sharing a name with a line built from the graph's
# outputs. When the graph raises, kiln raises eager's exception but these effects are lost.
AFTER_THE_GRAPH = {"function_made_in_trace", "container_changed_after_an_op", "effect_after_an_in_place_op", "effects_after_ops",
                   "write_then_read", "prefix_and_list_reading_it"}


@pytest.mark.parametrize("name", list(AROUND))
def test_effects_around_graph_ops(name, counting, capsys):
    _compare(AROUND[name], 1, torch.tensor([2]), counting, capsys, 1)


@pytest.mark.parametrize("name", [n for n in AROUND if n not in AFTER_THE_GRAPH])
def test_effects_around_graph_ops_when_the_graph_raises(name, counting, capsys):
    _compare(AROUND[name], 5, torch.tensor([9]), counting, capsys, 1)


@pytest.mark.parametrize("name", sorted(AFTER_THE_GRAPH))
def test_effects_kept_after_the_graph_raise_eagers_error(name, counting, capsys):
    want = _run(AROUND[name], 5, torch.tensor([9]), capsys)
    got = _run(kiln.compile(AROUND[name], backend=counting), 5, torch.tensor([9]), capsys)
    assert want[0] is IndexError and got[0] is IndexError
    assert len(counting.graphs) == 1


def test_print_of_a_tensor_changed_later(counting, capsys):
    # printed before the graph changes x: the values eager printed, in one graph
    def fn(x):
        print(x)
        x.add_(1)
        return x * 2

    want_x = torch.arange(3.0)
    want = fn(want_x)
    want_out = capsys.readouterr().out
    got_x = torch.arange(3.0)
    got = kiln.compile(fn, backend=counting)(got_x)
    assert capsys.readouterr().out == want_out
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_x, want_x)
    assert len(counting.graphs) == 1


GL = []


def _extend_then_overlapping_copy(y, obj, lst):
    v1 = obj.t[:]  # a slice of a symbolic-size tensor: cannot raise (its shape is guarded)
    GL.extend(lst)  # so this is made before the graph runs
    y[0:2].copy_(v1[1:3])  # overlapping memory when obj.t is y: raises at run time
    return y.sum()


@pytest.mark.parametrize("dynamic", [None, True])
def test_an_effect_before_a_raising_copy_is_kept_with_symbolic_sizes(dynamic):
    """Under dynamic=True the slice before the effect was judged "may raise" (its sizes are
    symbols), so the effect was replayed after the graph and lost when copy_ raised (fuzz
    seed 950106)."""
    compiled = kiln.compile(_extend_then_overlapping_copy, backend="eager", dynamic=dynamic)
    for shared in (True, False, True):
        results = []
        for fn in (_extend_then_overlapping_copy, compiled):
            GL.clear()
            y = torch.arange(12.0).view(4, 3)
            obj = Obj()
            obj.t = y if shared else y.clone()
            try:
                out, error = fn(y, obj, [1, 2]), None
            except RuntimeError as e:
                out, error = None, type(e)
            results.append((out, error, list(GL), y.clone()))
        (e_out, e_err, e_gl, e_y), (k_out, k_err, k_gl, k_y) = results
        assert (k_err, k_gl) == (e_err, e_gl), (dynamic, shared)
        torch.testing.assert_close(k_y, e_y)
        if e_out is not None:
            torch.testing.assert_close(k_out, e_out)
