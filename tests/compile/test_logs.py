"""KILN_LOGS and kiln.set_logs: every name documented, an unknown name an error (as TORCH_LOGS)."""

import logging
import os

import pytest
import torch

import kiln
from kiln import _logs

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


@pytest.fixture(autouse=True)
def logs_off(monkeypatch):
    # KILN_LOGS is applied once per value; each test starts from nothing applied
    monkeypatch.delenv("KILN_LOGS", raising=False)
    _logs._apply_env_value.cache_clear()
    yield
    kiln.set_logs()
    _logs._apply_env_value.cache_clear()


@pytest.mark.parametrize("value", ["graphcode", "graph_code,gaurds", " recompile ", "all"])
def test_an_unknown_name_in_kiln_logs_is_an_error_listing_the_valid_ones(monkeypatch, value):
    monkeypatch.setenv("KILN_LOGS", value)
    with pytest.raises(ValueError, match="KILN_LOGS=") as info:
        kiln.compile(lambda x: x + 1, backend="eager")
    message = str(info.value)
    assert all(name in message for name in _logs.ARTIFACTS)
    # and it keeps failing (not applied once and forgotten)
    with pytest.raises(ValueError):
        kiln.compile(lambda x: x + 1, backend="eager")


def test_the_error_suggests_the_closest_name(monkeypatch):
    monkeypatch.setenv("KILN_LOGS", "graphcode")
    with pytest.raises(ValueError, match="did you mean 'graph_code'"):
        kiln.compile(lambda x: x + 1, backend="eager")


def test_set_logs_rejects_an_unknown_name():
    with pytest.raises(ValueError, match=r"unknown kiln log name 'graph'.*valid names: graph_code"):
        kiln.set_logs("graph_code", "graph")
    assert not logging.getLogger("kiln.graph_code").isEnabledFor(logging.INFO)


def test_kiln_logs_turns_the_named_loggers_on(monkeypatch, caplog):
    monkeypatch.setenv("KILN_LOGS", " graph_code , graph_breaks ")

    def fn(x):
        return torch.relu(x) + 1

    compiled = kiln.compile(fn, backend="eager")
    assert logging.getLogger("kiln.graph_code").level == logging.INFO
    assert logging.getLogger("kiln.graph_breaks").level == logging.INFO
    assert logging.getLogger("kiln.guards").level == logging.WARNING
    with caplog.at_level(logging.INFO, logger="kiln.graph_code"):
        compiled(torch.randn(3))
    assert any("graph of" in r.getMessage() and "relu" in r.getMessage() for r in caplog.records)
    # set_logs in code is not undone by the next compile under the same KILN_LOGS
    kiln.set_logs("guards")
    kiln.compile(fn, backend="eager")
    assert logging.getLogger("kiln.graph_code").level == logging.WARNING


def test_every_log_name_is_documented_in_the_readme():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    missing = [name for name in _logs.ARTIFACTS if f"`{name}`" not in text]
    assert missing == []


def test_explain_reads_kiln_logs_too(monkeypatch):
    monkeypatch.setenv("KILN_LOGS", "graphcode")
    with pytest.raises(ValueError, match="did you mean 'graph_code'"):
        kiln.explain(lambda x: x + 1)(torch.randn(2))
