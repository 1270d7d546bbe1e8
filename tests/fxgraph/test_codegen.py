"""Generated Python source: readable, correct for every kind of argument, no name clashes."""

import math
import operator
import sys
from collections import namedtuple

import pytest

from kiln.fxgraph import Graph, GraphError, GraphModule

Pair = namedtuple("Pair", ["a", "b"])


def _gm(build):
    g = Graph()
    build(g)
    g.lint()
    return GraphModule({}, g)


def test_infix_operators_and_freeing_after_last_use():
    def build(g):
        x = g.placeholder("x")
        y = g.placeholder("y")
        a = g.call_function(operator.add, (x, y))
        b = g.call_function(operator.mul, (a, 2))
        c = g.call_function(operator.getitem, (b, slice(1, None)))
        d = g.call_function(operator.not_, (c,))
        g.output((c, d))

    gm = _gm(build)
    assert gm.code == (
        "def forward(x, y):\n"
        "    add = x + y\n"
        "    mul = add * 2;  del add\n"
        "    getitem = mul[1:];  del mul\n"
        "    not_ = not getitem\n"
        "    return (getitem, not_)\n"
    )
    assert gm([1, 2], [3]) == ([2, 3, 1, 2, 3], False)


def test_every_binary_and_unary_operator_matches_python():
    binary = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
              operator.mod, operator.pow, operator.and_, operator.or_, operator.xor,
              operator.lshift, operator.rshift, operator.eq, operator.ne, operator.lt,
              operator.le, operator.gt, operator.ge, operator.is_, operator.is_not]
    def outcome(f, *args):
        try:
            return f(*args)
        except Exception as e:  # the generated code must fail the same way
            return type(e)

    for fn in binary:
        for a, b in [(7, 3), (-7, 2), (5, -1), (3, 0)]:
            g = Graph()
            x = g.placeholder("x")
            g.output(g.call_function(fn, (x, b)))
            assert outcome(GraphModule({}, g), a) == outcome(fn, a, b), (fn, a, b)
            g = Graph()
            y = g.placeholder("y")
            g.output(g.call_function(fn, (a, y)))  # a negative constant on the left of **
            assert outcome(GraphModule({}, g), b) == outcome(fn, a, b), (fn, a, b)
    for fn in (operator.neg, operator.pos, operator.invert, operator.not_):
        g = Graph()
        x = g.placeholder("x")
        g.output(g.call_function(fn, (x,)))
        assert GraphModule({}, g)(5) == fn(5)
        g = Graph()
        g.output(g.call_function(fn, (-5,)))
        assert GraphModule({}, g)() == fn(-5)


def test_constants_render_and_round_trip():
    values = [None, True, 0, -3, 2**70, 1.5, -0.0, math.inf, -math.inf, 1e-300, 3 + 4j,
              complex(math.inf, -1), "a'b\"c\n", b"\x00\xff", Ellipsis,
              (1,), (), [1, [2]], {"k": (1, 2), 3: None}, slice(1, None, -1)]
    for v in values:
        g = Graph()
        g.output(v)
        out = GraphModule({}, g)()
        assert out == v and type(out) is type(v), v
        if isinstance(v, float):
            assert math.copysign(1, out) == math.copysign(1, v)
    g = Graph()
    g.output(math.nan)
    assert math.isnan(GraphModule({}, g)())


def test_non_literal_objects_reached_by_import_path_or_private_global():
    local_value = object()

    def build(g):
        x = g.placeholder("x")
        s = g.call_function(math.sqrt, (x,))
        f = g.call_function(math.floor, (s,))
        g.output((f, local_value, Pair(a=f, b=2)))

    gm = _gm(build)
    assert "math.sqrt(x)" in gm.code and "math.floor(sqrt)" in gm.code
    assert "Pair(floor, 2)" in gm.code
    assert gm(10.0) == (3, local_value, Pair(3, 2))


