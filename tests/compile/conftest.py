import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))  # e2e_support

import kiln


@pytest.fixture(autouse=True)
def fresh_kiln(monkeypatch):
    # A bug of kiln's own fails the test instead of running the frame eagerly (the default)
    monkeypatch.setattr(kiln.config, "raise_internal_errors", True)
    kiln.reset()
    yield
    kiln.reset()
