"""The package's own build (hatch_build.py): a regular wheel carries the compiled extension
for the building Python and works when installed alone."""

import importlib.util
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "packages" / "frameeval"

SMOKE = """
import kiln.frameeval as fe
def f(a):
    return a
def g(a):
    return -a
fe.add_cache_entry(f.__code__, lambda L: L["a"] > 0, g.__code__)
with fe.callback_set(fe.RUN_ONLY):
    assert (f(1), f(-1)) == (-1, -1), (f(1), f(-1))
print(fe._C.__file__)
"""


def test_wheel_builds_installs_and_runs(tmp_path):
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-build-isolation"]
    subprocess.run([*pip, "wheel", "--no-deps", *isolation, "-w", wheels, PACKAGE], check=True)
    (wheel,) = wheels.glob("kiln_frameeval-*.whl")
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert f"-{tag}-{tag}-" in wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert [n for n in names if n.endswith(".so")] == [f"kiln/frameeval/_C{suffix}"]
    assert "kiln/frameeval/_C.pyi" in names
    assert not any("/csrc/" in n for n in names)

    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", target, wheel], check=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-S", "-c", SMOKE], env=env, check=True, capture_output=True, text=True
    )
    assert out.stdout.strip().startswith(str(target))
