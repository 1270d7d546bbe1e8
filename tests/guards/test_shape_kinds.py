"""ShapeRelation without torch: symbols bound to int-valued sources."""

import pytest
import sympy

from kiln.guards import GuardSet, ItemSource, LocalSource, ShapeRelation, evaluate

s0, s1 = sympy.symbols("s0 s1", integer=True)
A, B = LocalSource("a"), LocalSource("b")


def check_relation(expr, bindings, frames):
    guard = ShapeRelation(expr, bindings)
    check = GuardSet([guard]).compile()
    for frame in frames:
        expected = bool(expr.xreplace({sym: frame[str(src)[3:-2]] for sym, src in bindings.items()}))
        assert check(frame) is expected, (expr, frame)
        assert (evaluate(guard, frame) is None) is expected
    return guard, check


def test_relations_and_arithmetic():
    frames = [{"a": a, "b": b} for a in range(-3, 9) for b in range(-2, 7)]
    exprs = [
        sympy.Eq(s0, 2 * s1),
        sympy.Ne(s0 + 1, s1),
        sympy.Lt(s0 * s1, 12),
        sympy.Le(s0**2, s1 + 10),
        sympy.Gt(sympy.Mod(s0, 3), 0),
        sympy.Ge(sympy.floor(s0 / 2), s1),
        sympy.Eq(sympy.ceiling(sympy.Rational(2, 3) * s0), s1),
        sympy.And(sympy.Ge(s0, 2), sympy.Lt(s1, 5)),
        sympy.Or(sympy.Eq(s0, 0), sympy.Not(sympy.Eq(s1, 1))),
        sympy.Eq(sympy.Max(s0, s1) - sympy.Min(s0, s1), sympy.Abs(s0 - s1)),
    ]
    for expr in exprs:
        check_relation(expr, {s0: A, s1: B}, frames)


def test_generated_code_has_no_sympy():
    guard = ShapeRelation(sympy.Eq(sympy.floor(s0 / 2) * 2, s0), {s0: A})
    check = GuardSet([guard]).compile()
    code = "\n".join(line.split("#")[0] for line in check.source.splitlines())
    assert "sympy" not in code and "Eq" not in code
    assert check({"a": 4}) and not check({"a": 5})


def test_explanation_text():
    guard = ShapeRelation(sympy.Eq(s0, s1), {s0: A, s1: ItemSource(B, 0)})
    assert evaluate(guard, {"a": 3, "b": [3]}) is None
    assert evaluate(guard, {"a": 3, "b": [4]}) == (
        "shape relation Eq(s0, s1) (s0 = L['a'], s1 = L['b'][0]): "
        "expected True, got False with s0 = 3, s1 = 4"
    )


def test_bound_values_must_be_ints():
    guard = ShapeRelation(sympy.Ge(s0, 1), {s0: A})
    check = GuardSet([guard]).compile()
    for bad in (2.0, True, "2", None):
        assert check({"a": bad}) is False
        assert evaluate(guard, {"a": bad}) is not None


def test_negative_integer_exponents_are_exact():
    # 1/((s0/4 + ...)//4) appears in Swin's window guards; a zero base fails the guard
    frames = [{"a": a, "b": b} for a in range(-4, 9) for b in range(-2, 5)]
    for expr in (sympy.Eq(8 / s0, s1), sympy.Gt(s1 * s0**-2, sympy.Rational(1, 3)), sympy.Le(1 / (s0 + s1), 1)):
        guard = ShapeRelation(expr, {s0: A, s1: B})
        check = GuardSet([guard]).compile()
        for frame in frames:
            try:
                expected = expr.xreplace({s0: frame["a"], s1: frame["b"]}) is sympy.true
            except TypeError:  # a zero divisor: sympy cannot compare its zoo
                expected = False
            assert check(frame) is expected, (expr, frame)


