"""The code kiln.inductor chooses to generate, where the choice decides speed and the values
must not change: exponents ATen computes without ``pow``, transcendental values computed
once for all their readers, pointwise stages sharing one loop, NaN-propagating max/min
written without branches."""

from __future__ import annotations

import re

import pytest
import torch

import kiln


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -0.5, -1, -2])
def test_special_exponents_are_eagers_bits_without_pow(graphs, exponent):
    x = torch.rand(4096) * 10 + 0.01
    got = kiln.compile(lambda t: t**exponent)(x)
    if exponent == 0.5:  # the correctly rounded square root; eager's vectorized one is within an ulp of it
        torch.testing.assert_close(got, x**exponent)
        torch.testing.assert_close(got, x.double().sqrt().float(), rtol=0, atol=0)
    else:
        torch.testing.assert_close(got, x**exponent, rtol=0, atol=0)
    (graph,) = graphs
    assert "std::pow" not in graph.cpp_code


def test_gelu_tanh_computes_the_cube_by_multiplication(graphs):
    x = torch.randn(64, 256)
    gelu = torch.nn.GELU(approximate="tanh")
    with torch.no_grad():
        torch.testing.assert_close(kiln.compile(gelu)(x), gelu(x))
    assert "std::pow" not in graphs[0].cpp_code


def test_a_transcendental_value_read_twice_is_computed_once(graphs):
    # rotary embeddings: cos and sin of the positions, broadcast over heads, read by q and k
    def rotate(q, k, t):
        cos, sin = t.cos(), t.sin()
        return q * cos + k * sin, k * cos - q * sin

    q, k, t = torch.randn(2, 4, 16, 8), torch.randn(2, 4, 16, 8), torch.randn(16, 8)
    with torch.no_grad():
        torch.testing.assert_close(kiln.compile(rotate)(q, k, t), rotate(q, k, t))
    (graph,) = graphs
    assert graph.cpp_code.count("std::cos(") == 1 and graph.cpp_code.count("std::sin(") == 1


def test_pointwise_stages_over_one_range_share_a_loop(graphs):
    def update(p, g, m):
        m.mul_(0.9).add_(g)
        p.sub_(m * 0.01)

    p, g, m = torch.randn(10000), torch.randn(10000), torch.randn(10000)
    p2, m2 = p.clone(), m.clone()
    update(p2, g, m2)
    kiln.compile(update)(p, g, m)
    torch.testing.assert_close((p, m), (p2, m2))
    (graph,) = graphs
    assert len(re.findall(r"for \(int64_t", graph.cpp_code)) == 1
    assert "parallel for simd" in graph.cpp_code


def test_maximum_minimum_and_relu_propagate_nan_from_either_side(graphs):
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([nan, 1.0, nan, -0.0, 0.0, -inf, 2.0, 3.0] * 4)
    b = torch.tensor([1.0, nan, nan, 0.0, -0.0, inf, 3.0, 2.0] * 4)

    def fn(x, y):
        return torch.maximum(x, y), torch.minimum(x, y), torch.relu(x), x.clamp(min=0.5, max=2.5)

    with torch.no_grad():
        got = kiln.compile(fn)(a, b)
    for mine, theirs in zip(got, fn(a, b), strict=True):
        torch.testing.assert_close(mine, theirs, equal_nan=True, rtol=0, atol=0)


def test_a_size_symbol_of_a_kernel_with_an_empty_dimension_is_a_parameter(graphs):
    # OpInfo's samples for cos: (1, 0, 3) compiles with a symbol for the dimension beside the
    # empty one; that loop bound must still be a kernel parameter (the product of the outer
    # sizes is 0, with no symbols)
    def fn(x):
        return torch.cos(x)

    compiled = kiln.compile(fn)
    for shape in [(20,), (30,), (1, 0, 3), ()]:  # dimension 0 turns dynamic, then holds 1 beside a 0
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), torch.cos(x))


