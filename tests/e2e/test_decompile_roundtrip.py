"""The graph-break tests run again with kiln's generated code replaced by its decompiled source.

Twice: once with every resume function kiln makes (``kiln.symexec.bytecode.make_resume``)
replaced by ``decompile_code(resume).recompile()`` (the user's source continued at the break,
compiled again with the user's file and lines), once with every replacement code object
(``Capture.replacement``) replaced likewise (its source compiled again, the objects it holds
bound back). The tests of ``test_graph_breaks``, ``test_cheaper_breaks`` and
``test_run_time_errors_in_try`` then run as they are (the same answers as eager, the same graph
and break counts), and so do the forced breaks at every breakable instruction of the e2e corpus
(``test_forced_breaks``). Code that cannot be decompiled exactly stays bytecode; each test
prints how much was decompiled exactly (run with ``-s`` to see ``... decompiled exactly: N of
M``) and every part that was not says why.
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

    def recompiled(self, code):
        """``code`` decompiled and compiled again where it is exact (its arguments kept);
        ``code`` itself where it is not (which must say why)."""
        result = decompile_code(code)
        self.total += 1
        if not result.exact:
            assert result.why, "generated code not decompiled exactly must say why"
            self.why[result.why] += 1
            return code
        self.exact += 1
        again = result.recompile()
        assert again.co_varnames[:again.co_argcount] == code.co_varnames[:code.co_argcount]
        return again


@pytest.fixture(params=["resume functions", "replacements"])
def decompiled(request, monkeypatch):
    """The resume functions, or the replacement code, made while the test runs are their
    decompiled source, recompiled (a replacement with the objects it holds bound again)."""
    tally = Tally()
    if request.param == "resume functions":
        def make(code, target, stack, local_names, *, name):
            again = tally.recompiled(make_resume(code, target, stack, local_names, name=name))
            assert again.co_filename == code.co_filename  # the user's file and lines
            return again

        monkeypatch.setattr(breaks, "make_resume", make)
    else:
        from kiln.symexec._capture_result import Capture

        original = Capture.replacement
        monkeypatch.setattr(Capture, "replacement", lambda self, compiled, template=None:
                            tally.recompiled(original(self, compiled, template)))
    yield tally
    print(f"\n{request.param} decompiled exactly: {tally.exact} of {tally.total}")
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
def test_graph_break_tests_pass_with_decompiled_code(test, params, request, decompiled):
    fixtures = {name: request.getfixturevalue(name) for name in inspect.signature(test).parameters
                if name not in params}
    test(**params, **fixtures)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forced_breaks_with_decompiled_code(name, decompiled):
    test_forced_breaks.test_forced_break_at_every_breakable_instruction(name, compile_resumes=False)
