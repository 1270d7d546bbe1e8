"""Errors eager Python raises are raised under kiln too, with eager's type and message:
caught by the compiled function's own try/except (traced, one graph), and uncaught (the
caller sees eager's exception). One case per family of builtin and container misuse."""

import dataclasses

import pytest
import torch

import kiln


def _bad_calls():
    """name -> a function of a tensor that raises in eager."""
    cases = {
        # wrong argument counts and keywords of builtins
        "isinstance_keyword": lambda t: isinstance(t, torch.Tensor, invalid=True),
        "isinstance_bad_class": lambda t: isinstance(t, 3),
        "len_two_arguments": lambda t: len([t], [t]),
        "len_no_arguments": lambda t: len(),
        "sorted_no_arguments": lambda t: sorted(),
        "getattr_one_argument": lambda t: getattr(t),
        "enumerate_bad_keyword": lambda t: enumerate([t], begin=1),
        "zip_bad_keyword": lambda t: zip([t], short=True),
        "max_default_with_several": lambda t: max(1, 2, default=3),
        # wrong types and values
        "len_of_int": lambda t: len(5),
        "len_of_object": lambda t: len(object()),
        "getattr_int_name": lambda t: getattr(t, 1),
        "iter_of_int": lambda t: iter(5),
        "next_of_list": lambda t: next([t]),
        "next_exhausted": lambda t: next(iter([])),
        "max_empty": lambda t: max([]),
        "sum_of_strings": lambda t: sum(["a"], ""),
        "sum_of_int": lambda t: sum(5),
        "tuple_of_int": lambda t: tuple(5),
        "dict_of_int": lambda t: dict(7),
        "list_plus_tuple": lambda t: [t] + (t,),
        "list_times_float": lambda t: [t] * 1.5,
        "range_of_float": lambda t: range(1.5),
        "range_zero_step": lambda t: range(0, 5, 0),
        "getattr_missing": lambda t: getattr(BOX, "nope"),  # noqa: B009  (the builtin under test)
        "getattr_module_missing": lambda t: getattr(torch, "nope_x"),  # noqa: B009
        "fields_of_non_dataclass": lambda t: dataclasses.fields(BOX),
        "int_of_text": lambda t: int("x"),
        "float_of_text": lambda t: float("y"),
        "sorted_mixed": lambda t: sorted([1, "a"]),
        "reversed_iterator": lambda t: reversed(iter([t])),
        "enumerate_start": lambda t: enumerate([t], "1"),
        # frozensets, tuples and strings do not change
        "frozenset_add": lambda t: frozenset([1]).add(2),
        "frozenset_clear": lambda t: frozenset().clear(),
        "tuple_setitem": lambda t: _setitem((t, t), 0, t),
        "tuple_append": lambda t: (t,).append(t),
        "str_setitem": lambda t: _setitem("ab", 0, "c"),
        "tuple_delitem": lambda t: _delitem((1, 2), 0),
        # missing values and keys
        "list_index_missing": lambda t: [1, 2].index(3),
        "tuple_index_missing": lambda t: (1, 2).index(3),
        "list_remove_missing": lambda t: [1].remove(2),
        "list_pop_empty": lambda t: [].pop(),
        "list_pop_out_of_range": lambda t: [t].pop(3),
        "list_item_out_of_range": lambda t: [t][2],
        "tuple_item_out_of_range": lambda t: (t,)[2],
        "list_setitem_out_of_range": lambda t: _setitem([t], 5, t),
        "dict_missing_key": lambda t: {"a": t}["b"],
        "dict_pop_missing": lambda t: {"a": t}.pop("b"),
        "dict_del_missing": lambda t: _delitem({"a": t}, "b"),
        "dict_popitem_empty": lambda t: {}.popitem(),
        "set_remove_missing": lambda t: {1}.remove(2),
        "set_pop_empty": lambda t: set().pop(),
        "unhashable_in_set": lambda t: {1, [t]},
        # methods that do not exist, and containers' methods with wrong argument counts
        "list_no_such_method": lambda t: [t].push(t),
        "dict_no_such_method": lambda t: {}.has_key(1),
        "list_append_two": lambda t: [].append(t, t),
        "list_insert_one": lambda t: [].insert(t),
        "dict_get_none": lambda t: {}.get(),
        "dict_keys_argument": lambda t: {}.keys(1),
        "set_add_keyword": lambda t: set().add(x=1),
    }
    return cases


class Box:
    pass


BOX = Box()


def _setitem(obj, key, value):
    obj[key] = value


def _delitem(obj, key):
    del obj[key]


CASES = _bad_calls()


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_caught_error_is_eagers(counting, name):
    bad = CASES[name]

    def fn(t):
        try:
            bad(t)
        except Exception as e:
            return t + 1, type(e).__name__, e.args
        return t - 1, None, None

    want = fn(torch.ones(2))
    got = kiln.compile(fn, backend=counting)(torch.ones(2))
    assert want[1] is not None, "the case must raise in eager"
    assert got[1:] == want[1:]
    torch.testing.assert_close(got[0], want[0])
    assert len(counting.graphs) == 1  # traced, with the handler, in one graph


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_uncaught_error_reaches_the_caller_as_eagers(counting, name):
    bad = CASES[name]

    def fn(t):
        y = t * 2
        return bad(y)

    with pytest.raises(Exception) as eager:
        fn(torch.ones(2))
    with pytest.raises(Exception) as compiled:
        kiln.compile(fn, backend=counting)(torch.ones(2))
    assert type(compiled.value) is type(eager.value)
    assert str(compiled.value) == str(eager.value)


def test_a_list_mutation_before_the_error_is_kept(counting):
    def fn(t, xs):
        xs.append(t)
        try:
            xs.pop(10)
        except IndexError:
            xs.append(t * 2)
        return t + 1

    xs_c, xs_e = [], []
    compiled = kiln.compile(fn, backend=counting)
    torch.testing.assert_close(compiled(torch.ones(2), xs_c), fn(torch.ones(2), xs_e))
    assert len(xs_c) == len(xs_e) == 2
    assert len(counting.graphs) == 1


def test_frame_introspection_builtins_are_not_folded(counting):
    def fn(t):
        g = globals()
        return t + 1, "fn" in g or "test_frame_introspection_builtins_are_not_folded" in g, eval("t * 3")

    compiled = kiln.compile(fn, backend=counting)
    got, want = compiled(torch.ones(2)), fn(torch.ones(2))
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[2], want[2])
    assert got[1] == want[1]


def test_a_limit_of_kiln_inside_a_try_block_is_never_the_users_exception():
    # abs() of a list from the frame: kiln cannot fold it (its items are unknown at trace
    # time); that limit was turned into a traced exception of type Unsupported, which the
    # user's own except clause caught (a wrong answer: 'Unsupported' instead of 'TypeError')
    def fn(x, lst):
        try:
            abs(lst)
        except Exception as e:
            name = type(e).__name__
        return name, x + 1

    compiled = kiln.compile(fn, backend="eager")
    x = torch.ones(2)
    for _ in range(2):
        got, expected = compiled(x, [1, 2]), fn(x, [1, 2])
        assert got[0] == expected[0] == "TypeError"
        torch.testing.assert_close(got[1], expected[1])
