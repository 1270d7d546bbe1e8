"""The main job: end to end on a small configuration (right numbers: kiln's default backend,
inductor, checked against eager; both comparisons measured), and the report that shows it
(rendered from made-up figures, so that those tests run in milliseconds)."""

import json
import math
import os

import pytest

from kiln.__main__ import main
from kiln.demo import (
    COMPARISONS,
    VARIANTS,
    Comparison,
    DemoResult,
    GPTConfig,
    default_report_path,
    render_html,
    render_text,
    run_demo,
)
from kiln.demo._run import GRAPH_LINES, shorten

SMALL = GPTConfig(vocab=32, block=8, layers=1, heads=2, width=16)
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHECKS = ("inference output", "training loss", "gradients", "parameters after SGD step")
WORKLOADS = ("inference", "training step")


@pytest.mark.slow  # torch.compile's Inductor compiles from an empty cache: tens of seconds on 2 cores
def test_demo_on_a_small_gpt():
    result = run_demo("cpu", rounds=1, config=SMALL, batch=2)
    assert result.graphs == 1 and result.graph_breaks == 0 and result.break_reasons == []
    assert result.ops > 30 and result.guards > 10
    # kiln's default backend (aotgrad + inductor) against eager: the demo's claim
    assert result.numerics == dict.fromkeys(CHECKS, True)
    assert list(result.comparisons) == ["backends", "frontends"]
    backends, frontends = result.comparisons["backends"], result.comparisons["frontends"]
    assert backends.variants == ["kiln", "torch.compile"]
    assert frontends.variants == ["kiln (backend='eager')", "torch.compile (backend='eager')"]
    assert backends.numerics["kiln"] == frontends.numerics["kiln (backend='eager')"] == result.numerics
    # one frame for inference and one for the training step, in each comparison: nothing fell
    # back to eager, and the eager backend's variant did not reuse inductor's compiled code
    assert backends.captures == frontends.captures == 2
    # kiln's inductor compiled every ATen graph into C++ kernels (and ATen calls: the matmuls)
    kiln_code = backends.code["kiln"]
    assert kiln_code["inference"]["graphs"] == 1 and kiln_code["training step"]["graphs"] == 2
    assert all(c["kernels"] > 0 and c["externs"] > 0 for c in kiln_code.values())
    torch_code = backends.code["torch.compile"]
    assert torch_code["inference"]["graphs"] == 1 and torch_code["training step"]["graphs"] == 2
    assert all(c["kernels"] > 0 for c in torch_code.values())
    assert frontends.code == {}  # the eager backend generates nothing
    for c in (backends, frontends):
        assert set(c.inference_ms) == set(c.train_step_ms) == {"eager", *c.variants}
        assert all(c.compile_s[v][w] > 0 for v in c.variants for w in WORKLOADS)
        assert set(c.numerics) == set(c.max_diff) == set(c.variants)
    assert all(d < 1e-4 for d in backends.max_diff["kiln"].values())
    (code,) = result.graph_code
    assert code.startswith("def forward(") and "more lines)" in code
    assert len(code.splitlines()) == GRAPH_LINES + 1 and max(map(len, code.splitlines())) <= 110
    assert len(result.guard_examples) == 8 and result.guards > 8
    text = render_text(result)
    assert "\nnumerics match eager (kiln)        yes, both backends\n" in text
    assert "== kiln.compile(model) vs torch.compile(model): each one's default backend ==" in text
    json.dumps(result.as_dict())


