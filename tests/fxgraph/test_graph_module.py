"""GraphModule: attributes, generated forward, recompile, copying and pickling."""

import copy
import math
import operator
import pickle

import pytest

from kiln.fxgraph import Graph, GraphError, GraphModule


class Scale:
    """A picklable callable attribute (module level)."""

    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k


def _module():
    g = Graph()
    x = g.placeholder("x")
    w = g.get_attr("layer1.weight")
    b = g.get_attr("bias")
    s = g.call_module("layer1.scale", (x,))
    y = g.call_function(operator.add, (g.call_function(operator.mul, (s, w)), b))
    g.output(y)
    return GraphModule({"layer1.weight": 3, "layer1.scale": Scale(2), "bias": 1}, g, "Small")


def test_attributes_and_call():
    gm = _module()
    assert gm(5) == 5 * 2 * 3 + 1
    assert gm.layer1.weight == 3 and gm.bias == 1
    assert gm.get_attr("layer1.scale").k == 2
    assert gm.has_attr("layer1.weight") and not gm.has_attr("layer1.missing")
    assert "w = self.layer1.weight" not in gm.code and "self.layer1.weight" in gm.code
    assert "self.layer1.scale(x)" in gm.code
    assert type(gm).__name__ == "Small"
    gm.graph.lint(gm)
    assert gm.forward(1) == 7


def test_each_instance_has_its_own_code():
    a = _module()
    g = Graph()
    g.output(g.call_function(operator.neg, (g.placeholder("x"),)))
    b = GraphModule({}, g)
    assert a(5) == 31 and b(5) == -5
    assert type(a) is not type(b)
    assert isinstance(a, GraphModule) and isinstance(b, GraphModule)


def test_recompile_after_editing_the_graph():
    gm = _module()
    out = gm.graph.output_node
    with gm.graph.inserting_before(out):
        neg = gm.graph.call_function(operator.neg, (out.args[0],))
    out.args = (neg,)
    assert gm(5) == 31  # stale until recompiled
    src = gm.recompile()
    assert "neg = -add" in src
    assert gm(5) == -31


def test_attribute_names_are_checked():
    g = Graph()
    g.output(None)
    for bad in ("graph", "code", "forward", "_private", "a..b", ""):
        with pytest.raises(GraphError, match="invalid attribute name"):
            GraphModule({bad: 1}, g)


def test_installing_never_overwrites_a_given_object():
    g = Graph()
    g.output(None)
    owner = Scale(1)
    GraphModule({"m": owner, "m.k": 1}, g)  # the same value: fine
    with pytest.raises(GraphError, match="would overwrite 'k'"):
        GraphModule({"m": owner, "m.k": 5}, g)
    assert owner.k == 1


def test_numeric_path_components_use_getattr():
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_module("layers.0", (x,)))
    gm = GraphModule({"layers.0": Scale(4)}, g)
    assert "getattr(self.layers, '0')(x)" in gm.code
    assert gm(2) == 8


def test_deepcopy_copies_attributes():
    gm = _module()
    clone = copy.deepcopy(gm)
    assert clone(5) == 31
    assert clone.get_attr("layer1.scale") is not gm.get_attr("layer1.scale")
    clone.get_attr("layer1.scale").k = 10
    assert gm(5) == 31 and clone(5) == 151
    assert clone.code == gm.code
    shallow = copy.copy(gm)
    assert shallow.get_attr("layer1.scale") is gm.get_attr("layer1.scale")


def test_pickle_round_trip():
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_function(math.floor, (g.call_function(operator.mul, (x, g.get_attr("k"))),)))
    gm = GraphModule({"k": 2.5, "scale": Scale(3)}, g, "Pickled")
    back = pickle.loads(pickle.dumps(gm))
    assert back(3) == 7 and back.code == gm.code and type(back).__name__ == "Pickled"
    assert back.scale.k == 3


def test_unpicklable_target_gives_a_clear_error():
    g = Graph()
    g.output(g.call_function(lambda v: v, (g.placeholder("x"),)))
    gm = GraphModule({}, g)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError), match="lambda"):
        pickle.dumps(gm)


def test_graph_type_is_checked():
    with pytest.raises(GraphError, match=r"needs a kiln\.fxgraph\.Graph"):
        GraphModule({}, "not a graph")
