from kiln.guards import CodeContext, Guard, LocalSource
from kiln.guards._base import safe_repr, type_name


def test_const_binds_by_identity_and_reuses_names():
    ctx = CodeContext()
    a, b = [1], [1]
    na, nb = ctx.const(a, "x"), ctx.const(b, "x")
    assert na != nb
    assert ctx.const(a) == na
    assert ctx.namespace[na] is a and ctx.namespace[nb] is b
    assert na.isidentifier() and na.startswith("_x")


def test_temps_are_fresh_and_native_flag_is_kept():
    ctx = CodeContext(native=False)
    assert ctx.native is False
    assert ctx.temp() != ctx.temp()
    assert CodeContext().native is True


def test_provide_keeps_the_first_expression():
    ctx = CodeContext()
    src = LocalSource("x")
    ctx.provide(src, "a")
    ctx.provide(src, "b")
    assert ctx.provided[src] == "a"


def test_type_name_and_safe_repr():
    assert type_name(int) == "int"
    assert type_name(CodeContext) == "kiln.guards._base.CodeContext"
    assert safe_repr("x" * 200, 10) == "'xxxxxx..."
    assert len(safe_repr(list(range(100)), 20)) == 20

    class Bad:
        def __repr__(self):
            raise RuntimeError

    assert safe_repr(Bad()).startswith("<Bad object at 0x")


def test_guard_base_defaults():
    assert Guard.emit_batch(CodeContext(), [], []) is None
    assert Guard.cost == 10 and Guard.establishes_type is False and Guard.batch_key is None
