"""Differential fuzzing of kiln's frontend (issue 11, item 18): hypothesis draws small Python
programs over tensors and Python values (tests/e2e/fuzz_programs.py); each runs eagerly and
through ``kiln.compile`` (backend="eager" and a callable backend), three calls each, and must
agree on results, mutated inputs, ``is`` and storage relations, exceptions and globals, and
keep the graph-break invariants under ``kiln.explain``. A fixed, derandomized budget runs here;
scripts/fuzz.py runs for as long as asked and saves what it finds to fuzz_regressions.py,
whose programs run here as regression cases. The fuzzer's own checks are tested too: a wrong
backend, a lost mutation, a broken identity must be reported."""

import pytest
import torch
from fuzz_programs import (
    BACKENDS,
    Failure,
    HypothesisDraw,
    Outcome,
    RandomDraw,
    build,
    call,
    check_program,
    compare_outcomes,
    generate,
    make_inputs,
    minimise,
    signature,
    variant_of,
)
from fuzz_regressions import REGRESSIONS
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

FUZZ_EXAMPLES = 120  # about 10 s here when the machine is idle


# No explain phase: it runs the test under sys.settrace, whose tracer frames kiln would compile.
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink])
@given(st.data())
def test_fuzzed_programs_agree_with_eager(data):
    source = generate(HypothesisDraw(data))
    note(source)
    failures = [f for f in check_program(source, "<fuzz hypothesis>") if f.kind != "gap"]
    assert not failures, "\n".join(map(str, failures)) + "\n" + source


@pytest.mark.parametrize("source", [s for _, s in REGRESSIONS], ids=[name for name, _ in REGRESSIONS])
def test_regression(source):
    failures = [f for f in check_program(source, "<fuzz regression>") if f.kind != "gap"]
    assert not failures, "\n".join(map(str, failures)) + "\n" + source


# --- the fuzzer itself ---------------------------------------------------------------------


def test_generation_is_a_function_of_the_seed():
    assert generate(RandomDraw(7)) == generate(RandomDraw(7))
    assert len({generate(RandomDraw(s)) for s in range(20)}) == 20


def test_generated_programs_are_valid_python():
    for s in range(1000):  # seed 500435 once bound a name in an option it did not choose
        compile(generate(RandomDraw(s)), f"<fuzz {s}>", "exec")
    compile(generate(RandomDraw(500435)), "<fuzz 500435>", "exec")


def test_most_programs_run_in_eager_and_cover_the_grammar():
    sources = [generate(RandomDraw(s)) for s in range(300)]
    ran = 0
    for i, source in enumerate(sources):
        fn, _ = build(source, f"<fuzz grammar {i}>")
        ran += call(fn, make_inputs(0, 3, variant_of(source))).error is None
    assert ran >= 0.7 * len(sources)
    text = "\n".join(sources)
    for construct in ("add_(", "[0].add_(1)", "inplace=True", "out=", " @= ", " //= ", " <<= ", " ^= ",
                      ".append(", ".extend(", ".pop(", ".insert(", ".setdefault(", ".update(", "d.items()",
                      " for ", "nonlocal ", "lambda ", "obj.a += 1", "m.scale", "m.forward = ",
                      ".item() > 0:", " is ", "len(", "locals()", "vars(", "GL.", "dict(UM",
                      "if n > 2:", "# inputs: y_is_x", "# inputs: y_view_of_x", "try:", "except ",
                      "with torch.no_grad():", " = m(", "m.__call__("):
        assert construct in text, construct


def wrong_backend(gm, example_inputs):
    """Adds 1 to every tensor the graph returns: the checker must see it."""
    forward = gm.forward

    def run(*args):
        out = forward(*args)
        return type(out)(o + 1 if isinstance(o, torch.Tensor) else o for o in out)

    return run


def test_checker_reports_a_wrong_backend():
    source = "# inputs: plain\ndef f(x, y, k, n, lst, d, obj, m):\n    z = x * 2 + y\n    return (z,)\n"
    assert check_program(source, backends=BACKENDS) == []
    failures = check_program(source, backends=[("wrong", wrong_backend)], graphs=False)
    assert [f.kind for f in failures] == ["output"]