def _simd_bodies(cpp: str) -> list[str]:
    """The bodies of the ``omp simd`` loops in ``cpp``."""
    lines, bodies = cpp.splitlines(), []
    for k, line in enumerate(lines):
        if line.strip().startswith("#pragma omp") and "simd" in line:
            start = next(j for j in range(k + 1, len(lines)) if lines[j].strip() == "{")
            indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
            end = next(j for j in range(start + 1, len(lines)) if lines[j] == indent + "}")
            bodies.append("\n".join(lines[start:end]))
    return bodies


def test_a_gathered_rows_index_is_loaded_and_checked_once_per_row(graphs):
    # BERT's embeddings: three lookups summed, then a layer norm; each row's indices are
    # loaded and checked before the loops over the row, which then vectorize
    torch.manual_seed(0)
    words, positions, norm = torch.nn.Embedding(50, 64), torch.nn.Embedding(16, 64), torch.nn.LayerNorm(64)

    def fn(ids, pos):
        return norm(words(ids) + positions(pos))

    ids, pos = torch.randint(0, 50, (4, 16)), torch.arange(16).expand(4, 16)
    with torch.no_grad():
        torch.testing.assert_close(kiln.compile(fn)(ids, pos), fn(ids, pos))
    (graph,) = graphs
    bodies = _simd_bodies(graph.cpp_code)
    assert len(bodies) == 3 and "kiln_index_error" in graph.cpp_code
    assert not any("kiln_index_error" in body or "arg0[" in body for body in bodies)


def test_a_cat_clamps_each_index_only_where_its_bounds_may_not_hold():
    """``_lower_concat._clamp`` (built unevaluated after sign queries) gives what sympy's
    evaluating Min/Max give, and keeps the bounds it cannot prove (any value of the loop
    variable, a symbolic size)."""
    import sympy

    from kiln.inductor._lower_concat import _clamp

    x = sympy.Symbol("x1", integer=True, nonnegative=True)
    s = sympy.Symbol("s0", integer=True, positive=True)
    for expr, size in [(x, sympy.Integer(64)), (x - 64, sympy.Integer(64)), (x - s, s), (x, s),
                       (x - 3, sympy.Integer(5)), (sympy.Integer(7), sympy.Integer(5)),
                       (sympy.Integer(-2), sympy.Integer(5)), (x % 4, sympy.Integer(4))]:
        got = _clamp(expr, size)
        assert got == sympy.Max(sympy.Min(expr, size - 1), 0), (expr, size, got)
        for value in (0, 3, 63, 64, 130):  # the same numbers as the clamp
            at = {x: value, s: 70}
            assert got.subs(at) == max(min(expr.subs(at), size.subs(at) - 1), 0)


def test_a_flat_index_of_symbols_and_numbers_is_what_sympy_expands_it_to():
    """``_ir._flat_index`` builds a sum of monomials without sympy's ``expand``, and expands
    the rest: equal expressions either way, on random indexes, strides and offsets."""
    import random

    import sympy

    from kiln.inductor._ir import _flat_index

    rng = random.Random(0)
    xs = sympy.symbols("x0:4", integer=True, nonnegative=True)
    ss = sympy.symbols("s0:3", integer=True, positive=True)
    pieces = [*xs, *ss, sympy.Integer(0), sympy.Integer(1), sympy.Integer(7), 3 * xs[0], ss[0] * ss[1],
              xs[1] - 2, sympy.Max(0, sympy.Min(1, xs[0] - 4)), 2 * (ss[2] + 1), xs[2] * (ss[0] - 1)]
    for _ in range(300):
        n = rng.randint(1, 4)
        index = tuple(rng.choice(pieces) for _ in range(n))
        strides = tuple(rng.choice(pieces) for _ in range(n))
        offset = rng.choice(pieces)
        expected = sympy.expand(offset + sum((i * s for i, s in zip(index, strides, strict=True)), sympy.Integer(0)))
        assert _flat_index.__wrapped__(index, strides, offset) == expected, (index, strides, offset)
