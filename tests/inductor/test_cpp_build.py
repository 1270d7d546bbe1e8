"""CppBuilder: real g++ compiles (about 0.4 s each, so few of them), the cache and its checks.

One module-scoped build of ADD_ONE seeds the tests that need an existing entry: they work on
a copy of its directory. Besides saving compiles, a copy has files this process never
mapped, so truncating one in place cannot pull pages from under a loaded library.
"""

import ctypes
import hashlib
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from kiln.inductor.cpp import _build as _cpp_build
from kiln.inductor.cpp._build import BuildStats, CppBuilder, CppBuildError, compile_flags

ADD_ONE = """\
extern "C" void add_one(const float* x, float* out, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        out[i] = x[i] + 1.0f;
    }
}
"""

SCALE = """\
extern "C" void scale(const float* x, float* out, long n, float alpha) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) {
        out[i] = x[i] * alpha;
    }
}
"""

ADD_ONE_ARGS = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]


def run_add_one(library):
    x = torch.arange(10, dtype=torch.float32)
    out = torch.empty_like(x)
    library.function("add_one", ADD_ONE_ARGS)(x.data_ptr(), out.data_ptr(), x.numel())
    torch.testing.assert_close(out, x + 1)


def record_matches(builder, key):
    so = (builder.directory / f"{key}.so").read_bytes()
    record = (builder.directory / f"{key}.sha256").read_text().strip()
    return hashlib.sha256(so).hexdigest() == record


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A builder that has compiled ADD_ONE (its only compile) and that library."""
    builder = CppBuilder(tmp_path_factory.mktemp("seed"))
    return builder, builder.load(ADD_ONE)


def copy_of_seed(seeded, tmp_path):
    shutil.copytree(seeded[0].directory, tmp_path / "cpp")
    return CppBuilder(tmp_path)


def test_compile_then_memory_and_disk_hits(seeded):
    builder, library = seeded
    assert builder.stats == BuildStats(compiled=1)
    assert builder.stats.last_compile_s > 0
    assert library.key == builder.key(ADD_ONE)
    assert library.path == builder.directory / f"{library.key}.so"
    assert record_matches(builder, library.key)
    assert (builder.directory / f"{library.key}.cpp").read_text() == ADD_ONE
    run_add_one(library)

    assert builder.load(ADD_ONE) is library
    assert builder.stats == BuildStats(compiled=1, memory_hits=1)

    fresh = CppBuilder(builder.directory.parent)
    run_add_one(fresh.load(ADD_ONE))
    assert fresh.stats == BuildStats(disk_hits=1)


def test_truncated_library_is_rebuilt(seeded, tmp_path):
    builder = copy_of_seed(seeded, tmp_path)
    key = builder.key(ADD_ONE)
    so = builder.directory / f"{key}.so"
    with open(so, "r+b") as file:
        file.truncate(so.stat().st_size // 2)

    run_add_one(builder.load(ADD_ONE))
    assert builder.stats == BuildStats(compiled=1, rebuilt_corrupt=1)
    assert record_matches(builder, key)


def test_load_many_compiles_missing_in_parallel(seeded, tmp_path):
    # ADD_ONE's .so is there but has no record: it counts as absent and is built again
    builder = copy_of_seed(seeded, tmp_path)
    (builder.directory / f"{builder.key(ADD_ONE)}.sha256").unlink()

    add_one, scale = builder.load_many([ADD_ONE, SCALE])
    assert builder.stats == BuildStats(compiled=2)
    run_add_one(add_one)
    x = torch.arange(10, dtype=torch.float32)
    out = torch.empty_like(x)
    fn = scale.function("scale", [*ADD_ONE_ARGS, ctypes.c_float])
    fn(x.data_ptr(), out.data_ptr(), x.numel(), 2.5)
    torch.testing.assert_close(out, x * 2.5)
    assert all(record_matches(builder, lib.key) for lib in (add_one, scale))
    assert not list(builder.directory.glob("*.tmp"))


def test_compile_error_keeps_source_and_no_library(tmp_path):
    builder = CppBuilder(tmp_path)
    source = 'extern "C" void broken(float* x {\n}\n'
    key = builder.key(source)
    with pytest.raises(CppBuildError) as caught:
        builder.load(source)
    message = str(caught.value)
    assert "error:" in message
    assert str(builder.directory / f"{key}.cpp") in message
    assert sorted(p.name for p in builder.directory.iterdir()) == [f"{key}.cpp"]
    assert builder.stats == BuildStats()


CHILD = textwrap.dedent("""\
    import ctypes, pathlib, sys, time
    import torch
    from kiln.inductor.cpp._build import CppBuilder
    cache, source, ready, me = sys.argv[1:]
    pathlib.Path(ready, me).touch()
    deadline = time.monotonic() + 60
    while len(list(pathlib.Path(ready).iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    library = CppBuilder(cache).load(pathlib.Path(source).read_text())
    x = torch.arange(4, dtype=torch.float32)
    out = torch.empty_like(x)
    library.function("add_one", [ctypes.c_void_p] * 2 + [ctypes.c_long])(
        x.data_ptr(), out.data_ptr(), 4)
    print(out.tolist())
""")


def test_two_processes_build_the_same_key(tmp_path):
    source = tmp_path / "kernel.cpp"
    source.write_text(ADD_ONE)
    ready = tmp_path / "ready"
    ready.mkdir()
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "cache"), str(source),
                          str(ready), str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
        for i in range(2)
    ]
    for child in children:
        stdout, stderr = child.communicate(timeout=120)
        assert child.returncode == 0, stderr
        assert stdout.strip() == "[1.0, 2.0, 3.0, 4.0]"

    builder = CppBuilder(tmp_path / "cache")
    key = builder.key(ADD_ONE)
    assert sorted(p.name for p in builder.directory.iterdir()) == [
        f"{key}.cpp", f"{key}.sha256", f"{key}.so"]
    assert record_matches(builder, key)


def test_key_covers_source_flags_and_isa(tmp_path, monkeypatch):
    builder = CppBuilder(tmp_path)
    key = builder.key(ADD_ONE)
    assert key == builder.key(ADD_ONE) and len(key) == 32
    assert builder.key(SCALE) != key

    assert compile_flags("default") == (
        "-O3", "-shared", "-fPIC", "-std=c++17", "-fopenmp", "-fno-math-errno",
        "-fno-trapping-math", "-ffp-contract=off")
    assert compile_flags("avx2")[-3:] == ("-mavx2", "-mfma", "-mf16c")
    assert "-mavx512f" in compile_flags("avx512")
    assert not any(flag in ("-ffast-math", "-march=native") for flag in compile_flags())

    other_isa = "default" if _cpp_build.cpu_isa() != "default" else "avx2"
    monkeypatch.setattr(_cpp_build, "cpu_isa", lambda: other_isa)
    isa_key = builder.key(ADD_ONE)
    assert isa_key != key

    monkeypatch.setattr(_cpp_build, "compile_flags", lambda isa=None: ("-O2",))
    assert builder.key(ADD_ONE) not in (key, isa_key)
    assert not tmp_path.joinpath("cpp").exists()
