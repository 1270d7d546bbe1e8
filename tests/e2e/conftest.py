"""Fixtures for whole-pipeline tests: a fresh kiln per test and a counting backend."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # cases.py and e2e_support.py
# the repository root: the ``benchmarks`` package (workloads the tests share with the benchmarks;
# ``hatch test`` runs pytest without the working directory on sys.path)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from e2e_support import CountingBackend


@pytest.fixture(autouse=True)
def _fresh(fresh_kiln):
    """Every test here starts and ends with a fresh kiln (tests/conftest.py's ``fresh_kiln``)."""
    yield


@pytest.fixture
def counting():
    return CountingBackend()
