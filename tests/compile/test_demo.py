"""The main job end to end on a small configuration: right numbers, a report that shows them."""

import json

from kiln.__main__ import main
from kiln.demo import GPTConfig, render_html, render_text, run_demo


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


def test_cli_writes_report_and_json(tmp_path, capsys, monkeypatch):
    small = GPTConfig(vocab=32, block=8, layers=1, heads=2, width=16)
    monkeypatch.setattr("kiln.demo.run_demo", lambda device, rounds: run_demo(device, rounds=1, config=small, batch=2))
    report, data = tmp_path / "r.html", tmp_path / "r.json"
    assert main(["demo", "--device", "cpu", "--report", str(report), "--json", str(data)]) == 0
    assert report.read_text().startswith("<!doctype html>")
    assert json.loads(data.read_text())["graphs"] == 1
    assert f"report: {report}" in capsys.readouterr().out