def test_unsupported_expressions_are_rejected_when_built():
    with pytest.raises(TypeError):
        ShapeRelation(sympy.Eq(sympy.sin(s0), 0), {s0: A})
    with pytest.raises(ValueError, match="no source"):
        ShapeRelation(sympy.Eq(s0, s1), {s0: A})
    with pytest.raises(TypeError):
        ShapeRelation(sympy.Eq(s0, 1), {s0: "L['a']"})


def test_dedup_ignores_binding_order():
    a = ShapeRelation(sympy.Eq(s0, s1), {s0: A, s1: B})
    b = ShapeRelation(sympy.Eq(s0, s1), {s1: B, s0: A})
    assert a == b
    assert len(GuardSet([a, b])) == 1


def test_constant_relations():
    assert GuardSet([ShapeRelation(sympy.true, {})]).compile()({})
    assert not GuardSet([ShapeRelation(sympy.false, {})]).compile()({})


def test_functions_of_kiln_symshapes_by_name():
    class FloorDiv(sympy.Function):  # what kiln.symshapes defines, matched by name
        nargs = (2,)

        @classmethod
        def eval(cls, a, b):
            if a.is_Integer and b.is_Integer:
                return sympy.Integer(int(a) // int(b))
            return None

    class TruncToInt(sympy.Function):
        nargs = (1,)

        @classmethod
        def eval(cls, x):
            if x.is_Number:
                return sympy.Integer(int(x))
            return None

    frames = [{"a": a, "b": b} for a in range(-5, 6) for b in (-3, -1, 1, 2, 4)]
    check_relation(sympy.Eq(FloorDiv(s0, s1) * s1 + sympy.Mod(s0, s1), s0), {s0: A, s1: B}, frames)
    check_relation(sympy.Ge(FloorDiv(s0, s1), 1), {s0: A, s1: B}, frames)
    check_relation(sympy.Eq(TruncToInt(s0 / 2), FloorDiv(s0, 2)), {s0: A, s1: B}, frames)


def _terms():
    from hypothesis import strategies as st

    leaves = st.sampled_from([s0, s1]) | st.integers(-4, 4).map(sympy.Integer)
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.builds(lambda a, b: a + b, inner, inner),
            st.builds(lambda a, b: a * b, inner, inner),
            st.builds(lambda a, k: sympy.Mod(a, k), inner, st.integers(1, 4)),
            st.builds(lambda a, k: sympy.floor(a / k), inner, st.integers(1, 4)),
            st.builds(lambda a, k: sympy.ceiling(sympy.Rational(1, k) * a), inner,
                      st.integers(2, 4)),
            st.builds(sympy.Min, inner, inner),
            st.builds(sympy.Max, inner, inner),
            st.builds(lambda a: a**2, inner),
        ),
        max_leaves=6,
    )


def _relations():
    from hypothesis import strategies as st

    rel = st.sampled_from([sympy.Eq, sympy.Ne, sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge])
    atom = st.builds(lambda r, a, b: r(a, b), rel, _terms(), _terms())
    return st.recursive(atom, lambda inner: st.builds(sympy.And, inner, inner)
                        | st.builds(sympy.Or, inner, inner) | st.builds(sympy.Not, inner),
                        max_leaves=3)


def test_random_relations_compiled_agree_with_sympy():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=150, deadline=None)
    @given(expr=_relations(), a=st.integers(-6, 6), b=st.integers(-6, 6))
    def run(expr, a, b):
        if expr in (sympy.true, sympy.false) or not isinstance(expr, sympy.Basic):
            expr = sympy.Eq(s0, a)
        guard = ShapeRelation(expr, {s0: A, s1: B})
        frame = {"a": a, "b": b}
        expected = bool(expr.xreplace({s0: sympy.Integer(a), s1: sympy.Integer(b)}))
        assert GuardSet([guard]).compile()(frame) is expected
        assert (evaluate(guard, frame) is None) is expected

    run()