def _made_up(kiln_ok: bool = True) -> DemoResult:
    """A DemoResult with figures of the right shape (what run_demo gives, made up)."""
    result = DemoResult("cpu", {"python": "3.11.7", "torch": "2.13.0", "kiln": "0.1.0", "machine": "x86_64"},
                        {"vocab": 32, "block": 8, "layers": 1, "heads": 2, "width": 16}, graphs=1, ops=36,
                        guards=120, guard_examples=[f"guard {i}" for i in range(8)],
                        graph_code=["def forward(self, x):\n    return x\n    ... (3 more lines)"])
    for i, (name, (kiln_v, torch_v)) in enumerate(COMPARISONS.items()):
        variants = [kiln_v.name, torch_v.name]
        c = Comparison(variants, captures=2)
        c.compile_s = {kiln_v.name: {"inference": 1.5, "training step": 4.0},
                       torch_v.name: {"inference": 0.25, "training step": 30.0}}
        if kiln_v.generates_code:
            c.code = {v: {"inference": {"graphs": 1, "kernels": 12, "externs": 25},
                          "training step": {"graphs": 2, "kernels": 40, "externs": 75}} for v in variants}
        c.numerics = {v: dict.fromkeys(CHECKS, True) for v in variants}
        c.max_diff = {v: dict.fromkeys(CHECKS, 1e-6) for v in variants}
        c.numerics[torch_v.name]["inference output"] = False
        c.max_diff[torch_v.name]["inference output"] = 2.5e-5
        c.inference_ms = {"eager": 8.0 + i, kiln_v.name: 4.0, torch_v.name: 5.0}
        c.train_step_ms = {"eager": 30.0, kiln_v.name: 20.0, torch_v.name: 25.0}
        result.comparisons[name] = c
    result.numerics = result.comparisons["backends"].numerics["kiln"]
    if not kiln_ok:
        result.numerics["gradients"] = False
    return result


def test_the_text_report_shows_both_comparisons():
    text = render_text(_made_up())
    assert "first call, kiln vs torch.compile  inference 1.50 s vs 0.25 s (6.00x), training step 4.00 s vs 30.00 s (0.13x)" in text
    assert "numerics match eager (kiln)        yes, both backends" in text
    assert "frames kiln.compile compiled       kiln: 2, kiln (backend='eager'): 2 (inference and training step)" in text
    backends, frontends = text.split("== kiln.compile(model) vs torch.compile(model)")[1].split("== The frontends")
    assert "kiln: aotgrad + inductor" in backends and "torch: Inductor" in backends
    assert "inference: kernels + ATen calls" in backends and "kernels + ATen calls" not in frontends
    lines = {line.split("  ")[0]: line for line in backends.splitlines()}
    assert lines["inference: first call"].split()[-4:] == ["1.5", "s", "250", "ms"]
    assert "12 + 25 (1 graph)" in lines["inference: kernels + ATen calls"]
    assert "40 + 75 (2 graphs)" in lines["training step: kernels + ATen calls"]
    assert lines["inference: steady state"].split() == ["inference:", "steady", "state", "8.00", "ms", "4.00", "ms",
                                                        "5.00", "ms"]
    assert lines["numerics: inference output"].endswith("match, max diff 1.0e-06  MISMATCH, max diff 2.5e-05")
    assert lines["numerics: gradients"].endswith("match, max diff 1.0e-06     match, max diff 1.0e-06")
    assert "9.00 ms" in frontends  # each comparison times its own eager baseline
    assert "backend='eager' for both" in frontends
    assert "not built yet" not in text
    assert "graph 1 of 1 (its generated code, shortened):\n  def forward(" in text
    assert "guards (8 of 120):\n  guard 0" in text


def test_the_text_report_names_kiln_mismatches():
    assert "numerics match eager (kiln)        NO: kiln: gradients" in render_text(_made_up(kiln_ok=False))


def test_the_html_report():
    page = render_html(_made_up())
    assert page.startswith("<!doctype html>") and page.count("<svg") == 2 and page.count("<rect") == 2 * (6 + 3)
    assert page.count("<h2>") == 5
    assert "each one&#x27;s default backend</h2>" in page and "The frontends: backend=&#x27;eager&#x27; for both" in page
    assert "<td>12 + 25 (1 graph)</td>" in page and "<td>MISMATCH, max diff 2.5e-05</td>" in page
    assert "<pre>def forward(" in page and "(8 of 120)" in page
    assert "not built yet" not in page


