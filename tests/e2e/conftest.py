"""Fixtures for whole-pipeline tests: a fresh kiln per test and a counting backend."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # cases.py and e2e_support.py
# the repository root: the ``benchmarks`` package (workloads the tests share with the benchmarks;
# ``hatch test`` runs pytest without the working directory on sys.path)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from e2e_support import CountingBackend

import kiln


@pytest.fixture(autouse=True)
def fresh_kiln(monkeypatch):
    # A bug of kiln's own fails the test instead of running the frame eagerly (the default)
    monkeypatch.setattr(kiln.config, "raise_internal_errors", True)
    kiln.reset()
    yield
    kiln.reset()


@pytest.fixture
def counting():
    return CountingBackend()
