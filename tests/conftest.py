"""Shared test configuration.

On the Python versions where the environment deliberately has no torch (KILN_TORCH_FREE=1,
set by hatch.toml for 3.12 and 3.13), only the torch-free packages' tests are collected.
Inside a torch-free package, tests that need torch live in files named ``test_torch_*.py``
and are left out too. Anywhere else a missing torch is an error, not a reason to skip.
"""

import os

TORCH_FREE_PACKAGES = ("fxgraph", "frameeval", "guards", "symshapes")

collect_ignore_glob: list[str] = []
if os.environ.get("KILN_TORCH_FREE") == "1":
    here = os.path.dirname(__file__)
    collect_ignore_glob = [
        os.path.join(here, name, "*")
        for name in sorted(os.listdir(here))
        if os.path.isdir(os.path.join(here, name)) and name not in TORCH_FREE_PACKAGES
    ]
    collect_ignore_glob += [os.path.join(here, name, "test_torch_*.py") for name in TORCH_FREE_PACKAGES]
