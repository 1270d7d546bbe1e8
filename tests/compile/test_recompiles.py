"""Guards at work: what recompiles, what never does, and what the recompile log says."""

import logging

import pytest
import torch
from e2e_support import CountingBackend
from torch import nn

import kiln

SCALE = 2.0


def scaled(x):
    return x * SCALE


def total(xs):
    return sum(x * 2 for x in xs)


def plain(x):
    return torch.relu(x) + 1


def _compile(fn, **options):
    backend = CountingBackend()
    return kiln.compile(fn, backend=backend, **options), backend


def test_unchanged_inputs_never_recompile():
    compiled, backend = _compile(plain)
    for _ in range(20):
        torch.testing.assert_close(compiled(torch.ones(3)), plain(torch.ones(3)))
    assert len(backend.graphs) == 1


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(lambda: torch.ones(3, dtype=torch.float64), id="dtype"),
        pytest.param(lambda: torch.ones(4), id="shape"),
        pytest.param(lambda: torch.ones(3, requires_grad=True), id="requires_grad"),
        pytest.param(lambda: torch.ones(3, 2)[:, 0], id="stride"),
    ],
)
def test_tensor_changes_recompile(second, caplog):
    compiled, backend = _compile(plain)
    compiled(torch.ones(3))
    with caplog.at_level(logging.INFO, logger="kiln.recompiles"):
        x = second()
        torch.testing.assert_close(compiled(x), plain(x))
    assert len(backend.graphs) == 2
    (record,) = [r for r in caplog.records if r.name == "kiln.recompiles" and "recompiling" in r.getMessage()]
    assert "tensor L['x']" in record.getMessage()
    # both entries stay usable
    compiled(torch.ones(3))
    compiled(second())
    assert len(backend.graphs) == 2


def test_module_flag_recompiles_and_log_names_it(caplog):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    model.eval()
    compiled = kiln.compile(model, backend=(backend := CountingBackend()))
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), model(x))
    model.train()
    with caplog.at_level(logging.INFO, logger="kiln.recompiles"):
        compiled(x)
    assert len(backend.graphs) == 2
    message = " ".join(r.getMessage() for r in caplog.records if r.name == "kiln.recompiles")
    assert "training" in message and "expected False, got True" in message


def test_global_constant_change_recompiles():
    global SCALE
    compiled, backend = _compile(scaled)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), x * 2.0)
    SCALE = 3.0
    try:
        torch.testing.assert_close(compiled(x), x * 3.0)
    finally:
        SCALE = 2.0
    assert len(backend.graphs) == 2
    torch.testing.assert_close(compiled(x), x * 2.0)
    assert len(backend.graphs) == 2


def test_global_of_another_module_read_by_inlined_code_is_guarded(caplog):
    import library_code as lib

    def fn(x):
        return lib.scaled(x)

    compiled, backend = _compile(fn)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), x * 3.0)
    lib.SCALE = 5.0
    try:
        with caplog.at_level(logging.INFO, logger="kiln.recompiles"):
            torch.testing.assert_close(compiled(x), x * 5.0)
    finally:
        lib.SCALE = 3.0
    assert len(backend.graphs) == 2
    message = " ".join(r.getMessage() for r in caplog.records if r.name == "kiln.recompiles")
    assert "M['library_code'].SCALE" in message
    torch.testing.assert_close(compiled(x), x * 3.0)
    assert len(backend.graphs) == 2


def test_environment_variables_read_are_guarded_one_by_one(monkeypatch):
    import library_code as lib

    def fn(x):
        return lib.env_flag(x)

    monkeypatch.delenv("KILN_TEST_FLAG", raising=False)
    monkeypatch.delenv("KILN_TEST_OTHER", raising=False)
    compiled, backend = _compile(fn)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), x + 0)
    monkeypatch.setenv("KILN_TEST_UNRELATED", "1")  # not read: no recompile
    torch.testing.assert_close(compiled(x), x + 0)
    assert len(backend.graphs) == 1
    monkeypatch.setenv("KILN_TEST_OTHER", "")
    torch.testing.assert_close(compiled(x), x + 1)
    monkeypatch.setenv("KILN_TEST_FLAG", "1")
    torch.testing.assert_close(compiled(x), x * 10)
    assert len(backend.graphs) == 3
    monkeypatch.delenv("KILN_TEST_FLAG")
    monkeypatch.delenv("KILN_TEST_OTHER")
    torch.testing.assert_close(compiled(x), x + 0)
    assert len(backend.graphs) == 3


def test_list_length_change_recompiles():
    compiled, backend = _compile(total)
    xs = [torch.ones(2), torch.ones(2)]
    torch.testing.assert_close(compiled(xs), total(xs))
    xs3 = [*xs, torch.ones(2)]
    torch.testing.assert_close(compiled(xs3), total(xs3))
    assert len(backend.graphs) == 2


def test_grad_mode_is_guarded():
    compiled, backend = _compile(plain)
    x = torch.ones(3, requires_grad=True)
    assert compiled(x).requires_grad
    with torch.no_grad():
        assert not compiled(x).requires_grad
    assert len(backend.graphs) == 2


