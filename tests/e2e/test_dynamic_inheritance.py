"""Automatic dynamic (``dynamic=None``) is remembered per code object and inherited:

- a resume function takes from the capture of its parent which arguments hold tensors whose
  dimensions are symbols there, and which hold graph-input numbers; the value of the call
  run for real at the break takes the sizes the parent made dynamic;
- a frame compiled as a root of its own while a compiled code runs further up the stack
  (eagerly past its recompile limit, or calling it for real at a graph break) takes the
  dimensions of its tensor arguments whose sizes are sizes that code made dynamic.

Each test counts the captures of every code object exactly and, in its docstring, the counts
before inheritance (each code learned on its own: one static compile, then one more). The
recompile limit warns once for the code that reached it, never for the frames it calls.
"""

import logging
import re
import warnings

import pytest
import torch
from e2e_support import CountingBackend
from torch import nn

import kiln
from kiln.guards import LocalSource


def compile_counts():
    """Captures per code object so far: ``{name: sorted counts}``, one count per code object
    of that name (resume functions named without their line: ``__kiln_resume_in_f``)."""
    counts = {}
    for code, guards in kiln.session().stats.code_guards.items():
        name = re.sub(r"_at_\d+$", "", code.co_name)
        counts.setdefault(name, []).append(len(guards))
    return {name: sorted(c) for name, c in counts.items()}


@kiln.disable
def _opaque(t):
    """Runs eagerly: calling it from compiled code is a graph break."""
    return t.clone()


_seen = []


@kiln.disable
def _record(t):
    _seen.append(tuple(t.shape))


def _run(compiled, fn, calls):
    for args in calls:
        torch.testing.assert_close(compiled(*args), fn(*args))


def _branchy(x):
    y = x * 2
    if y.sum() > 0:  # a data-dependent branch: a break with one resume function per side
        return y + 1
    return y - 1


def test_a_resume_function_first_compiled_after_its_parent_learned_is_dynamic_at_once():
    """Before: 6 graphs (_branchy 2, each resume function 2). The resume function of the
    negative side first runs at batch 4, after _branchy learned that dim 0 of x is dynamic:
    its y is (s0, 3) in _branchy's capture, so it compiles dynamic once. The positive side's
    first compile (batch 2) came before anything was learned: static, then dynamic."""
    counting = CountingBackend()
    compiled = kiln.compile(_branchy, backend=counting)
    _run(compiled, _branchy, [(torch.ones(b, 3) * s,) for b, s in ((2, 1), (3, 1), (4, -1), (5, -1), (6, -1), (7, 1))])
    assert compile_counts() == {"_branchy": [2], "__kiln_resume_in__branchy": [1, 2]}
    assert len(counting.graphs) == 5


def _broken(x):
    y = x.cos()
    _record(y)  # a graph break; the resume function receives y from the graph
    return y * 2


def test_the_minimal_count_when_the_resume_function_starts_with_its_parent():
    """Batch sizes 2, 3, 4, 5: _broken compiles static, then dynamic; so does its resume
    function, whose static entry (batch 2) fails at batch 3 like its parent's. Four graphs,
    as before: no compile can be saved when both first compiled before any size changed."""
    counting = CountingBackend()
    compiled = kiln.compile(_broken, backend=counting)
    _seen.clear()
    _run(compiled, _broken, [(torch.randn(b, 4),) for b in (2, 3, 4, 5)])
    assert compile_counts() == {"_broken": [2], "__kiln_resume_in__broken": [2]}
    assert len(counting.graphs) == 4
    assert _seen == [(b, 4) for b in (2, 3, 4, 5) for _ in (0, 1)]  # compiled and eager runs


def _late_break(x, flag):
    y = x.cos()
    if flag:
        _record(y)  # only taken when flag: the resume function starts late
    return y * 2


@pytest.mark.parametrize(("dynamic", "counts"), [
    (None, {"_late_break": [3], "__kiln_resume_in__late_break": [1]}),
    (False, {"_late_break": [5], "__kiln_resume_in__late_break": [3]}),
])
def test_tensors_the_graph_passes_to_a_late_resume_function_keep_their_symbols(dynamic, counts):
    """Before (dynamic=None): the resume function compiled twice (static at batch 4, dynamic
    at batch 5), 5 graphs in all. Now once: y is (s0, 4) in _late_break's third capture.
    dynamic=False inherits nothing: every size is a graph of each code."""
    counting = CountingBackend()
    compiled = kiln.compile(_late_break, backend=counting, dynamic=dynamic)
    _seen.clear()
    calls = [(torch.randn(b, 4), flag) for b, flag in ((2, False), (3, False), (4, True), (5, True), (6, True))]
    _run(compiled, _late_break, calls)
    assert compile_counts() == counts
    assert len(counting.graphs) == sum(counts["_late_break"]) + sum(counts["__kiln_resume_in__late_break"])


