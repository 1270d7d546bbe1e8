"""capture(): graphs, guards, replacement code and Unsupported, on real frames."""

import inspect

import pytest
import torch
from torch import nn

import kiln.symexec._opcodes  # noqa: F401  (the rules)
from kiln.guards import LocalSource, TensorMatch
from kiln.symexec import Unsupported, capture
from kiln.symexec._translator import opcode_rules
from kiln.symexec.bytecode import decode


def _frame(fn, *args, **kwargs):
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    L = dict(bound.arguments)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        L[name] = cell.cell_contents
    return fn.__code__, L, fn.__globals__


def _run(cap, fn, *args, **kwargs):
    code = cap.replacement(cap.graph_module.forward)
    replaced = type(fn)(code, fn.__globals__, None, None, fn.__closure__)
    return replaced(*args, **kwargs)


def test_graph_nodes_carry_fake_values_with_the_real_metadata():
    def f(x, w):
        return (x @ w).softmax(-1).transpose(0, 1)

    x, w = torch.randn(3, 4), torch.randn(4, 5, dtype=torch.float32)
    cap = capture(*_frame(f, x, w))
    out_node = cap.graph_module.graph.output_node.args[0][0]
    assert tuple(out_node.meta["val"].shape) == (5, 3)
    assert out_node.meta["val"].stride() == f(x, w).stride()
    assert cap.op_count == 3
    torch.testing.assert_close(_run(cap, f, x, w), f(x, w))


def test_unused_arguments_are_not_guarded():
    def f(x, unused, flag=True):
        return x + 1

    cap = capture(*_frame(f, torch.ones(2), torch.ones(3), flag=False))
    sources = {str(s) for g in cap.guards for s in getattr(g, "sources", ())}
    assert "L['x']" in sources
    assert not any("unused" in s or "flag" in s for s in sources)


def test_guards_cover_what_the_trace_read():
    def f(x, n, opts):
        return x * n + opts["shift"]

    cap = capture(*_frame(f, torch.ones(2), 3, {"shift": 1.5}))
    text = "\n".join(g.describe() for g in cap.guards.ordered())
    assert "L['n'] == 3" in text
    assert "L['opts']['shift'] == 1.5" in text
    assert any(isinstance(g, TensorMatch) and g.source == LocalSource("x") for g in cap.guards)
    check = cap.guards.compile({})
    assert check({"x": torch.ones(2), "n": 3, "opts": {"shift": 1.5}})
    assert not check({"x": torch.ones(2), "n": 4, "opts": {"shift": 1.5}})
    assert not check({"x": torch.ones(2), "n": 3, "opts": {"shift": 1.5, "extra": 0}})


def test_module_members_are_reached_through_their_dicts():
    model = nn.Sequential(nn.Linear(2, 3))

    def f(m, x):
        return m(x)

    cap = capture(*_frame(f, model, torch.randn(1, 2)))
    assert "L['m']._modules['0']._parameters['weight']" in {str(s) for s in cap.input_sources}
    assert "m._modules['0']._parameters['weight']" in cap.source_text
    assert [n.name for n in cap.graph_module.graph.find_nodes("placeholder")] == ["x", "m_0_weight", "m_0_bias"]


def test_replacement_keeps_the_argument_layout_and_free_variables():
    scale = 2.0
    offset = torch.ones(2)

    def f(a, /, b, *rest, key=1, **extra):
        return a * scale + b + offset + key

    cap = capture(*_frame(f, torch.ones(2), torch.ones(2), 5, key=3, z=1))
    code = cap.replacement(cap.graph_module.forward)
    for attr in ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_freevars"):
        assert getattr(code, attr) == getattr(f.__code__, attr), attr
    assert code.co_varnames[:5] == f.__code__.co_varnames[:5]
    assert code.co_flags & 0x0C == f.__code__.co_flags & 0x0C  # *args and **kwargs
    torch.testing.assert_close(_run(cap, f, torch.ones(2), torch.ones(2), 5, key=3, z=1),
                               f(torch.ones(2), torch.ones(2), 5, key=3, z=1))


