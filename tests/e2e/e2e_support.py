"""Helpers shared by the whole-pipeline tests."""

import copy
import types

import torch

import kiln


@kiln.disable
def eager_item(t):
    """``t.item()`` in a call kiln does not trace: a graph break at the call that gives a
    Python number (``.item()`` itself stays in the graph as a data-dependent number)."""
    return t.item()


def outcome(fn, *args):
    """``(result, None)``, or ``(None, the exception's type)`` when ``fn(*args)`` raises."""
    try:
        return fn(*args), None
    except Exception as e:  # the user's exception, compared by type
        return None, type(e)


class CountingBackend:
    """A backend that records every graph it is given and runs it as generated (``"eager"``)
    or through kiln.aotgrad (``"aot_eager"``: ATen forward and backward graphs; a graph
    aotgrad refuses runs as generated, its reason kept in ``refused``), or through aotgrad
    and kiln.inductor (``"inductor"``: C++ kernels)."""

    handles_dynamic_inputs = True  # both serve every input the guards admit

    def __init__(self, backend="eager"):
        self.backend = backend
        self.graphs = []
        self.refused = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        if self.backend == "eager":
            return gm.forward
        import kiln
        from kiln._backends import _guard_sink
        from kiln.aotgrad import AotUnsupported, aot_compile

        context = kiln.compile_context()
        compilers = {}
        if self.backend == "inductor":  # kiln.inductor compiles the ATen graphs; its errors fail the test
            from kiln.inductor import aten_compiler, decompositions

            compiler = aten_compiler()
            compilers = {"fw_compiler": compiler, "bw_compiler": compiler, "decompositions": decompositions()}
        try:
            return aot_compile(gm, example_inputs, context, accept_guards=_guard_sink(context), **compilers)
        except AotUnsupported as e:
            self.refused.append(str(e))
            return gm.forward


def clone_args(args):
    """Deep copies of the arguments (tensors cloned), so eager and compiled runs don't share."""
    return copy.deepcopy(args)


def assert_same(actual, expected, path="result"):
    """Equal structure, types and values; tensors with torch's default float tolerances."""
    assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad differs"
    elif type(expected).__name__ == "ndarray":
        import numpy as np

        np.testing.assert_array_equal(actual, expected, err_msg=path)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=False)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_same(actual[k], expected[k], f"{path}[{k!r}]")
    elif hasattr(expected, "__dict__") and not isinstance(expected, (types.FunctionType, type)):
        assert_same(vars(actual), vars(expected), f"{path}.__dict__")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def check_one_graph(counting, fn, *args, graphs=1):
    """``fn`` compiled with ``counting``: the result equals eager's, the compile made exactly
    ``graphs`` graphs and took no graph break. Returns the compiled function."""
    import kiln

    compiled = kiln.compile(fn, backend=counting)
    assert_same(compiled(*args), fn(*args))
    assert len(counting.graphs) == graphs
    assert kiln.session().stats.breaks == []
    return compiled
