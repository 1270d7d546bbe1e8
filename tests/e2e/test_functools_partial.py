"""functools.partial, lru_cache wrappers and functools.wraps helpers under kiln: attribute
reads, calls of partials passed in or made while tracing, guards on what the trace read.
Each is compared with eager, in the number of graphs asked, with no graph break."""

import functools

import torch
from e2e_support import assert_same, check_one_graph

import kiln


def scaled_add(a, b, *, scale=1):
    return (a + b) * scale


def scaled_sub(a, b, *, scale=1):
    return (a - b) * scale


_check = check_one_graph


# -- attributes --------------------------------------------------------------------------------


def test_func_args_and_keywords_of_an_input_partial(counting):
    def fn(x, p):
        return p.func(x, *p.args, **p.keywords), p.args, p.keywords, p.func is scaled_add

    _check(counting, fn, torch.randn(3), functools.partial(scaled_add, 2, scale=3))


def test_missing_dunder_of_a_partial_raises_attribute_error_as_eager(counting):
    def fn(x, p):
        try:
            return x + len(p.__name__)
        except AttributeError:
            return x - 1, getattr(p, "__qualname__", "missing")

    _check(counting, fn, torch.randn(3), functools.partial(scaled_add, b=2))


def test_dunders_a_partial_has(counting):
    def fn(x, p):
        q = functools.partial(scaled_add, x)
        return (x + len(p.func.__name__), p.__class__ is functools.partial, q.__class__ is functools.partial,
                p.__doc__ == q.__doc__, p.__module__, q.__module__, p.__dict__, type(q) is functools.partial)

    _check(counting, fn, torch.randn(3), functools.partial(scaled_add, b=2))


def test_hasattr_on_partials(counting):
    def fn(x, p):
        q = functools.partial(scaled_add, x)
        return x + sum([hasattr(p, "func"), hasattr(p, "__name__"), hasattr(p, "keywords"),
                        hasattr(p, "__dict__"), hasattr(q, "args"), hasattr(q, "__qualname__"),
                        hasattr(q, "__doc__"), callable(q)])

    _check(counting, fn, torch.randn(3), functools.partial(scaled_add, b=2))


def test_an_attribute_set_on_an_input_partial_is_read(counting):
    p = functools.partial(scaled_add, b=2)
    p.__name__ = "add_two"

    def fn(x, p):
        return x + len(p.__name__) if hasattr(p, "__name__") else x

    _check(counting, fn, torch.randn(3), p)


# -- calls -------------------------------------------------------------------------------------


def test_calling_an_input_partial_with_more_arguments(counting):
    def fn(x, p):
        return p(x) + p(x, scale=5)

    _check(counting, fn, torch.randn(3), functools.partial(scaled_add, b=torch.ones(3), scale=2))


def test_partial_made_inside_the_trace(counting):
    def fn(x):
        p = functools.partial(scaled_add, x, scale=2)
        return p(1) + p(2, scale=5)

    _check(counting, fn, torch.randn(3))


def test_nested_partials(counting):
    def fn(x):
        p = functools.partial(scaled_add, x)
        q = functools.partial(p, scale=4)
        r = functools.partial(p, 2)
        return q(2), r(), q.func is p, q.func is scaled_add, r.func is scaled_add, q.args, len(r.args), q.keywords

    _check(counting, fn, torch.randn(3))


def test_partial_of_torch_functions(counting):
    def fn(x, y):
        add = functools.partial(torch.add, alpha=2)
        total = functools.partial(torch.sum, dim=0)
        method = functools.partial(torch.Tensor.mul, other=3)
        return add(x, y), total(x), total(x, dim=1), method(y)

    _check(counting, fn, torch.randn(3, 3), torch.randn(3, 3))


def test_partial_of_builtins(counting):
    def fn(x):
        biggest = functools.partial(max, 3)
        pick = functools.partial(sorted, reverse=True)
        smallest = functools.partial(min, key=abs)
        return x + biggest(1, 2) + pick([1, 4, 2])[0] + smallest([-3, 1, 2])

    _check(counting, fn, torch.randn(3))


def test_keywords_of_the_call_override_the_partials(counting):
    def fn(x, p):
        q = functools.partial(scaled_add, scale=2)
        return p(x, x, scale=7), q(x, 1, scale=-1), q(x, 1)

    _check(counting, fn, torch.randn(3), functools.partial(scaled_add, scale=3))


