"""Shared test configuration.

On the Python versions where the environment deliberately has no torch (KILN_TORCH_FREE=1,
set by hatch.toml for 3.12 and 3.13), only the torch-free packages' tests are collected.
Inside a torch-free package, tests that need torch live in files named ``test_torch_*.py``
and are left out too. Anywhere else a missing torch is an error, not a reason to skip.

A package that needs torch may hold a torch-free subpackage (``kiln.symexec.bytecode``):
its test folder is collected there as well (again without its ``test_torch_*.py``), and
since those environments do not install the package, its ``src`` folder is put on
``sys.path`` (``kiln`` is a PEP 420 namespace package there, so the new entry extends it).
"""

import os
import sys

import pytest

# torch.compile's Inductor compiles in a pool of one worker process per CPU (each importing
# torch) in every test process and subprocess that uses it. On the 16-core GPU machine, under
# 16 test workers, test_backends.py's compile_fx test took 155-176 s (9 s on a 2-core CI
# machine), the suite's longest; those pools are the likely cause. One thread compiles the
# same code; a test may still set its own value.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

TORCH_FREE_PACKAGES = ("fxgraph", "frameeval", "guards", "symshapes")
# package test folder -> its torch-free sub-folders (tests/<package>/<sub>)
TORCH_FREE_SUBPACKAGES = {"symexec": ("bytecode",)}

collect_ignore_glob: list[str] = []
if os.environ.get("KILN_TORCH_FREE") == "1":
    here = os.path.dirname(__file__)
    # whole folders, so that their conftest.py (which may import torch) is not loaded either
    collect_ignore_glob = [
        os.path.join(here, name)
        for name in sorted(os.listdir(here))
        if os.path.isdir(os.path.join(here, name))
        and name not in TORCH_FREE_PACKAGES
        and name not in TORCH_FREE_SUBPACKAGES
    ]
    collect_ignore_glob += [os.path.join(here, name, "test_torch_*.py") for name in TORCH_FREE_PACKAGES]
    for package, subfolders in TORCH_FREE_SUBPACKAGES.items():
        folder = os.path.join(here, package)
        collect_ignore_glob += [
            os.path.join(folder, entry)
            for entry in sorted(os.listdir(folder))
            if entry not in subfolders and entry != "__pycache__"
        ]
        collect_ignore_glob += [os.path.join(folder, sub, "test_torch_*.py") for sub in subfolders]
        src = os.path.join(os.path.dirname(here), "packages", package, "src")
        if src not in sys.path:
            sys.path.insert(0, src)


@pytest.fixture(autouse=True)
def _kiln_disk_caches_off(monkeypatch):
    """In-process tests see every compile: no whole graph or captured frame loaded from an
    earlier run's cache directory, and no recompile memory carried from one test to the next (kernel libraries
    are still shared: they are keyed by their source and compile_graph runs either way).
    Tests of those caches turn them on with a cache directory of their own, or run
    processes of their own, which start with kiln's defaults."""
    try:
        from kiln._config import config
    except ImportError:  # the torch-free environments have no umbrella package
        return
    monkeypatch.setattr(config, "graph_cache", False)
    monkeypatch.setattr(config, "frame_cache", False)
    monkeypatch.setattr(config, "recompile_memory", False)


@pytest.fixture
def fresh_kiln(monkeypatch):
    """A reset kiln for the test, whose own bugs fail the test instead of running the frame
    eagerly (the default); reset again after it. kiln is imported here, not at the top: the
    torch-free environments load this file too."""
    import kiln

    monkeypatch.setattr(kiln.config, "raise_internal_errors", True)
    kiln.reset()
    yield
    kiln.reset()
