"""The package's own build (hatch_build.py, _build.py): a regular wheel carries the compiled
extension for the building Python and works when installed alone; a source checkout compiles
a missing or stale extension on import, and says why when it cannot."""

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "packages" / "frameeval"
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")

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
    assert [n for n in names if n.endswith(".so")] == [f"kiln/frameeval/_C{SUFFIX}"]
    assert "kiln/frameeval/_C.pyi" in names
    assert not any("/csrc/" in n for n in names)

    subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", target, wheel], check=True
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-S", "-c", SMOKE], env=env, check=True, capture_output=True, text=True
    )
    assert out.stdout.strip().startswith(str(target))


def checkout_copy(tmp_path):
    """A source checkout of the package alone (no compiled extension), as a fresh clone has."""
    root = tmp_path / "src"
    shutil.copytree(PACKAGE / "src", root, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return root


def run_smoke(root, **env):
    env = {**os.environ, "PYTHONPATH": str(root), **env}
    return subprocess.run(
        [sys.executable, "-S", "-c", SMOKE], env=env, capture_output=True, text=True
    )


def test_source_checkout_compiles_a_missing_extension_on_import(tmp_path):
    root = checkout_copy(tmp_path)
    built = root / "kiln" / "frameeval" / f"_C{SUFFIX}"
    assert not built.exists()
    out = run_smoke(root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(built)
    assert f"compiling {built}" in out.stderr
    # Built once: the next import compiles nothing.
    again = run_smoke(root)
    assert again.returncode == 0, again.stderr
    assert "compiling" not in again.stderr


def test_source_checkout_recompiles_an_extension_older_than_its_sources(tmp_path):
    root = checkout_copy(tmp_path)
    assert run_smoke(root).returncode == 0
    built = root / "kiln" / "frameeval" / f"_C{SUFFIX}"
    old = built.stat().st_mtime - 100
    os.utime(built, (old, old))
    source = root / "kiln" / "frameeval" / "csrc" / "hook.c"
    os.utime(source, (old + 50, old + 50))
    out = run_smoke(root)
    assert out.returncode == 0, out.stderr
    assert f"compiling {built}" in out.stderr
    assert built.stat().st_mtime > old + 50


def test_a_failed_compile_is_a_clear_import_error(tmp_path):
    root = checkout_copy(tmp_path)
    (root / "kiln" / "frameeval" / "csrc" / "hook.c").write_text("this is not C\n")
    out = run_smoke(root)
    assert out.returncode != 0
    assert "ExtensionBuildError" in out.stderr
    assert f"_C{SUFFIX} is missing or older than its sources" in out.stderr
    assert "hook.c" in out.stderr  # the compiler's own message names the file
    assert not list((root / "kiln" / "frameeval").glob("*.so"))
    assert not list((root / "kiln" / "frameeval").glob(".*"))  # no partial output left


def test_an_installed_wheel_never_compiles(tmp_path):
    # No csrc beside the package: a missing extension is the plain import error.
    root = checkout_copy(tmp_path)
    shutil.rmtree(root / "kiln" / "frameeval" / "csrc")
    out = run_smoke(root)
    assert out.returncode != 0
    assert "No module named 'kiln.frameeval._C'" in out.stderr
    assert "compiling" not in out.stderr
