"""The graph-break tests run again with every resume function replaced by its decompiled source.

kiln makes each resume function with ``kiln.symexec.bytecode.make_resume``; here that call is
wrapped so that the resume function kiln gets is ``decompile_code(resume).recompile()``: the
user's source continued at the break, compiled again (with the user's file and lines). The
tests of ``test_graph_breaks``, ``test_cheaper_breaks`` and ``test_run_time_errors_in_try``
then run as they are (the same answers as eager, the same graph and break counts), and the
forced breaks at every breakable instruction of the e2e corpus (``test_forced_breaks``) run
with their resume functions decompiled. A resume function that cannot be decompiled exactly
stays bytecode; each test prints how many were decompiled exactly out of how many (run with
``-s`` to see ``decompiled exactly: N of M``) and every one that was not says why.
"""

import collections
import inspect

import pytest
import test_cheaper_breaks
import test_forced_breaks
import test_graph_breaks
import test_run_time_errors_in_try
from cases import CASES

import kiln.symexec._breaks as breaks
from kiln.symexec.bytecode import decompile_code, make_resume


class Tally:
    def __init__(self):
        self.exact = 0
        self.total = 0
        self.why = collections.Counter()


@pytest.fixture
def decompiled_resumes(monkeypatch):
    """Resume functions made while the test runs are their decompiled source, recompiled."""
    tally = Tally()

    def make(code, target, stack, local_names, *, name):
        resume = make_resume(code, target, stack, local_names, name=name)
        result = decompile_code(resume)
        tally.total += 1
        if not result.exact:
            assert result.why, "a resume function not decompiled exactly must say why"
            tally.why[result.why] += 1
            return resume
        tally.exact += 1
        again = result.recompile()
        assert again.co_varnames[:again.co_argcount] == resume.co_varnames[:resume.co_argcount]
        assert again.co_filename == code.co_filename
        return again

    monkeypatch.setattr(breaks, "make_resume", make)
    yield tally
    print(f"\ndecompiled exactly: {tally.exact} of {tally.total}")
    for why, n in tally.why.most_common():
        print(f"  not exact ({n}): {why}")


def _tests(module):
    """(id, test function, parameters) of a module's tests, parametrized ones expanded."""
    out = []
    for name, fn in sorted(vars(module).items()):
        if not name.startswith("test_") or not callable(fn):
            continue
        marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
        if not marks:
            out.append(pytest.param(fn, {}, id=f"{module.__name__}.{name}"))
            continue
        if len(marks) != 1 or "," in marks[0].args[0]:
            continue  # several or tuple parameters: not rerun here
        argname, values = marks[0].args[0], marks[0].args[1]
        for k, value in enumerate(values):
            out.append(pytest.param(fn, {argname: value}, id=f"{module.__name__}.{name}[{k}]"))
    return out


_GRAPH_BREAK_TESTS = [
    *_tests(test_graph_breaks),
    *_tests(test_cheaper_breaks),
    *_tests(test_run_time_errors_in_try),
]


@pytest.mark.parametrize(("test", "params"), _GRAPH_BREAK_TESTS)
def test_graph_break_tests_pass_with_decompiled_resume_functions(test, params, request, decompiled_resumes):
    fixtures = {name: request.getfixturevalue(name) for name in inspect.signature(test).parameters
                if name not in params}
    test(**params, **fixtures)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forced_breaks_with_decompiled_resume_functions(name, decompiled_resumes):
    test_forced_breaks.test_forced_break_at_every_breakable_instruction(name, compile_resumes=False)


@pytest.fixture
def decompiled_replacements(monkeypatch):
    """Replacement code made while the test runs is its decompiled source, recompiled (the
    objects it holds bound again): the code kiln installs for each captured frame."""
    from kiln.symexec._capture_result import Capture

    tally = Tally()
    original = Capture.replacement

    def replacement(self, compiled, template=None):
        code = original(self, compiled, template)
        result = decompile_code(code)
        tally.total += 1
        if not result.exact:
            assert result.why, "a replacement not decompiled exactly must say why"
            tally.why[result.why] += 1
            return code
        tally.exact += 1
        again = result.recompile()
        assert again.co_varnames[:again.co_argcount] == code.co_varnames[:code.co_argcount]
        return again

    monkeypatch.setattr(Capture, "replacement", replacement)
    yield tally
    print(f"\nreplacements decompiled exactly: {tally.exact} of {tally.total}")
    for why, n in tally.why.most_common():
        print(f"  not exact ({n}): {why}")


@pytest.mark.parametrize(("test", "params"), _GRAPH_BREAK_TESTS)
def test_graph_break_tests_pass_with_decompiled_replacements(test, params, request, decompiled_replacements):
    fixtures = {name: request.getfixturevalue(name) for name in inspect.signature(test).parameters
                if name not in params}
    test(**params, **fixtures)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forced_breaks_with_decompiled_replacements(name, decompiled_replacements):
    test_forced_breaks.test_forced_break_at_every_breakable_instruction(name, compile_resumes=False)
