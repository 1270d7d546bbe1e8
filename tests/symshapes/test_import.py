"""The core imports without torch: importing kiln.symshapes must not pull torch in."""

from __future__ import annotations

import subprocess
import sys


def test_core_does_not_import_torch():
    code = "import sys, kiln.symshapes as s; s.ShapeEnv().create_symint(4, 'x'); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=None)
    assert out.stdout.strip() == "False"


def test_public_api_is_exported():
    import kiln.symshapes as s

    for name in s.__all__:
        assert hasattr(s, name), name
