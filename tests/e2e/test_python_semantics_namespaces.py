"""locals(), vars(), dir() and obj.__dict__ under kiln: the frame's namespace as it is at
the call (assigned, deleted, cell and free variables), and instance dicts that stay live.
Each case is compared with eager and traced in one graph with no break."""

import torch
from e2e_support import assert_same

import kiln


def _check(counting, fn, *args, graphs=1):
    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(*args), fn(*args))
    assert len(counting.graphs) == graphs
    assert kiln.session().stats.breaks == []


def test_a_name_assigned_before_locals_is_in_it(counting):
    def fn(x):
        b = 1
        if "b" in locals():
            return x + b
        return x - 1

    _check(counting, fn, torch.ones(2))


def test_vars_without_arguments_is_locals(counting):
    def fn(x):
        b = 2  # noqa: F841  (read through vars())
        v = vars()
        return x * len(v), sorted(v), "b" in vars()

    _check(counting, fn, torch.ones(2))


def test_deleted_and_not_yet_assigned_names_are_absent(counting):
    def fn(x):
        early = "later" in locals()
        later = 1
        gone = 2
        del gone
        return x + later, early, "gone" in locals(), sorted(locals())

    _check(counting, fn, torch.ones(2))


def test_cell_and_free_variables_are_in_locals(counting):
    def fn(x):
        c = 3

        def inner(y):
            return y + c, sorted(locals())  # c is a free variable of inner

        out, inner_names = inner(x)
        return out, inner_names, sorted(locals()), locals()["c"]

    _check(counting, fn, torch.ones(2))


def test_values_read_through_locals_are_the_variables(counting):
    def fn(x, scale):
        y = x * 2
        names = locals()
        return names["y"] + names["scale"], names["x"] is x

    _check(counting, fn, torch.ones(2), 3.0)


def test_locals_is_one_dict_refreshed_at_each_call(counting):
    # CPython 3.11/3.12: the frame's f_locals dict, updated by each locals() call
    def fn(x):
        first = locals()
        z = 5
        before = "z" in first
        second = locals()
        return x + z, before, "z" in first, first is second

    _check(counting, fn, torch.ones(2))


def test_dir_without_arguments_lists_the_local_names(counting):
    def fn(x):
        a = 1
        b = 2
        return x + a + b, dir()

    _check(counting, fn, torch.ones(2))


class Box:
    def __init__(self):
        self.a = 1


def test_vars_of_an_object_sees_later_attribute_stores(counting):
    def fn(x, box):
        d = vars(box)
        before = "new" in d
        box.new = 5
        return x + d["new"], before, "new" in d, sorted(d), len(d)

    box_c, box_e = Box(), Box()
    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(torch.ones(2), box_c), fn(torch.ones(2), box_e))
    assert vars(box_c) == vars(box_e)
    assert len(counting.graphs) == 1


def test_stores_through_dunder_dict_are_attributes(counting):
    def fn(x, box):
        box.__dict__["b"] = 7
        vars(box).update(c=x)
        return x + box.b, box.c, box.__dict__ is vars(box), list(box.__dict__.values())[:2]

    box_c, box_e = Box(), Box()
    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(torch.ones(2), box_c), fn(torch.ones(2), box_e))
    assert_same(vars(box_c), vars(box_e))
    assert len(counting.graphs) == 1


def test_views_of_an_instance_dict_are_live(counting):
    def fn(x, box):
        keys = box.__dict__.keys()
        box.z = 3
        return x + len(keys), list(keys)

    _check(counting, fn, torch.ones(2), Box())


def test_vars_of_an_object_made_in_the_trace(counting):
    def fn(x):
        box = Box()
        d = vars(box)
        box.extra = 2
        return x + d["extra"], sorted(d)

    _check(counting, fn, torch.ones(2))


def test_instance_dict_keys_are_guarded(counting):
    def fn(x, box):
        return x + 1 if "flag" in vars(box) else x - 1

    compiled = kiln.compile(fn, backend=counting)
    plain, flagged = Box(), Box()
    flagged.flag = True
    assert_same(compiled(torch.ones(2), plain), fn(torch.ones(2), plain))
    assert_same(compiled(torch.ones(2), flagged), fn(torch.ones(2), flagged))
    assert len(counting.graphs) == 2


def test_a_frame_reading_locals_does_not_resume_after_a_break(counting):
    # a resume function would hold only the variables live after the break
    def fn(x):
        b = 1
        n = x.sum().item()  # not traceable: the frame runs eagerly instead of breaking
        return x + n, sorted(locals()), b

    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(torch.ones(2)), fn(torch.ones(2)))
    assert_same(compiled(torch.ones(2)), fn(torch.ones(2)))


class Slotted:
    __slots__ = ("a",)

    def __init__(self):
        self.a = 1


def test_vars_of_an_object_without_an_instance_dict_raises_as_in_eager(counting):
    def fn(x, obj):
        try:
            vars(obj)
        except TypeError as e:
            return x + obj.a, e.args
        return x

    _check(counting, fn, torch.ones(2), Slotted())