def test_variants_and_comparisons():
    assert [v.name for v in VARIANTS] == ["kiln", "torch.compile", "kiln (backend='eager')",
                                          "torch.compile (backend='eager')"]
    assert [v.backend for v in VARIANTS] == [None, None, "eager", "eager"]  # None: the default backend
    assert {k: [v.name for v in vs] for k, vs in COMPARISONS.items()} == {
        "backends": ["kiln", "torch.compile"],
        "frontends": ["kiln (backend='eager')", "torch.compile (backend='eager')"]}


def test_shorten():
    assert shorten("a\nb\n", 2) == "a\nb"
    assert shorten("a\nb\nc\nd", 2) == "a\nb\n    ... (2 more lines)"
    assert shorten("x" * 20 + "\nb", 5, width=10) == "xxxxxx ...\nb"


def test_the_report_goes_to_the_cache_folder_by_default(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("kiln.demo.run_demo", lambda device, rounds: _made_up())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(REPO)
    before = set(os.listdir(REPO))
    assert main(["demo", "--device", "cpu"]) == 0
    report = tmp_path / "cache" / "kiln" / "demo-report.html"
    assert default_report_path() == str(report)
    assert report.read_text().startswith("<!doctype html>")
    assert f"report: {report}" in capsys.readouterr().out
    assert not [n for n in set(os.listdir(REPO)) - before if n.endswith(".html")]  # not in the tree
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_report_path() == os.path.expanduser("~/.cache/kiln/demo-report.html")


def test_cli_writes_report_and_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("kiln.demo.run_demo", lambda device, rounds: _made_up())
    report, data = tmp_path / "r.html", tmp_path / "r.json"
    assert main(["demo", "--device", "cpu", "--report", str(report), "--json", str(data)]) == 0
    assert report.read_text().startswith("<!doctype html>")
    figures = json.loads(data.read_text())
    assert figures["graphs"] == 1 and figures["numerics"] == dict.fromkeys(CHECKS, True)
    backends = figures["comparisons"]["backends"]
    assert backends["variants"] == ["kiln", "torch.compile"]
    assert backends["code"]["kiln"]["training step"] == {"graphs": 2, "kernels": 40, "externs": 75}
    assert math.isclose(backends["compile_s"]["torch.compile"]["training step"], 30.0)
    assert f"report: {report}" in capsys.readouterr().out


def test_cli_fails_when_kiln_does_not_match_eager(tmp_path, monkeypatch):
    monkeypatch.setattr("kiln.demo.run_demo", lambda device, rounds: _made_up(kiln_ok=False))
    assert main(["demo", "--device", "cpu", "--report", str(tmp_path / "r.html")]) == 1


def test_cli_links_the_trace_report_when_a_trace_folder_is_set(tmp_path, capsys, monkeypatch):
    import torch

    import kiln

    folder = tmp_path / "trace"
    monkeypatch.setattr(kiln.config, "trace_dir", str(folder))

    def run_demo(device, rounds):
        kiln.compile(lambda x: x * 2, backend="eager")(torch.ones(2))  # what the demo's compiles write
        return _made_up()

    monkeypatch.setattr("kiln.demo.run_demo", run_demo)
    report = tmp_path / "r.html"
    assert main(["demo", "--device", "cpu", "--report", str(report)]) == 0
    trace_report = folder / "report.html"
    assert trace_report.exists() and "kiln demo: every compile" in trace_report.read_text()
    assert f'id="trace-report" href="{trace_report.as_uri()}"' in report.read_text()
    assert f"trace report: {trace_report}" in capsys.readouterr().out


def test_no_trace_link_without_a_trace_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("KILN_TRACE", raising=False)
    monkeypatch.setattr("kiln.demo.run_demo", lambda device, rounds: _made_up())
    report = tmp_path / "r.html"
    assert main(["demo", "--device", "cpu", "--report", str(report)]) == 0
    assert "trace-report" not in report.read_text()
