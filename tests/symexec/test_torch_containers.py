"""Container trackers at capture level: live views and iterators in the replacement code,
frozen sets, and eager's errors for container misuse."""

import inspect

import pytest
import torch

import kiln.symexec._opcodes  # noqa: F401  (the rules)
from kiln.symexec import capture
from kiln.symexec._unsupported import MissingAttribute, TracedException
from kiln.symexec.variables._constant import ConstantVariable
from kiln.symexec.variables._containers import DictVariable, ListVariable, SetVariable
from kiln.symexec.variables._errors import call_error


def _frame(fn, *args):
    bound = inspect.signature(fn).bind(*args)
    return fn.__code__, dict(bound.arguments), fn.__globals__


def _run(cap, fn, *args):
    code = cap.replacement(cap.graph_module.forward)
    return type(fn)(code, fn.__globals__, None, None, fn.__closure__)(*args)


def test_a_returned_view_is_the_view_of_the_real_dict():
    def f(x, d):
        d["b"] = x + 1
        return d.keys(), d.values()

    d = {"a": 1}
    cap = capture(*_frame(f, torch.ones(2), d))
    assert "d.keys()" in cap.source_text
    keys, values = _run(cap, f, torch.ones(2), d)
    d["later"] = 0
    assert list(keys) == ["a", "b", "later"] and len(values) == 3


def test_an_iterator_returned_half_used_resumes_on_the_real_list():
    def f(x, xs):
        it = iter(xs)
        next(it)
        return x + 1, it

    xs = [1, 2, 3]
    cap = capture(*_frame(f, torch.ones(2), xs))
    _, it = _run(cap, f, torch.ones(2), xs)
    xs.append(4)
    assert list(it) == [2, 3, 4]


def test_frozenset_trackers_reject_mutation_with_eagers_error():
    frozen = SetVariable([ConstantVariable(1)], frozen=True)
    with pytest.raises(MissingAttribute, match="'frozenset' object has no attribute 'add'"):
        frozen.call_method(None, "add", [ConstantVariable(2)], {})
    assert frozen.python_type() is frozenset


@pytest.mark.parametrize(("tp", "name", "nargs"), [
    (list, "append", 2), (list, "push", 1), (dict, "get", 0), (dict, "keys", 1), (set, "add", 0),
    (tuple, "append", 1), (frozenset, "clear", 0),
])
def test_container_method_misuse_is_eagers_error(tp, name, nargs):
    error = call_error(tp, name, [ConstantVariable(None)] * nargs, {})
    with pytest.raises(Exception) as eager:
        getattr(tp(), name)(*[None] * nargs)
    assert isinstance(error, TracedException) and error.exc_type is type(eager.value)
    assert error.exc.args[0].as_constant() == str(eager.value)


def test_missing_keys_and_values_raise_eagers_exceptions():
    d = DictVariable({"a": ConstantVariable(1)})
    with pytest.raises(TracedException) as missing:
        d.call_method(None, "pop", [ConstantVariable("b")], {})
    assert missing.value.exc_type is KeyError
    xs = ListVariable([ConstantVariable(1)])
    with pytest.raises(TracedException) as absent:
        xs.call_method(None, "index", [ConstantVariable(5)], {})
    assert absent.value.exc_type is ValueError and absent.value.exc.args[0].as_constant() == "5 is not in list"
