"""Build hook: compiles the C extension ``kiln.frameeval._C`` with the system C compiler.

hatchling runs ``CustomBuildHook`` for the wheel target:

- a regular wheel (``pip install packages/frameeval``, ``hatch build``) gets the extension
  compiled in a temporary folder and force-included as ``kiln/frameeval/_C<EXT_SUFFIX>``;
- an editable wheel (``pip install -e``, hatch's workspace) gets it compiled in place, next
  to the sources, where the editable path finds it.

Either way the wheel is tagged for the interpreter that builds it. Running this file with a
Python (``python packages/frameeval/hatch_build.py``) rebuilds the in-place extension for
that Python, for development after editing the C sources.

How it compiles (the compiler and flags from ``sysconfig``, no setuptools) lives in the
package's ``src/kiln/frameeval/_build.py``, which a source checkout also uses on import to
compile a missing or stale extension.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load_build_module():
    """The package's own ``_build`` module, loaded by path: importing ``kiln.frameeval``
    would need the extension this hook is about to compile."""
    path = HERE / "src" / "kiln" / "frameeval" / "_build.py"
    spec = importlib.util.spec_from_file_location("_kiln_frameeval_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_build = _load_build_module()


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # only the script entry point below is usable without hatchling
    BuildHookInterface = object  # type: ignore[assignment,misc]


class CustomBuildHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    """Compiles the extension for wheels (temporary folder) and editable wheels (in place)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version == "editable":
            _build.build_in_place()
            return
        self._tmp = tempfile.mkdtemp(prefix="kiln-frameeval-")
        built = _build.compile_extension(Path(self._tmp) / _build.extension_filename())
        build_data["force_include"][str(built)] = f"kiln/frameeval/{built.name}"

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    print(_build.build_in_place(sys.argv[1:]))
