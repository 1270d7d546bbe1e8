"""The package imports and works without torch (run with torch hidden from imports)."""

import os
import subprocess
import sys
import textwrap

import kiln.guards

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["torch"] = None  # any `import torch` now raises ImportError
    import kiln.guards as g
    assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
    gs = g.GuardSet([g.TypeMatch(g.LocalSource("n"), int), g.EqualsMatch(g.LocalSource("n"), 3)])
    check = gs.compile()
    assert check({"n": 3}) and not check({"n": 4})
    print(check.explain({"n": 4}))
    """
)


def test_imports_and_checks_without_torch():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=env, check=False, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "L['n'] == 3: expected 3, got 4"


def test_public_api_is_exported():
    for name in kiln.guards.__all__:
        assert hasattr(kiln.guards, name), name
    assert kiln.guards.__version__
