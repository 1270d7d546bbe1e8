"""Graph: building, names, insertion points, erasing, lint, copying and pickling."""

import copy
import math
import operator
import pickle

import pytest

from kiln.fxgraph import Graph, GraphError, GraphModule, Node


def test_names_are_unique_and_readable():
    g = Graph()
    x = g.placeholder("x")
    names = [g.call_function(operator.add, (x, 1)).name for _ in range(3)]
    assert names == ["add", "add_1", "add_2"]
    assert g.call_method("view", (x, -1)).name == "view"
    assert g.get_attr("layer1.weight").name == "layer1_weight"
    assert g.call_function(max, (x, 1)).name == "max_1"  # never shadows a builtin
    assert g.call_function(math.sqrt, (x,)).name == "sqrt"


def test_requested_name_is_kept_or_made_unique():
    g = Graph()
    x = g.placeholder("x")
    assert g.create_node("call_function", operator.neg, (x,), name="hidden").name == "hidden"
    assert g.create_node("call_function", operator.neg, (x,), name="hidden").name == "hidden_1"


def test_duplicate_placeholder_is_refused():
    g = Graph()
    g.placeholder("x")
    with pytest.raises(GraphError, match="duplicate placeholder name 'x'"):
        g.placeholder("x")
    with pytest.raises(GraphError, match="identifier"):
        g.placeholder("not valid")
    with pytest.raises(GraphError, match="reserved"):
        g.placeholder("class")


def test_placeholder_may_take_a_builtin_name():
    g = Graph()
    inp = g.placeholder("input")
    g.output(g.call_function(len, (inp,)))
    gm = GraphModule({}, g)
    assert gm([1, 2, 3]) == 3


def test_bad_node_construction_is_refused():
    g = Graph()
    x = g.placeholder("x")
    with pytest.raises(GraphError, match="unknown op"):
        g.create_node("call_everything", operator.add)
    with pytest.raises(GraphError, match="callable"):
        g.call_function("not callable", (x,))
    with pytest.raises(GraphError, match="must be a str"):
        g.create_node("call_method", len, (x,))
    with pytest.raises(GraphError, match="args must be a tuple"):
        g.create_node("call_function", len, [x])
    g.output(x)
    with pytest.raises(GraphError, match="already has an output"):
        g.output(x)


def test_inserting_before_and_after_keep_creation_order():
    g = Graph()
    x = g.placeholder("x")
    last = g.call_function(operator.neg, (x,))
    g.output(last)
    with g.inserting_before(last):
        a = g.call_function(operator.add, (x, 1))
        b = g.call_function(operator.add, (a, 2))
    with g.inserting_after(x):
        c = g.call_function(operator.mul, (x, 3))
        d = g.call_function(operator.mul, (c, 4))
    assert [n.name for n in g.nodes] == ["x", "mul", "mul_1", "add", "add_1", "neg", "output"]
    assert (a, b, c, d) == tuple(g.nodes)[3:5] + tuple(g.nodes)[1:3]
    g.lint()
    # outside the context, nodes are appended at the end again
    g.erase_node(g.output_node)
    tail = g.call_function(operator.pos, (b,))
    assert list(g.nodes)[-1] is tail


def test_erase_refuses_used_node_and_reports_users():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.neg, (x,))
    g.call_function(operator.add, (a, x))
    with pytest.raises(GraphError, match="still used by add"):
        g.erase_node(a)
    with pytest.raises(GraphError, match="still used by neg, add"):
        g.erase_node(x)


def test_erase_while_iterating_and_len():
    g = Graph()
    x = g.placeholder("x")
    for i in range(5):
        g.call_function(operator.add, (x, i))
    assert len(g.nodes) == 6
    for n in g.nodes:
        if n.op == "call_function":
            g.erase_node(n)
    assert [n.name for n in g.nodes] == ["x"]
    assert len(g.nodes) == 1
    assert [n.name for n in reversed(g.nodes)] == ["x"]
    g.erase_node(x)
    # the name is free again after erasing
    assert g.placeholder("x").name == "x"


def test_move_nodes_with_prepend_and_append():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.neg, (x,))
    b = g.call_function(operator.pos, (x,))
    a.prepend(b)
    assert list(g.nodes) == [x, b, a]
    b.append(a)
    assert list(g.nodes) == [x, b, a]
    x.append(a)
    assert list(g.nodes) == [x, a, b]
    g.lint()


def _lint_error(g, match):
    with pytest.raises(GraphError, match=match):
        g.lint()


def test_lint_catches_use_before_definition():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.neg, (x,))
    b = g.call_function(operator.pos, (a,))
    a.prepend(b)
    _lint_error(g, "'pos' .* reads 'neg' before it is defined")


def test_lint_catches_output_not_last_and_broken_users():
    g = Graph()
    x = g.placeholder("x")
    out = g.output(x)
    x.prepend(out)
    _lint_error(g, "reads 'x' before it is defined|is not the last node")

    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.neg, (x,))
    del x.users[a]  # corrupt the bookkeeping on purpose
    _lint_error(g, "missing from the users of 'x'")


def test_lint_checks_attribute_targets_against_the_module():
    g = Graph()
    w = g.get_attr("w")
    g.output(w)
    GraphModule({"w": 1.0}, g).graph.lint(GraphModule({"w": 1.0}, g))
    gm = GraphModule({"v": 1.0}, g)
    with pytest.raises(GraphError, match="no attribute 'w'"):
        g.lint(gm)


def test_lint_catches_bad_names():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.neg, (x,))
    a.name = "x"
    _lint_error(g, "not a unique identifier")


def test_node_copy_and_graph_copy():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.add, (x, 1))
    a.meta["note"] = "kept"
    g.output({"out": [a]})
    g2 = Graph()
    env: dict[Node, Node] = {}
    out = g2.graph_copy(g, env)
    g2.output(out)
    g2.lint()
    assert env[a].meta == {"note": "kept"} and env[a].graph is g2
    assert GraphModule({}, g2)(4) == {"out": [5]}


def test_pickle_and_deepcopy_large_graph_without_recursion():
    g = Graph()
    v = g.placeholder("x")
    for _ in range(5000):
        v = g.call_function(operator.add, (v, 1))
    g.output(v)
    for clone in (pickle.loads(pickle.dumps(g)), copy.deepcopy(g)):
        clone.lint()
        assert len(clone.nodes) == len(g.nodes)
        assert GraphModule({}, clone)(0) == 5000
