import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))  # e2e_support

import kiln


@pytest.fixture(autouse=True)
def fresh_kiln():
    kiln.reset()
    yield
    kiln.reset()
