"""Passes: dead-code elimination, common-subexpression elimination, the tabular printer."""

import operator
import random

from kiln.fxgraph import (
    Graph,
    GraphModule,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    format_graph_table,
    is_impure,
    register_impure,
)


def test_dce_removes_dead_chains_and_keeps_effects_and_inputs():
    g = Graph()
    x = g.placeholder("x")
    unused = g.placeholder("unused")
    dead1 = g.call_function(operator.add, (x, 1))
    g.call_function(operator.mul, (dead1, 2))  # dead chain
    g.call_function(print, ("kept",))
    g.call_method("append", (x, 3))
    g.call_function(operator.setitem, (x, 0, 7))
    live = g.call_function(len, (x,))
    g.output(live)
    assert eliminate_dead_code(g) == 2
    assert [n.name for n in g.nodes] == ["x", "unused", "print_1", "append", "setitem", "len_1", "output"]
    assert unused.op == "placeholder"
    g.lint()
    box = [1]
    assert GraphModule({}, g)(box, None) == 2 and box == [7, 3]


def test_dce_respects_registered_impure_targets():
    calls = []

    def log(v):
        calls.append(v)
        return v

    g = Graph()
    x = g.placeholder("x")
    g.call_function(log, (x,))
    g.output(x)
    assert eliminate_dead_code(g) == 1  # not registered: removed
    g = Graph()
    x = g.placeholder("x")
    n = g.call_function(register_impure(log), (x,))
    g.output(x)
    assert is_impure(n)
    assert eliminate_dead_code(g) == 0
    GraphModule({}, g)(5)
    assert calls == [5]


def test_inplace_method_names_are_impure():
    g = Graph()
    x = g.placeholder("x")
    assert is_impure(g.call_method("add_", (x, 1)))
    assert not is_impure(g.call_method("add", (x, 1)))
    assert not is_impure(g.call_method("__add__", (x, 1)))


def test_calls_writing_into_an_out_argument_are_impure():
    # torch.mm(a, b, out=view): nothing uses the result, the write into ``out`` is the point
    g = Graph()
    x = g.placeholder("x")
    assert is_impure(g.call_function(operator.add, (x, 1), {"out": x}))
    assert is_impure(g.call_method("mm", (x, x), {"out": x}))
    assert not is_impure(g.call_function(operator.add, (x, 1), {"alpha": 2}))


def test_cse_merges_equal_pure_nodes():
    g = Graph()
    x = g.placeholder("x")
    a1 = g.call_function(operator.add, (x, 1))
    a2 = g.call_function(operator.add, (x, 1))
    b1 = g.call_function(operator.mul, (a1, (2, [3])))
    b2 = g.call_function(operator.mul, (a2, (2, [3])))
    g.output((b1, b2))
    assert eliminate_common_subexpressions(g) == 2
    assert [n.name for n in g.nodes] == ["x", "add", "mul", "output"]
    g.lint()
    assert GraphModule({}, g)(1) == ((2, [3]) * 2, (2, [3]) * 2)


def test_cse_keeps_constants_of_different_types_apart():
    g = Graph()
    x = g.placeholder("x")
    outs = [g.call_function(operator.truediv, (x, c)) for c in (1, 1.0, True, 0.0, -0.0)]
    g.output(tuple(outs))
    assert eliminate_common_subexpressions(g) == 0


def test_cse_never_merges_impure_or_module_calls():
    g = Graph()
    x = g.placeholder("x")
    p1 = g.call_function(print, (x,))
    p2 = g.call_function(print, (x,))
    m1 = g.call_module("m", (x,))
    m2 = g.call_module("m", (x,))
    g.output((p1, p2, m1, m2))
    assert eliminate_common_subexpressions(g) == 0


def test_cse_skips_unhashable_arguments():
    class Unhashable:
        __hash__ = None

    g = Graph()
    x = g.placeholder("x")
    u = Unhashable()
    g.output((g.call_function(operator.is_, (x, u)), g.call_function(operator.is_, (x, u))))
    assert eliminate_common_subexpressions(g) == 0


def test_tabular_printer():
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_function(operator.add, (x, 1)))
    table = format_graph_table(g)
    lines = table.splitlines()
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert lines[2].split() == ["placeholder", "x", "x", "()", "{}"]
    assert lines[3].split() == ["call_function", "add", "operator.add", "(%x,", "1)", "{}"]
    assert lines[4].split() == ["output", "output", "output", "(%add,)", "{}"]
    assert len({len(line) for line in lines[:2]}) == 1


def test_dce_and_cse_preserve_results_on_random_programs():
    rng = random.Random(0)
    ops = [operator.add, operator.sub, operator.mul, max, min]
    for _ in range(50):
        g = Graph()
        vals = [g.placeholder(f"p{i}") for i in range(3)]
        for _ in range(30):
            fn = rng.choice(ops)
            a, b = rng.choice(vals), rng.choice([*vals, 2, 3])
            vals.append(g.call_function(fn, (a, b)))
        g.output(tuple(rng.sample(vals, 3)))
        gm = GraphModule({}, g)
        inputs = [rng.randint(-5, 5) for _ in range(3)]
        expected = gm(*inputs)
        eliminate_common_subexpressions(g)
        eliminate_dead_code(g)
        g.lint()
        assert GraphModule({}, g)(*inputs) == expected
