"""The bytecode layer stays importable without torch and exports what it documents."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import kiln.symexec.bytecode as bytecode

SRC = Path(__file__).parents[3] / "packages" / "symexec" / "src"


def test_importing_the_bytecode_layer_does_not_import_torch():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    code = "import sys, kiln.symexec.bytecode; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"


def test_public_api_is_exported():
    assert all(hasattr(bytecode, name) for name in bytecode.__all__)
    for name in ("decode", "assemble", "Bytecode", "Instr", "Label", "make_code", "disassemble",
                 "ConcreteBytecode", "TABLE", "call_instrs", "with_null"):
        assert name in bytecode.__all__
