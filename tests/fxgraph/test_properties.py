"""Property tests on random graphs: every way of running a graph agrees, passes preserve results."""

import copy
import operator
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from kiln.fxgraph import (
    Graph,
    GraphModule,
    Interpreter,
    Node,
    eliminate_common_subexpressions,
    eliminate_dead_code,
)


def pack(*xs):
    return tuple(xs)


def clamp(x, lo=-1000, hi=1000):
    return max(lo, min(hi, x))


BINARY = [operator.add, operator.sub, max, min, operator.and_, operator.or_, operator.xor]
UNARY = [operator.neg, abs, operator.invert, clamp]


@st.composite
def programs(draw):
    """(graph builder steps, inputs): a random straight-line program over ints."""
    n_inputs = draw(st.integers(1, 4))
    steps = []
    n_values = n_inputs
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["binary", "unary", "mul", "pack", "method", "dup", "kw"]))
        pick = st.integers(0, n_values - 1)
        if kind == "binary":
            steps.append((kind, draw(st.sampled_from(BINARY)), draw(pick), draw(pick | st.integers(-3, 3).map(lambda c: ("const", c)))))
        elif kind == "unary":
            steps.append((kind, draw(st.sampled_from(UNARY)), draw(pick)))
        elif kind == "mul":
            steps.append((kind, draw(pick), draw(pick)))
        elif kind == "pack":
            steps.append((kind, draw(st.lists(pick, min_size=1, max_size=3)), draw(st.integers(0, 2))))
        elif kind == "method":
            steps.append((kind, draw(pick)))
        elif kind == "dup":
            steps.append((kind, draw(pick), draw(pick)))
        else:
            steps.append((kind, draw(pick), draw(st.integers(-50, 50)), draw(st.integers(50, 100))))
        n_values += 1
    outputs = draw(st.lists(st.integers(0, n_values - 1), min_size=1, max_size=4))
    inputs = draw(st.lists(st.integers(-100, 100), min_size=n_inputs, max_size=n_inputs))
    return n_inputs, steps, outputs, inputs


def build(n_inputs, steps, outputs):
    """The graph of the program, and a plain-Python reference evaluator."""
    g = Graph()
    vals: list = [g.placeholder(f"x{i}") for i in range(n_inputs)]
    fns = []

    for step in steps:
        kind = step[0]
        if kind == "binary":
            _, fn, a, b = step
            if isinstance(b, tuple):
                node = g.call_function(fn, (vals[a], b[1]))
                fns.append(lambda env, fn=fn, a=a, c=b[1]: fn(env[a], c))
            else:
                node = g.call_function(fn, (vals[a], vals[b]))
                fns.append(lambda env, fn=fn, a=a, b=b: fn(env[a], env[b]))
        elif kind == "unary":
            _, fn, a = step
            node = g.call_function(fn, (vals[a],))
            fns.append(lambda env, fn=fn, a=a: fn(env[a]))
        elif kind == "mul":
            _, a, b = step
            node = g.call_function(clamp, (g.call_function(operator.mul, (vals[a], vals[b])),))
            fns.append(lambda env, a=a, b=b: clamp(env[a] * env[b]))
        elif kind == "pack":
            _, items, k = step
            t = g.call_function(pack, tuple([vals[i], {"n": [vals[i]]}] for i in items))
            node = g.call_function(operator.getitem, (g.call_function(operator.getitem, (t, min(k, len(items) - 1))), 0))
            fns.append(lambda env, items=items, k=k: env[items[min(k, len(items) - 1)]])
        elif kind == "method":
            _, a = step
            node = g.call_method("bit_length", (vals[a],))
            fns.append(lambda env, a=a: env[a].bit_length())
        elif kind == "dup":
            _, a, b = step
            first = g.call_function(operator.sub, (vals[a], vals[b]))
            second = g.call_function(operator.sub, (vals[a], vals[b]))  # CSE fodder
            node = g.call_function(operator.add, (first, second))
            fns.append(lambda env, a=a, b=b: 2 * (env[a] - env[b]))
        else:
            _, a, lo, hi = step
            node = g.call_function(clamp, (vals[a],), {"lo": lo, "hi": hi})
            fns.append(lambda env, a=a, lo=lo, hi=hi: clamp(env[a], lo=lo, hi=hi))
        vals.append(node)
    g.output({"out": [vals[i] for i in outputs]})

    def reference(*inputs):
        env = list(inputs)
        for fn in fns:
            env.append(fn(env))
        return {"out": [env[i] for i in outputs]}

    return g, reference


@settings(max_examples=150, deadline=None)
@given(programs())
def test_codegen_interpreter_and_reference_agree(program):
    n_inputs, steps, outputs, inputs = program
    g, reference = build(n_inputs, steps, outputs)
    g.lint()
    gm = GraphModule({}, g)
    expected = reference(*inputs)
    assert gm(*inputs) == expected
    assert Interpreter(gm).run(*inputs) == expected
    assert GraphModule({}, copy.deepcopy(g))(*inputs) == expected


@settings(max_examples=150, deadline=None)
@given(programs())
def test_dce_and_cse_preserve_results(program):
    n_inputs, steps, outputs, inputs = program
    g, reference = build(n_inputs, steps, outputs)
    expected = reference(*inputs)
    before = len(g.nodes)
    removed = eliminate_common_subexpressions(g)
    g.lint()
    assert GraphModule({}, g)(*inputs) == expected
    dead = eliminate_dead_code(g)
    g.lint()
    assert GraphModule({}, g)(*inputs) == expected
    assert len(g.nodes) == before - removed - dead
    # after CSE no two pure nodes compute the same thing
    assert eliminate_common_subexpressions(g) == 0
    # after DCE every non-placeholder, non-output node is used
    assert all(n.users for n in g.nodes if n.op not in ("placeholder", "output"))


@settings(max_examples=50, deadline=None)
@given(programs())
def test_pickle_round_trip_preserves_results(program):
    n_inputs, steps, outputs, inputs = program
    g, reference = build(n_inputs, steps, outputs)
    gm = pickle.loads(pickle.dumps(GraphModule({}, g)))
    assert gm(*inputs) == reference(*inputs)
    assert all(isinstance(n, Node) for n in gm.graph.nodes)
