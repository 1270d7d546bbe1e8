"""The main job end to end on a small configuration: right numbers, a report that shows them."""

import json
import os

from kiln.__main__ import main
from kiln.demo import GPTConfig, default_report_path, render_html, render_text, run_demo
from kiln.demo._run import GRAPH_LINES, shorten

SMALL = GPTConfig(vocab=32, block=8, layers=1, heads=2, width=16)
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_demo_on_a_small_gpt(tmp_path):
    result = run_demo("cpu", rounds=1, config=GPTConfig(vocab=64, block=16, layers=2, heads=2, width=32),
                      batch=2)
    assert result.graphs == 1 and result.graph_breaks == 0 and result.break_reasons == []
    assert result.compiled_graphs == 1  # really compiled, not a silent eager fallback
    assert result.ops > 30 and result.guards > 10
    assert result.numerics == {"inference output": True, "training loss": True, "gradients": True,
                               "parameters after SGD step": True}
    assert set(result.inference_ms) == set(result.train_step_ms) == {"eager", "kiln", "torch.compile"}
    assert all(v > 0 for v in result.compile_s.values())
    text = render_text(result)
    assert "graphs captured              1 (compiled by kiln.compile: 1)" in text and "numerics match eager         yes" in text
    page = render_html(result)
    assert page.count("<svg") == 1 and page.count("<rect") >= 6
    assert "training step" in page and "match" in page


def test_the_demo_shows_the_graph_code_and_some_guards():
    result = run_demo("cpu", rounds=1, config=SMALL, batch=2)
    (code,) = result.graph_code
    assert code.startswith("def forward(") and "more lines)" in code
    assert len(code.splitlines()) == GRAPH_LINES + 1
    assert max(map(len, code.splitlines())) <= 110
    assert len(result.guard_examples) == 8 and result.guards > 8
    text = render_text(result)
    assert "graph 1 of 1 (its generated code, shortened):\n  def forward(" in text
    assert f"guards (8 of {result.guards}):" in text
    assert all(f"  {g}" in text for g in result.guard_examples)
    page = render_html(result)
    assert "<pre>def forward(" in page and f"(8 of {result.guards})" in page


def test_shorten():
    assert shorten("a\nb\n", 2) == "a\nb"
    assert shorten("a\nb\nc\nd", 2) == "a\nb\n    ... (2 more lines)"
    assert shorten("x" * 20 + "\nb", 5, width=10) == "xxxxxx ...\nb"


def test_the_report_goes_to_the_cache_folder_by_default(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("kiln.demo.run_demo", lambda device, rounds: run_demo(device, rounds=1, config=SMALL, batch=2))
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
    small = SMALL
    monkeypatch.setattr("kiln.demo.run_demo", lambda device, rounds: run_demo(device, rounds=1, config=small, batch=2))
    report, data = tmp_path / "r.html", tmp_path / "r.json"
    assert main(["demo", "--device", "cpu", "--report", str(report), "--json", str(data)]) == 0
    assert report.read_text().startswith("<!doctype html>")
    assert json.loads(data.read_text())["graphs"] == 1
    assert f"report: {report}" in capsys.readouterr().out