def test_checker_compares_mutations_identity_storage_and_exceptions():
    args = make_inputs(0, 3, "plain")
    x = args[0]
    same = Outcome(args, (x, x.view(-1)))
    assert compare_outcomes(same, Outcome(args, (x, x.view(-1))), "here") == []
    copied = Outcome(args, (x.clone(), x.view(-1)))
    assert [f.kind for f in compare_outcomes(copied, same, "here")] == ["identity"]
    detached = Outcome(args, (x, x.view(-1).clone()))
    assert [f.kind for f in compare_outcomes(detached, same, "here")] == ["alias"]
    mutated = make_inputs(0, 3, "plain")
    mutated[4].append(1)
    assert [f.kind for f in compare_outcomes(Outcome(mutated, None), Outcome(args, None), "here")] == ["mutation"]
    raised = Outcome(args, error=KeyError("a"))
    assert [f.kind for f in compare_outcomes(raised, Outcome(args, None), "here")] == ["exception"]
    assert compare_outcomes(Outcome(args, error=KeyError("b")), raised, "here") == []
    assert [f.kind for f in compare_outcomes(Outcome(args, error=IndexError()), raised, "here")] == ["exception"]


def test_graph_invariants_need_a_break_for_item_and_none_without():
    plain = "# inputs: plain\ndef f(x, y, k, n, lst, d, obj, m):\n    x.add_(1)\n    return (x * 2,)\n"
    assert check_program(plain) == []
    # A '# break' marker on a line kiln captures whole: the checker must object.
    marked = plain.replace("x.add_(1)", "x.add_(1)  # break")
    assert [f.kind for f in check_program(marked)] == ["graphs"]


def test_minimise_keeps_the_failure_and_drops_the_rest():
    source = ("# inputs: y_is_x\ndef f(x, y, k, n, lst, d, obj, m):\n    v1 = x + 1\n    lst.append(v1)\n"
              "    z = v1 * 2  # break\n    obj.a += 1\n    return (z, lst, v1,)\n")
    failures = check_program(source)
    assert [f.kind for f in failures] == ["graphs"]
    smaller = minimise(source, failures[0])
    assert [signature(f) for f in check_program(smaller)] == [signature(failures[0])]
    assert smaller == ("# inputs: plain\ndef f(x, y, k, n, lst, d, obj, m):\n"
                       "    v1 = x + 1\n    z = v1 * 2  # break\n    return (v1,)\n")


def test_failure_signatures_group_by_kind_and_error():
    a = Failure("exception", "backend=eager call 0: kiln raised ValueError('x') at a.py:3, eager returned")
    b = Failure("exception", "backend=callable call 2: kiln raised ValueError('y') at a.py:3, eager returned")
    assert signature(a) == signature(b) == "exception:ValueError:a.py:3"
    assert signature(Failure("output", "result[0]: differ")) == "output"


def test_driver_saves_minimised_programs_as_regression_cases(tmp_path, monkeypatch):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "fuzz.py"
    spec = importlib.util.spec_from_file_location("kiln_fuzz_driver", path)
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    target = tmp_path / "regressions.py"
    target.write_text("REGRESSIONS = []\n\n\ndef _add(name, source):\n    REGRESSIONS.append((name, source))\n")
    monkeypatch.setattr(driver, "REGRESSIONS", target)
    program = "# inputs: plain\ndef f(x, y, k, n, lst, d, obj, m):\n    x.add_(1)\n    return (x,)\n"
    summary = {"signatures": {
        'graphs:reason "quoted" _': {"kind": "graphs", "detail": "d", "seeds": [5], "minimal": program},
        "gap:id": {"kind": "gap", "detail": "d", "seeds": [6], "minimal": program.replace("1", "2")},
    }}
    assert driver.save(summary) == 1
    assert driver.save(summary) == 0  # already there
    namespace = {}
    exec(target.read_text(), namespace)
    assert namespace["REGRESSIONS"] == [("graphs-reason-quoted-5", program)]
