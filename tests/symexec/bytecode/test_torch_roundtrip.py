"""Round trip of every code object in torch.nn.modules: byte-identical, and running forwards.

Same checks as test_roundtrip.py over the torch.nn.modules package; the workload runs real
modules (linear, conv, recurrent, transformer, normalization, losses, backward) with the
re-assembled code swapped in, in a fresh interpreter, and compares output digests.
"""

from __future__ import annotations

import importlib.util
import pkgutil
from pathlib import Path

import pytest
import torch.nn.modules

from kiln.symexec.bytecode import assemble, decode

_spec = importlib.util.spec_from_file_location("_bytecode_rt", Path(__file__).with_name("test_roundtrip.py"))
rt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rt)

TORCH_MODULES = ["torch.nn.modules." + m.name for m in pkgutil.iter_modules(torch.nn.modules.__path__)]


@pytest.fixture(scope="module")
def torch_codes() -> list:
    codes = rt.corpus(TORCH_MODULES)
    assert len(codes) > 900
    return codes


def test_torch_round_trip_is_byte_identical(torch_codes):
    assert rt.mismatches(torch_codes, lambda c: assemble(decode(c))) == []


def test_torch_modules_run_the_same_with_swapped_code():
    original = rt.run_workload("torch", "original")
    identity = rt.run_workload("torch", "identity")
    nops = rt.run_workload("torch", "nops")
    assert identity["swapped"] > 600 and identity["identical"] == identity["swapped"]
    assert nops["swapped"] == identity["swapped"] and nops["identical"] == 0
    assert identity["results"] == original["results"]
    assert nops["results"] == original["results"]