def _late_result(x, flag):
    y = x.cos()
    if flag:
        y = _opaque(y)  # the resume function receives only the call's result
    return y.sin() + 1


def test_the_result_of_the_call_run_for_real_takes_the_sizes_the_parent_made_dynamic():
    """Before: the resume function compiled twice (5 graphs). Its only argument is the
    result of the call run for real, which _late_result's capture cannot describe; its size
    (5, 4) is the current size of x, whose dim 0 _late_result made dynamic: dim 0 is a
    symbol from the resume function's first compile."""
    counting = CountingBackend()
    compiled = kiln.compile(_late_result, backend=counting)
    calls = [(torch.randn(b, 4), flag) for b, flag in ((2, False), (3, False), (5, True), (6, True), (7, True))]
    _run(compiled, _late_result, calls)
    assert compile_counts() == {"_late_result": [3], "__kiln_resume_in__late_result": [1]}
    assert len(counting.graphs) == 4


def _scaled(x, scale, flag):
    y = x * scale
    if flag:
        _record(y)
    return y + scale


def test_graph_input_numbers_carry_over_to_the_resume_function():
    """Before: 5 graphs (the resume function guarded scale by value at 2.5, then learned it
    at 3.5). Now scale is a graph input of _scaled when the break is first taken, so the
    resume function takes it as an input from its first compile: one graph for every scale."""
    counting = CountingBackend()
    compiled = kiln.compile(_scaled, backend=counting)
    x = torch.randn(3, 4)
    calls = [(x, s, flag) for s, flag in ((0.5, False), (1.5, False), (2.5, True), (3.5, True), (-1.0, True))]
    _run(compiled, _scaled, calls)
    assert compile_counts() == {"_scaled": [3], "__kiln_resume_in__scaled": [1]}
    assert len(counting.graphs) == 4
    assert kiln.session().stats.dynamic_numbers[compiled_resume_code("_scaled")] == {LocalSource("scale")}


def compiled_resume_code(parent):
    (code,) = [c for c in kiln.session().stats.code_guards if c.co_name.startswith(f"__kiln_resume_in_{parent}_at_")]
    return code


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 2 * d)
        self.out = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.out(self.fc(self.ln(x)).relu())


class Restless(nn.Module):
    """A model whose guard fails on every call: it counts its calls and branches on the
    count's parity (the branch specializes the counter to its value)."""

    def __init__(self, d=8, blocks=3):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(blocks)])
        self.head = nn.Linear(d, 5)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls % 2:
            x = x * 1.5
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _restless_run(sizes, limit, monkeypatch):
    monkeypatch.setattr(kiln.config, "recompile_limit", limit)
    torch.manual_seed(0)
    model, reference = Restless(), Restless()
    reference.load_state_dict(model.state_dict())
    counting = CountingBackend()
    compiled = kiln.compile(model, backend=counting)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")  # every warning, none folded into an earlier one
        for shape in sizes:
            x = torch.randn(shape)
            torch.testing.assert_close(compiled(x), reference(x))
    assert model.calls == reference.calls == len(sizes)
    return counting, [str(w.message) for w in caught]


def test_past_its_recompile_limit_a_model_runs_eagerly_and_its_layers_compile_once(monkeypatch):
    """Restless.forward recompiles on every call until recompile_limit=4 (its second capture
    learned dim 0 of x), then runs eagerly with one warning. Before: every layer it calls
    then compiled twice as a root of its own (static at batch 6, dynamic at batch 2): 8
    graphs. Now each layer's x has a batch size the model made dynamic: one graph each, 6 in
    all, and no layer warns however many calls follow."""
    sizes = [(b, 8) for b in (2, 3, 4, 5, 6, 2, 3, 4, 5, 6, 7, 9, 11, 13, 2, 3)]
    counting, said = _restless_run(sizes, 4, monkeypatch)
    assert {c.co_qualname: len(g) for c, g in kiln.session().stats.code_guards.items()} == {
        "Restless.forward": 4, "Block.forward": 1, "Linear.forward": 1}
    assert len(counting.graphs) == 6
    assert len(said) == 1 and "Restless.forward" in said[0] and "recompile_limit=4" in said[0]


def test_layers_learn_on_their_own_what_the_model_never_saw_change(monkeypatch):
    """The batch size stays 4 until Restless.forward reached its limit: it learned nothing,
    so its layers compile static first and learn dim 0 when it changes (two each); they never
    reach a limit of their own, and the one warning is the model's."""
    sizes = [(4, 8)] * 5 + [(b, 8) for b in (2, 3, 5, 6, 7)]
    counting, said = _restless_run(sizes, 4, monkeypatch)
    assert {c.co_qualname: len(g) for c, g in kiln.session().stats.code_guards.items()} == {
        "Restless.forward": 4, "Block.forward": 2, "Linear.forward": 2}
    assert len(counting.graphs) == 8
    assert len(said) == 1 and "Restless.forward" in said[0]