def test_getattr_renders_as_attribute_and_methods():
    def build(g):
        x = g.placeholder("x")
        r = g.call_function(getattr, (x, "real"))
        u = g.call_method("conjugate", (x,))
        s = g.call_function(getattr, (x, "not an identifier", 7))
        g.output((r, u, s))

    gm = _gm(build)
    assert "real = x.real" in gm.code
    assert "conjugate = x.conjugate()" in gm.code
    assert gm(3 + 4j) == (3.0, 3 - 4j, 7)


def test_globals_never_collide_with_node_names():
    def build(g):
        math_ = g.placeholder("math")
        max_ = g.placeholder("max")
        s = g.call_function(math.sqrt, (math_,))
        m = g.call_function(max, (s, max_))
        g.output(m)

    gm = _gm(build)
    assert gm(16.0, 1.0) == 4.0
    assert gm(16.0, 9.0) == 9.0
    assert "def forward(math, max):" in gm.code


def test_kwargs_defaults_and_unused_inputs():
    def build(g):
        x = g.placeholder("x")
        g.placeholder("unused")
        k = g.placeholder("key", default=None)
        s = g.call_function(sorted, (x,), {"key": k, "reverse": True})
        g.output(s)

    gm = _gm(build)
    assert "def forward(x, unused, key=None):" in gm.code
    assert gm([1, 3, 2], 0) == [3, 2, 1]
    assert gm(["aa", "b"], 0, key=len) == ["aa", "b"]


def test_placeholder_order_with_defaults_is_checked():
    g = Graph()
    g.placeholder("a", default=1)
    g.placeholder("b")
    g.output(None)
    with pytest.raises(GraphError, match="without a default follows"):
        GraphModule({}, g)


def test_side_effect_without_users_is_a_statement():
    g = Graph()
    x = g.placeholder("x")
    g.call_function(operator.setitem, (x, 0, 9))
    g.output(x)
    gm = GraphModule({}, g)
    assert "    operator.setitem(x, 0, 9)\n" in gm.code
    box = [1]
    assert gm(box) == [9] and box == [9]


def test_tracebacks_show_generated_source():
    import traceback

    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_function(operator.truediv, (1, x)))
    gm = GraphModule({}, g)
    try:
        gm(0)
    except ZeroDivisionError:
        text = traceback.format_exc()
    assert "truediv = 1 / x" in text
    assert sys.exc_info() == (None, None, None)


def test_boxed_code_empties_its_list_and_frees_each_input_after_its_last_use():
    import weakref

    class Box:
        pass

    alive: list = []

    def a_is_gone(_):
        return alive[0]() is None

    g = Graph()
    a, b, _unused = g.placeholder("a"), g.placeholder("b"), g.placeholder("unused")
    first = g.call_function(type, (a,))
    second = g.call_function(a_is_gone, (b,))
    g.output((first, second))
    assert g.python_code(boxed=True).src.splitlines()[1].strip() == "a, b, unused = args;  args.clear();  del unused"
    fn = GraphModule({}, g).boxed_forward()
    assert fn.boxed_call is True
    box = Box()
    alive.append(weakref.ref(box))
    args = [box, 0, Box()]
    del box
    assert fn(args) == (Box, True) and args == []  # `a` freed after its last use, before `b`'s op
    box = Box()
    alive[0] = weakref.ref(box)
    assert GraphModule({}, g)(box, 0, None) == (Box, False)  # unboxed: the caller holds its inputs
    with pytest.raises(GraphError, match="default"):
        g2 = Graph()
        g2.placeholder("x", default=1)
        g2.output(None)
        g2.python_code(boxed=True)


def _keywords(**kw):
    return sorted(kw.items())


def test_keyword_arguments_named_like_python_keywords():
    # aten.uniform's schema names an argument ``from``: ``f(from=1)`` is a SyntaxError
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_function(_keywords, (), {"x": x, "from": 1, "to": 2, "lambda": x}))
    gm = GraphModule({}, g)
    assert gm(7) == [("from", 1), ("lambda", 7), ("to", 2), ("x", 7)]
    assert "**{'from': 1, 'lambda': x}" in gm.code
