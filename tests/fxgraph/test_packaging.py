"""The core of kiln.fxgraph imports and works with torch unavailable."""

import os
import subprocess
import sys
import textwrap

import kiln.fxgraph


def test_core_works_without_torch():
    script = textwrap.dedent(
        """
        import sys
        sys.modules["torch"] = None  # any ``import torch`` now raises ImportError
        import operator
        import kiln.fxgraph as fx
        g = fx.Graph()
        x = g.placeholder("x")
        g.output(g.call_function(operator.mul, (x, 3)))
        fx.eliminate_dead_code(g)
        fx.eliminate_common_subexpressions(g)
        assert fx.GraphModule({}, g)(2) == 6
        assert fx.Interpreter(fx.GraphModule({}, g)).run(2) == 6
        print("ok")
        """
    )
    src = os.path.dirname(os.path.dirname(os.path.dirname(kiln.fxgraph.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