def test_partial_returned_from_the_compiled_function(counting):
    def fn(x):
        y = x.sin()
        return functools.partial(scaled_add, y, scale=2)

    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(3)
    got, want = compiled(x), fn(x)
    assert type(got) is functools.partial and got.func is scaled_add and got.keywords == {"scale": 2}
    torch.testing.assert_close(got(1), want(1))
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


# -- guards ------------------------------------------------------------------------------------


def test_a_different_func_recompiles(counting):
    def fn(x, p):
        return p(x, 1)

    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(3)
    assert_same(compiled(x, functools.partial(scaled_add, scale=2)), fn(x, functools.partial(scaled_add, scale=2)))
    assert_same(compiled(x, functools.partial(scaled_add, scale=2)), fn(x, functools.partial(scaled_add, scale=2)))
    assert len(counting.graphs) == 1  # an equal partial: the guards pass
    assert_same(compiled(x, functools.partial(scaled_sub, scale=2)), fn(x, functools.partial(scaled_sub, scale=2)))
    assert len(counting.graphs) == 2
    assert kiln.session().stats.breaks == []


def test_different_stored_arguments_and_keywords_recompile(counting):
    def fn(x, p):
        return p(x)

    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(3)
    for p in (functools.partial(scaled_add, b=2, scale=3), functools.partial(scaled_add, b=2, scale=4),
              functools.partial(scaled_add, b=5, scale=4), functools.partial(scaled_add, b=2, scale=3)):
        assert_same(compiled(x, p), fn(x, p))
    assert len(counting.graphs) == 3  # the last one is the first again
    assert kiln.session().stats.breaks == []


def test_an_attribute_set_after_compiling_fails_the_guard(counting):
    def fn(x, p):
        return x + len(p.__name__) if hasattr(p, "__name__") else x - 1

    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(3)
    p = functools.partial(scaled_add, b=2)
    assert_same(compiled(x, p), fn(x, p))
    p.__name__ = "renamed"
    assert_same(compiled(x, p), fn(x, p))
    assert len(counting.graphs) == 2
    assert kiln.session().stats.breaks == []


# -- lru_cache and functools.wraps -------------------------------------------------------------


@functools.lru_cache
def cached_double(n):
    return n * 2


@functools.lru_cache(maxsize=8)
def cached_sin(t):
    return t.sin()


def test_lru_cache_wrapped_functions_are_inlined_without_cache_effects(counting):
    def fn(x):
        return cached_sin(x) + cached_double(3), cached_double.__name__, cached_sin.__wrapped__(x)

    cached_double.cache_clear()
    cached_sin.cache_clear()
    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(3)
    got = compiled(x)
    assert cached_double.cache_info().currsize == 0 and cached_sin.cache_info().currsize == 0
    assert_same(got, fn(x))
    assert len(counting.graphs) == 1
    assert kiln.session().stats.breaks == []


def test_a_different_lru_cache_function_recompiles(counting):
    holder = {"f": cached_sin}

    def fn(x, f):
        return f(x) * 2

    compiled = kiln.compile(fn, backend=counting)
    x = torch.randn(3)
    assert_same(compiled(x, holder["f"]), fn(x, holder["f"]))
    other = functools.lru_cache(lambda t: t.cos())
    assert_same(compiled(x, other), fn(x, other))
    assert len(counting.graphs) == 2
    assert kiln.session().stats.breaks == []


def twice(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 2

    return wrapper


@twice
def shifted(x, y=1):
    return x + y


def test_functools_wraps_helpers_are_traced_through(counting):
    def fn(x):
        return shifted(x, y=3), shifted.__name__, shifted.__wrapped__(x), shifted.__doc__

    _check(counting, fn, torch.randn(3))


def test_partial_over_a_wrapped_and_a_cached_helper(counting):
    def fn(x):
        p = functools.partial(shifted, y=x)
        q = functools.partial(cached_sin)
        return p(x) + q(x)

    _check(counting, fn, torch.randn(3))


def test_a_partial_of_an_input_partial_flattens_as_eager(counting):
    plain = functools.partial(scaled_add, scale=2)
    named = functools.partial(scaled_add, scale=2)
    named.tag = "kept"  # a partial with a __dict__ is not flattened

    def fn(x, p, q):
        inner_p = functools.partial(p, x, scale=3)
        inner_q = functools.partial(q, x)
        return inner_p(1), inner_q(1), inner_p.func is scaled_add, inner_q.func is q, inner_p.keywords

    _check(counting, fn, torch.randn(3), plain, named)
