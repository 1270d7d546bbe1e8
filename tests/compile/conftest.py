import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))  # e2e_support
sys.path.insert(0, os.path.dirname(__file__))  # trace_support



@pytest.fixture(autouse=True)
def _fresh(fresh_kiln):
    """Every test here starts and ends with a fresh kiln (tests/conftest.py's ``fresh_kiln``)."""
    yield
