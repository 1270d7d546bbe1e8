"""Build hook: compiles the C extension ``kiln.frameeval._C`` with the system C compiler.

hatchling runs ``CustomBuildHook`` for the wheel target:

- a regular wheel (``pip install packages/frameeval``, ``hatch build``) gets the extension
  compiled in a temporary folder and force-included as ``kiln/frameeval/_C<EXT_SUFFIX>``;
- an editable wheel (``pip install -e``, hatch's workspace) gets it compiled in place, next
  to the sources, where the editable path finds it.

Either way the wheel is tagged for the interpreter that builds it. Running this file with a
Python (``python packages/frameeval/hatch_build.py``) rebuilds the in-place extension for
that Python, for development after editing the C sources.

The compiler and flags come from ``sysconfig`` of the building interpreter (``CC``, the
include folder); no setuptools is involved. Linux and macOS (gcc or clang) are supported.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE_DIR = HERE / "src" / "kiln" / "frameeval"
C_SOURCES = ("cache.c", "hook.c", "module.c")
EXTENSION = "_C"

CFLAGS = [
    "-std=gnu11",
    "-O2",
    "-fPIC",
    "-fvisibility=hidden",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Wno-missing-field-initializers",
]


def extension_filename() -> str:
    """The file name CPython imports ``kiln.frameeval._C`` from, for this interpreter."""
    return EXTENSION + sysconfig.get_config_var("EXT_SUFFIX")


def compile_extension(output: Path, extra_flags: list[str] | None = None) -> Path:
    """Compile and link the extension into ``output`` (a file path); returns ``output``."""
    include = sysconfig.get_paths()["include"]
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    sources = [str(PACKAGE_DIR / "csrc" / name) for name in C_SOURCES]
    link = ["-shared"]
    if sys.platform == "darwin":
        link += ["-undefined", "dynamic_lookup"]
    output.parent.mkdir(parents=True, exist_ok=True)
    command = [
        *cc,
        *CFLAGS,
        *(extra_flags or []),
        f"-I{include}",
        f"-I{os.path.join(include, 'internal')}",
        *sources,
        *link,
        "-o",
        str(output),
    ]
    subprocess.run(command, check=True)
    return output


def build_in_place(extra_flags: list[str] | None = None) -> Path:
    """Compile the extension next to the Python sources (editable installs, development)."""
    return compile_extension(PACKAGE_DIR / extension_filename(), extra_flags)


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
            build_in_place()
            return
        self._tmp = tempfile.mkdtemp(prefix="kiln-frameeval-")
        built = compile_extension(Path(self._tmp) / extension_filename())
        build_data["force_include"][str(built)] = f"kiln/frameeval/{built.name}"

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    print(build_in_place(sys.argv[1:]))
