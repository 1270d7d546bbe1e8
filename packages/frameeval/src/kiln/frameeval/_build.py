"""Compiling the C extension ``kiln.frameeval._C`` with the system C compiler.

Two callers: the package's hatchling build hook (``hatch_build.py``, which loads this file by
path because the package itself cannot be imported before its extension exists), and the
package's ``__init__`` in a source checkout, through :func:`ensure_built`.

A source checkout is a folder that holds ``csrc/`` next to this file (wheels leave ``csrc``
out). There the extension is (re)compiled in place on import when it is missing for the
running interpreter or older than a C source: an environment that was created for another
checkout of the same path (hatch keeps environments by project path and does not reinstall
workspace members whose metadata did not change) or a C edit without a rebuild would
otherwise import nothing, or stale code. An installed wheel never compiles anything.

The compiler and flags come from ``sysconfig`` of the running interpreter (``CC``, the
include folder); no setuptools is involved. Linux and macOS (gcc or clang) are supported.
Output goes to a temporary name in the same folder and is renamed over the target, so
processes that build at the same moment (pytest-xdist workers) never load a half-written file.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
CSRC = PACKAGE_DIR / "csrc"
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


class CompileError(RuntimeError):
    """The compiler failed; the message holds its command line and output."""


class ExtensionBuildError(ImportError):
    """The extension is missing or stale in a source checkout and compiling it failed."""


def extension_filename() -> str:
    """The file name CPython imports ``kiln.frameeval._C`` from, for this interpreter."""
    return EXTENSION + sysconfig.get_config_var("EXT_SUFFIX")


def compile_extension(output: Path, extra_flags: list[str] | None = None) -> Path:
    """Compile and link the extension into ``output`` (a file path); returns ``output``.

    Raises :class:`CompileError` (the command and the compiler's output) when it fails.
    """
    include = sysconfig.get_paths()["include"]
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    sources = [str(CSRC / name) for name in C_SOURCES]
    link = ["-shared"]
    if sys.platform == "darwin":
        link += ["-undefined", "dynamic_lookup"]
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent)
    os.close(fd)
    command = [
        *cc,
        *CFLAGS,
        *(extra_flags or []),
        f"-I{include}",
        f"-I{os.path.join(include, 'internal')}",
        *sources,
        *link,
        "-o",
        partial,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise CompileError(f"{shlex.join(command)}\n{done.stdout}{done.stderr}")
        os.replace(partial, output)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return output


def build_in_place(extra_flags: list[str] | None = None) -> Path:
    """Compile the extension next to the Python sources (editable installs, development)."""
    return compile_extension(PACKAGE_DIR / extension_filename(), extra_flags)


def needs_build() -> bool:
    """In a source checkout: is the extension missing for this interpreter, or older than a
    C source? Always False for an installed wheel (no ``csrc``)."""
    if not CSRC.is_dir():
        return False
    try:
        built = (PACKAGE_DIR / extension_filename()).stat().st_mtime
    except FileNotFoundError:
        return True
    return any(source.stat().st_mtime > built for source in CSRC.iterdir())


def ensure_built() -> None:
    """Compile the extension in place when :func:`needs_build` says so.

    Raises :class:`ExtensionBuildError` naming the file, the interpreter and the compiler's
    output when compiling fails.
    """
    if not needs_build():
        return
    target = PACKAGE_DIR / extension_filename()
    print(f"kiln.frameeval: compiling {target} (source checkout)", file=sys.stderr)
    try:
        build_in_place()
    except (OSError, CompileError) as error:
        raise ExtensionBuildError(
            f"kiln.frameeval: the C extension {target.name} is missing or older than its "
            f"sources in {PACKAGE_DIR}, and compiling it for Python "
            f"{sysconfig.get_python_version()} ({sys.executable}) failed. A C compiler and "
            f"this Python's headers are needed; or install a built wheel of kiln-frameeval.\n"
            f"{error}"
        ) from error