def test_a_size_equal_by_chance_is_a_symbol_and_answers_stay_right(monkeypatch):
    """When the model reaches its limit the batch size is 8, the width too: the layers take
    dim 2 (the width) as a symbol as well (and dim 1: the model learned every dim of x when
    its batch changed). Their parameters' sizes tie the width back to 8 (a shape guard, not
    an error); the answers are eager's, and further batch sizes reuse the graph."""
    sizes = [(b, 3, 8) for b in (2, 3, 4, 5, 8, 6, 7, 9)]
    counting, said = _restless_run(sizes, 4, monkeypatch)
    dims = {c.co_qualname: d for c, d in kiln.session().stats.dynamic_dims.items()}
    assert dims["Block.forward"] == {LocalSource("x"): {0, 1, 2}}
    assert {c.co_qualname: len(g) for c, g in kiln.session().stats.code_guards.items()} == {
        "Restless.forward": 4, "Block.forward": 1, "Linear.forward": 1}
    assert len(counting.graphs) == 6 and len(said) == 1


def _helper(x):
    return (x.relu() + 1).sum(-1)


def _picky(x, tag):
    y = x * 2
    if tag.endswith("!"):
        y = y + 1
    return _helper(y) + len(tag)


def test_the_recompile_limit_warns_once_for_its_code_and_never_for_the_frames_it_calls(monkeypatch):
    """_picky is guarded on its string argument, new on every call: past recompile_limit=3
    it runs eagerly, and one warning names it. _helper, a root from then on, compiles once
    (dim 0 inherited: before, twice) and stays compiled over 30 more calls."""
    monkeypatch.setattr(kiln.config, "recompile_limit", 3)
    counting = CountingBackend()
    compiled = kiln.compile(_picky, backend=counting)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run(compiled, _picky, [(torch.randn(2 + i % 7, 4), f"call{i}") for i in range(34)])
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and "_picky" in said[0] and "recompile_limit=3" in said[0]
    assert compile_counts() == {"_picky": [3], "_helper": [1]}
    assert len(counting.graphs) == 4


def _inner(y):
    z = y.sin()
    _record(z)  # inner breaks: calling it breaks _outer at the call
    return z * 3


def _outer(x, flag):
    y = x.cos()
    if flag:
        y = _inner(y)
    return y + 1


def test_a_frame_a_graph_break_runs_for_real_takes_its_callers_dynamic_dims():
    """The call of _inner is a break of _outer, first taken at batch 4 after _outer learned
    dim 0 of x: _inner compiles as a root, its y has the batch size _outer made dynamic, and
    its own resume function gets z from its capture. Before: _inner, its resume function
    and _outer's resume function compiled twice each (9 graphs); now once each (6)."""
    counting = CountingBackend()
    compiled = kiln.compile(_outer, backend=counting)
    _seen.clear()
    calls = [(torch.randn(b, 3), flag) for b, flag in ((2, False), (3, False), (4, True), (5, True), (7, True))]
    _run(compiled, _outer, calls)
    assert compile_counts() == {"_outer": [3], "__kiln_resume_in__outer": [1], "_inner": [1],
                                "__kiln_resume_in__inner": [1]}
    assert len(counting.graphs) == 6


def test_dynamic_true_still_compiles_each_code_once():
    """dynamic=True: every dimension is a symbol from the first compile; inheritance adds
    nothing (one graph per code, as before)."""
    counting = CountingBackend()
    compiled = kiln.compile(_outer, backend=counting, dynamic=True)
    _seen.clear()
    calls = [(torch.randn(b, 3), flag) for b, flag in ((2, True), (3, True), (5, True))]
    _run(compiled, _outer, calls)
    assert compile_counts() == {"_outer": [1], "__kiln_resume_in__outer": [1], "_inner": [1],
                                "__kiln_resume_in__inner": [1]}
    assert len(counting.graphs) == 4


def test_kiln_logs_recompiles_says_where_a_decision_came_from(caplog):
    kiln.set_logs("recompiles")
    try:
        compiled = kiln.compile(_outer, backend=CountingBackend())
        with caplog.at_level(logging.INFO, logger="kiln.recompiles"):
            for b, flag in ((2, False), (3, False), (4, True)):
                compiled(torch.randn(b, 3), flag)
    finally:
        kiln.set_logs()
    said = [r.getMessage() for r in caplog.records if "symbols from now on" in r.getMessage()]
    assert any(m.startswith("_outer: dims [0, 1] of L['x']") and "now (3, 3)" in m for m in said)
    assert any(m.startswith("_inner: dims [0, 1] of L['y']") and "dynamic in the caller _outer" in m for m in said)
    assert any(m.startswith("__kiln_resume_in__inner_at_") and "as in _inner" in m for m in said)