def test_recompile_limit_falls_back_to_eager_with_a_warning():
    kiln.config.recompile_limit = 3
    try:
        compiled, backend = _compile(plain, dynamic=False)  # every new size is a new graph
        for n in range(1, 4):
            compiled(torch.ones(n + 1))
        with pytest.warns(UserWarning, match=r"plain .*recompile_limit=3.*tensor L\['x'\] size\(0\)"):
            out = compiled(torch.ones(9))
        torch.testing.assert_close(out, plain(torch.ones(9)))
        assert len(backend.graphs) == 3
        # the entries it has still serve their inputs; new shapes run eagerly, silently
        compiled(torch.ones(2))
        torch.testing.assert_close(compiled(torch.ones(11)), plain(torch.ones(11)))
        assert len(backend.graphs) == 3
    finally:
        kiln.config.recompile_limit = 8


def test_accumulated_limit_stops_new_compiles():
    kiln.config.accumulated_recompile_limit = 2
    try:
        compiled, backend = _compile(plain, dynamic=False)
        compiled(torch.ones(2))
        compiled(torch.ones(3))
        with pytest.warns(UserWarning, match="accumulated_recompile_limit=2"):
            compiled(torch.ones(4))
        assert len(backend.graphs) == 2
    finally:
        kiln.config.accumulated_recompile_limit = 256


def test_adding_a_module_hook_after_compiling_recompiles():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    backend = CountingBackend()
    compiled = kiln.compile(model, backend=backend)
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), model(x))
    handle = model[0].register_forward_hook(lambda mod, args, out: out * 10)
    try:
        torch.testing.assert_close(compiled(x), model(x))  # the hook runs
        assert len(backend.graphs) == 2
    finally:
        handle.remove()
    torch.testing.assert_close(compiled(x), model(x))
    assert len(backend.graphs) == 2  # the first entry serves again


def _append_and_count(a, b, x):
    a.append(x)
    return x * len(b)


def test_one_object_by_two_paths_is_one_tracker_guarded_by_identity():
    compiled, backend = _compile(_append_and_count)
    x = torch.ones(2)
    shared = [x]
    # traced with the same list twice: the append shows through the other name
    torch.testing.assert_close(compiled(shared, shared, x), x * 2)
    assert len(shared) == 2
    # then with two lists: the identity guard fails, a second graph reads b's own length
    a, b = [x], [x]
    torch.testing.assert_close(compiled(a, b, x), x * 1)
    assert (len(a), len(b)) == (2, 1)
    assert len(backend.graphs) == 2


def test_distinct_objects_the_trace_changed_stay_distinct():
    compiled, backend = _compile(_append_and_count)
    x = torch.ones(2)
    torch.testing.assert_close(compiled([x], [x], x), x * 1)
    shared = [x]
    # the same list for both now: eager would count the append, so this must not reuse
    # the graph traced with distinct lists
    torch.testing.assert_close(compiled(shared, shared, x), x * 2)
    assert len(backend.graphs) == 2


def test_dict_values_are_guarded_only_when_read():
    def fn(x, cfg):
        return x * cfg["scale"] if "shift" not in cfg else x + cfg["shift"]

    compiled, backend = _compile(fn)
    x = torch.ones(2)
    cfg = {"scale": 2.0, "name": "a", "sizes": [1, 2, 3]}
    torch.testing.assert_close(compiled(x, cfg), x * 2)
    cfg["name"] = "b"            # never read: no recompile
    cfg["sizes"].append(4)
    torch.testing.assert_close(compiled(x, cfg), x * 2)
    assert len(backend.graphs) == 1
    cfg["scale"] = 3.0           # read: recompile
    torch.testing.assert_close(compiled(x, cfg), x * 3)
    cfg["shift"] = 1.0           # a new key: recompile
    torch.testing.assert_close(compiled(x, cfg), x + 1)
    assert len(backend.graphs) == 3


class _Options:
    def __init__(self):
        self.scale = 2.0


def test_an_attribute_found_missing_is_guarded_missing():
    def fn(x, opts):
        return x * (opts.shift if hasattr(opts, "shift") else opts.scale)

    compiled, backend = _compile(fn)
    x, opts = torch.ones(2), _Options()
    torch.testing.assert_close(compiled(x, opts), x * 2)
    opts.shift = 5.0
    torch.testing.assert_close(compiled(x, opts), x * 5)
    assert len(backend.graphs) == 2


def test_an_attribute_found_missing_on_an_input_tensor_is_guarded_missing():
    def fn(x):
        return x * 2 if hasattr(x, "scale_hint") else x + 1

    compiled, backend = _compile(fn)
    x = torch.arange(3.0)
    torch.testing.assert_close(compiled(x), x + 1)
    y = torch.arange(3.0)
    y.scale_hint = 3
    # the guard fails; the new trace cannot see an attribute set on a tensor, so it breaks
    # at hasattr (run for real) and the resume function captures x * 2
    torch.testing.assert_close(compiled(y), y * 2)
    assert len(backend.graphs) == 2
