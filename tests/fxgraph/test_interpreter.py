"""Interpreter and Transformer: one dispatch, overridable per op."""

import math
import operator

import pytest

from kiln.fxgraph import Graph, GraphError, GraphModule, Interpreter, Transformer


def _gm():
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y", default=10)
    a = g.call_function(operator.add, (x, y))
    s = g.call_method("bit_length", (a,))
    k = g.get_attr("k")
    m = g.call_function(operator.mul, (s, k))
    g.output({"sum": a, "bits": m})
    return GraphModule({"k": 3}, g)


def test_interpreter_matches_generated_code_and_uses_defaults():
    gm = _gm()
    assert Interpreter(gm).run(5, 7) == gm(5, 7) == {"sum": 12, "bits": 12}
    assert Interpreter(gm).run(5) == gm(5)


def test_missing_input_is_an_error():
    g = Graph()
    g.output(g.placeholder("x"))
    with pytest.raises(TypeError, match="missing value for graph input 'x'"):
        Interpreter(GraphModule({}, g)).run()


def test_override_one_op_and_record_every_node():
    class Swap(Interpreter):
        def __init__(self, gm):
            super().__init__(gm)
            self.seen = []

        def run_node(self, n):
            self.seen.append(n.name)
            return super().run_node(n)

        def call_function(self, target, args, kwargs):
            if target is operator.add:
                return operator.sub(*args)
            return super().call_function(target, args, kwargs)

    interp = Swap(_gm())
    assert interp.run(20, 4) == {"sum": 16, "bits": 15}
    assert interp.seen == ["x", "y", "add", "bit_length", "k", "mul", "output"]


def test_values_are_released_after_last_use():
    released = []

    class Watch(Interpreter):
        def run_node(self, n):
            released.append(set(self.env))
            return super().run_node(n)

    gm = _gm()
    Watch(gm).run(1, 2)
    names = [{n.name for n in env} for env in released]
    # by the time ``mul`` runs, ``x``, ``y`` and ``bit_length``'s input are gone except ``add``
    assert names[5] == {"add", "bit_length", "k"}


def test_interpreter_on_graph_without_module():
    g = Graph()
    g.output(g.call_function(math.sqrt, (g.placeholder("x"),)))
    assert Interpreter(graph=g).run(9.0) == 3.0
    g2 = Graph()
    g2.output(g2.get_attr("w"))
    with pytest.raises(GraphError, match="has no module"):
        Interpreter(graph=g2).run()


def test_transformer_rewrites_and_keeps_names_and_meta():
    gm = _gm()
    for n in gm.graph.nodes:
        n.meta["tag"] = n.name

    class AddToSub(Transformer):
        def call_function(self, target, args, kwargs):
            if target is operator.add:
                return self.new_graph.call_function(operator.sub, args, kwargs)
            return super().call_function(target, args, kwargs)

    new = AddToSub(gm).transform()
    new.graph.lint(new)
    assert new(20, 4) == {"sum": 16, "bits": 15}
    assert gm(20, 4) == {"sum": 24, "bits": 15}
    names = [n.name for n in new.graph.nodes]
    assert names == ["x", "y", "sub", "bit_length", "k", "mul", "output"]
    assert all(n.meta["tag"] for n in new.graph.nodes if n.op != "output")
    assert new.graph.find_nodes("placeholder")[1].args == (10,)


def test_identity_transformer_reproduces_the_code():
    gm = _gm()
    assert Transformer(gm).transform().code == gm.code
