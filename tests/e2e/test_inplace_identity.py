"""Identity after in-place operations: an in-place op, an augmented assignment or an ``out=``
call gives back the very object it changed, inside the trace, in values the compiled
function returns and across graph breaks; every alias the trace holds sees the change."""

import copy

import pytest
import torch
from e2e_support import CountingBackend, eager_item

import kiln


def _compare(fn, *args):
    eager_args, kiln_args = copy.deepcopy(args), copy.deepcopy(args)
    backend = CountingBackend()
    expected = fn(*eager_args)
    got = kiln.compile(fn, backend=backend)(*kiln_args)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(kiln_args, eager_args)
    return got, backend


AUGMENTED = {
    "+=": lambda a, b: a.__iadd__(b), "-=": lambda a, b: a.__isub__(b), "*=": lambda a, b: a.__imul__(b),
    "/=": lambda a, b: a.__itruediv__(b), "//=": lambda a, b: a.__ifloordiv__(b),
    "%=": lambda a, b: a.__imod__(b), "**=": lambda a, b: a.__ipow__(b),
    "&=": lambda a, b: a.__iand__(b), "|=": lambda a, b: a.__ior__(b), "^=": lambda a, b: a.__ixor__(b),
    "<<=": lambda a, b: a.__ilshift__(b), ">>=": lambda a, b: a.__irshift__(b),
}


def _augmented(op):
    # the statement itself (BINARY_OP with an in-place operator), not a method call
    src = f"def f(x):\n    c = x.clone() if {op!r} not in ('&=', '|=', '^=', '<<=', '>>=') else x.long()\n" \
          f"    b = c\n    c {op} 2\n    return c is b, b, c\n"
    scope = {}
    exec(compile(src, f"<augmented {op}>", "exec"), scope)
    return scope["f"]


@pytest.mark.parametrize("op", list(AUGMENTED))
def test_augmented_assignment_keeps_the_object(op):
    got, _ = _compare(_augmented(op), torch.tensor([1.0, 2.0, 5.0]))
    assert got[0] is True


def test_matmul_augmented_assignment_makes_a_new_tensor_as_eager():
    def f(m):
        a = m * 1
        b = a
        a @= torch.eye(2)
        return a is b, b

    got, _ = _compare(f, torch.randn(2, 2))
    assert got[0] is False  # Tensor has no __imatmul__: ``a @= b`` is ``a = a @ b``


def test_augmented_assignment_on_an_input_keeps_the_input():
    def f(x):
        y = x
        x **= 2
        return x is y

    x = torch.tensor([1.0, 3.0])
    compiled = kiln.compile(f, backend="eager")
    assert compiled(x) is True
    torch.testing.assert_close(x, torch.tensor([1.0, 9.0]))


METHODS = ["add_", "sub_", "mul_", "div_", "clamp_", "abs_", "neg_", "exp_", "sigmoid_", "tanh_",
           "relu_", "zero_", "fill_", "copy_", "unsqueeze_", "t_", "requires_grad_", "masked_fill_",
           "index_add_", "scatter_"]


@pytest.mark.parametrize("name", METHODS)
def test_inplace_method_returns_the_tensor_itself(name):
    def f(x, y):
        a = x * 1
        if name in ("add_", "sub_", "mul_", "div_"):
            r = getattr(a, name)(y)
        elif name == "clamp_":
            r = a.clamp_(-0.5, 0.5)
        elif name == "fill_":
            r = a.fill_(3.0)
        elif name == "copy_":
            r = a.copy_(y)
        elif name == "unsqueeze_":
            r = a.unsqueeze_(0)
        elif name == "masked_fill_":
            r = a.masked_fill_(y > 0, 0.0)
        elif name == "index_add_":
            r = a.index_add_(0, torch.tensor([0, 1]), y[:2])
        elif name == "scatter_":
            r = a.scatter_(0, torch.tensor([1, 0]), y[:2])
        else:
            r = getattr(a, name)()
        return r is a, len({r, a}), a in {r}, a

    got, _ = _compare(f, torch.randn(4), torch.randn(4))
    assert got[:3] == (True, 1, True)


def test_inplace_on_inputs_and_values_returned():
    def f(x, y):
        z = x.add_(1)
        w = torch.add(x, y, out=y)
        return x.add_(1).mul_(2) is x, x.copy_(y) is x, z is x, w is y, x

    got, _ = _compare(f, torch.randn(3), torch.randn(3))
    assert got[:4] == (True, True, True, True)