def test_unsupported_names_reason_line_and_inlined_callers():
    def leaf(t):
        return t.numpy().tolist()

    def middle(t):
        return leaf(t) + 1

    def root(x):
        return middle(x * 2)

    with pytest.raises(Unsupported) as info:
        capture(*_frame(root, torch.ones(1)))
    err = info.value
    assert ".tolist() is not traced" in err.reason
    assert err.location.function.endswith("leaf")
    assert err.location.text == "return t.numpy().tolist()"
    assert [loc.function.split(".")[-1] for loc in err.stack] == ["root", "middle"]
    text = str(err)
    assert text.index("leaf") < text.index("middle") < text.index("root")


def test_data_dependent_branch_is_unsupported_not_wrong():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(Unsupported, match="data-dependent branch"):
        capture(*_frame(f, torch.ones(2)))


def test_imports_inside_the_trace_only_look_up_loaded_modules():
    import sys

    def loaded(x):
        import json  # noqa: F401

        from torch.nn import functional as F
        return F.relu(x)

    cap = capture(*_frame(loaded, torch.ones(2)))
    torch.testing.assert_close(_run(cap, loaded, -torch.ones(2)), torch.zeros(2))

    def not_loaded(x):
        import tabnanny  # noqa: F401  (a stdlib module nothing here imports)
        return x

    def missing(x):
        import kiln_never_imported_module  # noqa: F401
        return x

    assert "tabnanny" not in sys.modules
    with pytest.raises(Unsupported, match="'tabnanny', which is not imported yet"):
        capture(*_frame(not_loaded, torch.ones(2)))
    assert "tabnanny" not in sys.modules  # nothing was loaded while tracing
    # a module that does not exist raises ModuleNotFoundError, which a try/except could catch
    with pytest.raises(Unsupported, match="No module named 'kiln_never_imported_module'"):
        capture(*_frame(missing, torch.ones(2)))


def test_tracing_restores_grad_mode_on_error():
    def f(x):
        with torch.no_grad():
            return x.numpy().tolist()

    assert torch.is_grad_enabled()
    with pytest.raises(Unsupported):
        capture(*_frame(f, torch.ones(1)))
    assert torch.is_grad_enabled()


# Opcodes the traced corpus may contain that are deliberately never traced: exception
# handling paths (entered only when something raises) and code outside functions.
_NEVER_TRACED = {
    "PUSH_EXC_INFO", "POP_EXCEPT", "CHECK_EXC_MATCH", "WITH_EXCEPT_START", "RERAISE",
    "CLEANUP_THROW", "CHECK_EG_MATCH", "PREP_RERAISE_STAR", "SETUP_ANNOTATIONS",
    "IMPORT_STAR", "LOAD_NAME", "STORE_NAME", "DELETE_NAME",
    "LOAD_BUILD_CLASS", "SEND", "END_SEND", "GET_AWAITABLE", "GET_AITER", "GET_ANEXT",
    "BEFORE_ASYNC_WITH", "END_ASYNC_FOR", "ASYNC_GEN_WRAP", "GET_YIELD_FROM_ITER",
    "MATCH_CLASS", "MATCH_MAPPING", "MATCH_SEQUENCE", "MATCH_KEYS", "GET_LEN",
    "PRINT_EXPR", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF", "LOAD_FROM_DICT_OR_GLOBALS",
    "DELETE_GLOBAL", "DELETE_DEREF", "SET_ADD", "BUILD_SET", "SET_UPDATE",
    "LOAD_SUPER_ATTR", "CALL_INTRINSIC_2", "INTERPRETER_EXIT",
}


def test_every_opcode_of_torch_nn_forwards_has_a_rule_or_is_deliberately_untraced():
    import torch.nn.modules as mods

    seen: set[str] = set()
    for name in dir(mods):
        cls = getattr(mods, name)
        if isinstance(cls, type) and issubclass(cls, nn.Module) and "forward" in cls.__dict__:
            fn = cls.__dict__["forward"]
            if hasattr(fn, "__code__"):
                seen |= {i.name for i in decode(fn.__code__).instructions()}
    missing = sorted(seen - set(opcode_rules) - _NEVER_TRACED)
    assert missing == []
