"""Node: argument bookkeeping, users kept exact, rewiring."""

import operator

import pytest

from kiln.fxgraph import Graph, GraphError, map_aggregate, map_arg


def _chain():
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    a = g.call_function(operator.add, (x, y))
    b = g.call_function(operator.mul, (a, {"k": [x, (a, slice(x, None, 2))]}))
    g.output(b)
    return g, x, y, a, b


def test_users_and_inputs_follow_nested_arguments():
    g, x, _y, a, b = _chain()
    assert list(x.users) == [a, b]
    assert list(a.users) == [b]
    assert b.all_input_nodes == [a, x]
    assert list(b.users) == [g.output_node]


def test_assigning_args_updates_users_incrementally():
    g, x, y, a, b = _chain()
    b.args = (y, 3)
    assert b not in a.users and b not in x.users
    assert list(y.users) == [a, b]
    b.kwargs = {"alpha": x}
    assert list(x.users) == [a, b]
    g.lint()


def test_replace_all_uses_with_rewrites_every_occurrence():
    g, _x, y, a, b = _chain()
    changed = a.replace_all_uses_with(y)
    assert changed == [b]
    assert b.args[0] is y and b.args[1]["k"][1][0] is y
    assert not a.users
    g.erase_node(a)
    g.lint()


def test_replace_all_uses_with_callback_can_keep_users():
    _g, x, y, a, b = _chain()
    assert x.replace_all_uses_with(y, delete_user_cb=lambda u: u is b) == [b]
    assert list(x.users) == [a]


def test_replace_input_with():
    _g, x, y, a, _b = _chain()
    a.replace_input_with(x, y)
    assert a.args == (y, y)
    assert a not in x.users and a in y.users


def test_node_of_another_graph_is_refused():
    _g1, x1, *_ = _chain()
    g2 = Graph()
    with pytest.raises(GraphError, match="belongs to another graph"):
        g2.call_function(operator.neg, (x1,))
    p = g2.placeholder("p")
    with pytest.raises(GraphError, match="another graph"):
        x1.replace_all_uses_with(p)


def test_erased_node_cannot_be_reused():
    g = Graph()
    x = g.placeholder("x")
    n = g.call_function(operator.neg, (x,))
    g.erase_node(n)
    with pytest.raises(GraphError, match="erased"):
        g.call_function(operator.neg, (n,))


def test_map_arg_keeps_structure_and_constants():
    _g, _x, _y, _a, b = _chain()
    out = map_arg(b.args, lambda n: n.name)
    assert out == ("a" if False else "add", {"k": ["x", ("add", slice("x", None, 2))]})
    assert map_aggregate((1, [2, {"a": 3}]), lambda v: v * 10) == (10, [20, {"a": 30}])


def test_format_node():
    g, x, _y, a, _b = _chain()
    assert a.format_node() == "%add : call_function[target=operator.add](args = (%x, %y))"
    assert x.format_node() == "%x : placeholder[x]"
    assert g.output_node.format_node() == "return %mul"
