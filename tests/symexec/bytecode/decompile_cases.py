"""Functions whose resume functions test_decompile.py decompiles: one statement shape each.

Each breaks at the call of ``brk`` (a graph break at a call, as kiln makes: the call's result
becomes the top stack value of the resume function) or at the conditional jump right after it
(a data-dependent branch). ``brk`` returns its argument.
"""

# ruff: noqa: E731


class Box:
    def __init__(self, v):
        self.v = v
        self.items = [v]

    def scale(self, k):
        return self.v * k

    def add(self, *vs, k=1):
        return sum(vs) * k + self.v


class Exit:
    """A with block's manager that logs its enter and exit (and swallows ValueError)."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, tp, value, tb):
        self.log.append(("exit", tp.__name__ if tp else None))
        return tp is ValueError


def brk(v):
    return v


def plus(a, b):
    return a + b


def assign_call(x, y):
    a = x * 2
    b = a + brk(y)
    return a, b


def star_and_keyword_calls(x, y):
    xs = [x, 1]
    a = plus(*xs) + brk(y)  # CALL_FUNCTION_EX's result on the stack at the break
    b = plus(x, b=y) * brk(2)  # a keyword call's (CALL_KW from 3.13)
    return a + b


def nested_call(x, y):
    return plus(x, plus(brk(y), x * 3))


def method_call(x, y):
    box = Box(x)
    r = box.add(y, brk(y + 1), k=2)
    return r + box.scale(brk(3))


def expression_statement(x):
    log = []
    log.append(x)
    brk(log).append(x + 1)
    log.append(len(log))
    return log


def if_elif(x, y):
    if brk(x) > 3:
        z = 1
    elif y > 0:
        z = 2
    else:
        z = 3
    return z + x


def if_break_in_body(x, y):
    z = 0
    if x > 0:
        z = brk(x) * y
        z += 1
    else:
        z = -1
    return z


def and_or(x, y):
    a = x and brk(y) and x + y
    b = brk(x) or y
    return a, b


def ternary(x, y):
    r = brk(x) if y > 0 else -x
    s = (x if brk(y) > 0 else -y) + 1
    return r, s


def aug_assign(x, y):
    total = x
    total += brk(y) * 2
    box = Box(x)
    box.v += brk(y)
    box.items[0] -= brk(1)
    return total, box.v, box.items


def comprehension(xs, k):
    ys = [v * 2 for v in brk(xs)]
    zs = {v: v + 1 for v in brk(ys)}
    return ys, zs


def assert_statement(x, y):
    assert brk(x) > 0, f"bad {x}"
    assert x < brk(y), "x must be below y"
    return x + y


def try_body(x, y):
    out = []
    try:
        out.append(brk(x))
        out.append(10 // y)
    except ZeroDivisionError:
        out.append("div")
    finally:
        out.append("done")
    out.append("after")
    return out


def with_block(x, y):
    log = []
    with Exit(log) as e:
        log.append(brk(x))
        if y < 0:
            raise ValueError("swallowed")
        log.append(e is not None)
    log.append("after")
    return log


def with_return(x):
    log = []
    with Exit(log):
        v = brk(x) + 1
        return v, log


def unbound_local(x, flag):
    if flag:
        late = x
    brk(x)
    try:
        return late
    except UnboundLocalError:
        return "unbound"


def unbound_shadowing_a_global(x):
    y = brk(x)
    if y > 100:
        plus = 1
    return plus(y, 1) if y < 100 else plus


def for_after_break(xs):
    total = 0
    for v in brk(xs):
        total += v
    else:
        total += 1000
    return total


def while_after_break(n):
    n = brk(n)
    out = []
    while n > 0:
        out.append(n)
        n -= 1
    return out


def branch_on_value(x):
    y = x * 2
    if brk(y) > 5:
        return y - 1
    return y + 1


def walrus(x):
    r = (n := brk(x) + 1) * n
    return r, n


def fstring(x, y):
    return f"{brk(y)}-{x!r}-{y:>4}"


def star_args(xs, k):
    return plus(*brk(xs)) * k


def subscript_store(x):
    d = {"a": 1}
    d[brk("b")] = x
    return d


def lambda_value(x):
    return (lambda v: v * 2)(brk(x)) + 1


def chained_compare(x, y):
    return 0 < brk(x) < y


def multiline_call(x, y):
    value = plus(
        x * 2,
        brk(y),
    )
    return value


def nested_with_try(x, y):
    log = []
    try:
        with Exit(log):
            log.append(brk(x) + y)
            log.append(1 // y)
    except ZeroDivisionError:
        log.append("zero")
    return log


def keyword_only(x, *, scale=2, **extra):
    return brk(x) * scale + len(extra)


lam = lambda x, y: plus(brk(x), y) * 2


def looped(xs):
    total = 0
    for v in xs:
        total += brk(v)
    return total