@pytest.mark.parametrize("how", ["method", "augmented", "out", "function"])
def test_the_compiled_function_returns_the_input_itself(how):
    def f(x):
        if how == "method":
            x.add_(1)
        elif how == "augmented":
            x *= 3
        elif how == "out":
            torch.sin(x, out=x)
        else:
            torch.relu_(x)
        return x

    x = torch.tensor([1.0, -2.0])
    expected = f(x.clone())
    assert kiln.compile(f, backend="eager")(x) is x
    torch.testing.assert_close(x, expected)


def test_returned_aliases_are_one_object():
    def f(x):
        a = x * 2
        b = a.add_(1)
        return a, b, b.mul_(2)

    a, b, c = kiln.compile(f, backend="eager")(torch.ones(2))
    assert a is b and b is c
    torch.testing.assert_close(a, torch.full((2,), 6.0))


def test_identity_holds_across_a_graph_break():
    def f(x):
        a = x * 2
        b = a.add_(1)
        y = x.sub_(1)
        n = eager_item(x.sum())  # a graph break
        c = b.mul_(2)
        return a is b, c is a, y is x, n, a, x

    got, backend = _compare(f, torch.tensor([1.0, 2.0]))
    assert got[:3] == (True, True, True)
    assert len(backend.graphs) == 2

    def g(x):
        y = x.add_(1)
        eager_item(x.sum())
        return y

    x = torch.ones(2)
    assert kiln.compile(g, backend="eager")(x) is x


def test_tensors_held_in_lists_dicts_and_objects():
    class Holder:
        pass

    def f(xs, d, h):
        a = xs[0]
        xs[0] += 1
        xs[1].mul_(2)
        b = d["t"]
        d["t"] -= 1
        c = h.t
        h.t *= 3
        return xs[0] is a, d["t"] is b, h.t is c

    h = Holder()
    h.t = torch.ones(2)
    xs, d = [torch.ones(2), torch.ones(2)], {"t": torch.ones(2)}
    got = kiln.compile(f, backend="eager")(xs, d, h)
    assert got == (True, True, True)
    torch.testing.assert_close(xs, [torch.full((2,), 2.0), torch.full((2,), 2.0)])
    torch.testing.assert_close(d["t"], torch.zeros(2))
    torch.testing.assert_close(h.t, torch.full((2,), 3.0))


@pytest.mark.parametrize("case", ["list*=", "list+=", "set|=", "set&=", "set-=", "set^=", "dict|="])
def test_containers_augmented_assignment_changes_the_object(case):
    def f(x, lst, d):
        s = {1, 2}
        alias_l, alias_s, alias_d = lst, s, d
        if case == "list*=":
            lst *= 2
        elif case == "list+=":
            lst += [x]
        elif case == "set|=":
            s |= {3}
        elif case == "set&=":
            s &= {2}
        elif case == "set-=":
            s -= {1}
        elif case == "set^=":
            s ^= {1, 5}
        else:
            d |= {"k": x}
        return lst is alias_l, s is alias_s, d is alias_d, len(lst), sorted(s), len(d), x + 1

    got, _ = _compare(f, torch.ones(2), [torch.zeros(1)], {"a": 1})
    assert got[:3] == (True, True, True)


def test_user_object_inplace_operator_keeps_the_object():
    class Acc:
        def __init__(self):
            self.v = 0

        def __iadd__(self, other):
            self.v += other
            return self

    def f(x):
        a = Acc()
        b = a
        a += 3
        return a is b, b.v, x + 1

    got = kiln.compile(f, backend="eager")(torch.ones(1))
    assert got[:2] == (True, 3)


def test_metadata_after_inplace_view_ops():
    def f(x):
        y = x * 1
        y.unsqueeze_(0)
        z = y.t_()
        return y.shape, z.shape, z is y, y + 1

    _compare(f, torch.randn(3))


class _Box:
    def __init__(self, t):
        self.t = t

    def __iadd__(self, other):
        self.t.add_(other)
        return self

    def __ior__(self, other):
        self.t.mul_(other)
        return self


def test_user_inplace_operators_are_traced_and_keep_the_object():
    def f(box, x):
        alias = box
        box += x
        box |= 3
        return box is alias, box.t * 1

    backend = CountingBackend()
    compiled = kiln.compile(f, backend=backend)
    mine, theirs = _Box(torch.ones(2)), _Box(torch.ones(2))
    got, expected = compiled(mine, torch.ones(2)), f(theirs, torch.ones(2))
    assert got[0] is True
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(mine.t, theirs.t)
    assert len(backend.graphs) == 1  # traced, not run eagerly after a break
