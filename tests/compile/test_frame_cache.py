"""The disk cache of captured frames (``kiln._frame_cache``, ``kiln.config.frame_cache``): a new
process runs the frames an earlier one captured without capturing them, and captures again
whenever what the trace depended on changed (a source file, a global, a default, a guard).

Each cross-process test runs real programs in processes of their own, sharing one cache
directory; every program checks its results against eager itself and prints its counters."""

import json
import os
import subprocess
import sys
import textwrap
import types

import pytest
import torch

from kiln import _portable
from kiln.guards import (
    FunctionMatch,
    GuardSet,
    IdMatch,
    LocalSource,
    ShapeRelation,
    TensorMatch,
    TensorSizeSource,
    TorchGlobalState,
    TypeMatch,
)

HEADER = """
import json, os, sys
import torch
import kiln
kiln.config.raise_internal_errors = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
"""

FOOTER = """
s = kiln.session()
print(json.dumps({"loaded": s.graph_cache.frames_loaded, "stored": s.graph_cache.frames_stored,
                  "captures": s.stats.captures, "entries": s.stats.entries,
                  "graphs": s.stats.unique_graphs, "breaks": [str(b) for b in s.stats.breaks],
                  "out": OUT}))
"""


def _run(tmp_path, body, name="program.py", logs="", **env):
    script = tmp_path / name
    text = HEADER + textwrap.dedent(body) + FOOTER
    if not script.exists() or script.read_text() != text:  # rewritten, the file is another source
        script.write_text(text)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache"), "KILN_LOGS": logs, **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _touch_later(path, text):
    """Write ``text`` (of the same length as the file's text) with a later modification time."""
    old = path.stat()
    assert len(text) == old.st_size
    path.write_text(text)
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns + 10**9))


MODELS = """
import os

import torch
from torch import nn

SCALE = float(os.environ.get("SCALE", "2.0"))


def helper(x, k=float(os.environ.get("K", "1.0"))):
    return x * SCALE + k


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return self.finish(helper(self.lin(x)))

    def finish(self, y):
        return y.relu() * 2


def _finish_fast(self, y):
    return y.clamp(min=0) * 4


if os.environ.get("PATCH") == "1":  # a method patched at import, by a flag: no file changes
    Block.finish = _finish_fast
"""

PROGRAM = """
import models

torch.manual_seed(0)
block = models.Block()
x = torch.randn(4, 8)
idx = torch.tensor([2])


def with_break(x, idx):
    y = x * 2
    picked = y[idx[0]]  # a graph break, as under torch.compile
    return picked + 1, y


def train_step(model, x):
    loss = model(x).pow(2).mean()
    loss.backward()
    return loss


compiled = kiln.compile(block)
with torch.no_grad():
    out = compiled(x)
    torch.testing.assert_close(out, block(x))
got = kiln.compile(with_break)(x, idx)
torch.testing.assert_close(got, with_break(x, idx))
expected = train_step(block, x)
grads = [p.grad.clone() for p in block.parameters()]
block.zero_grad()
loss = kiln.compile(train_step)(block, x)
torch.testing.assert_close(loss, expected)
torch.testing.assert_close([p.grad for p in block.parameters()], grads)
OUT = [out.sum().item(), got[0].sum().item(), loss.item()]
"""


@pytest.fixture
def programs(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    return tmp_path


def test_a_second_process_captures_nothing_and_gives_the_same_results(programs):
    first, _ = _run(programs, PROGRAM)
    # Block.forward, with_break and its resume function, train_step (Block.forward inlined)
    # and its resume function (after loss.backward())
    assert (first["captures"], first["stored"], first["loaded"]) == (5, 5, 0)
    assert len(first["breaks"]) == 2
    second, _ = _run(programs, PROGRAM)
    assert (second["captures"], second["stored"], second["loaded"]) == (0, 0, 5)
    assert (second["entries"], second["graphs"], second["breaks"]) == (first["entries"], first["graphs"],
                                                                        first["breaks"])
    assert second["out"] == first["out"]


def test_an_edited_method_is_captured_again(programs):
    # nothing but the file says Block.forward changed: the class is the same by name, and the
    # guards hold
    first, _ = _run(programs, PROGRAM)
    models = programs / "models.py"
    _touch_later(models, MODELS.replace("y.relu() * 2", "y.relu() * 3"))
    second, _ = _run(programs, PROGRAM)
    # Block.forward and train_step (which inlines it) again; with_break, its resume function and
    # train_step's (after loss.backward()) read no model
    assert (second["captures"], second["loaded"]) == (2, 3)
    assert second["out"][0] == pytest.approx(first["out"][0] * 1.5, rel=1e-5)


def test_a_method_patched_at_import_is_captured_again(programs):
    first, _ = _run(programs, PROGRAM)
    patched, _ = _run(programs, PROGRAM, PATCH="1")  # Block.finish is another function now
    assert (patched["captures"], patched["loaded"]) == (2, 3)  # Block.forward and train_step
    assert patched["out"][0] == pytest.approx(first["out"][0] * 2, rel=1e-5)


def test_a_changed_global_or_default_is_captured_again(programs):
    first, _ = _run(programs, PROGRAM)
    scaled, _ = _run(programs, PROGRAM, SCALE="3.0")  # G['SCALE'] == 2.0 fails
    assert (scaled["captures"], scaled["loaded"]) == (2, 3)  # Block.forward and train_step read SCALE
    shifted, _ = _run(programs, PROGRAM, K="5.0")  # helper's default: its FunctionMatch fails
    assert (shifted["captures"], shifted["loaded"]) == (2, 3)
    assert len({first["out"][0], scaled["out"][0], shifted["out"][0]}) == 3
    again, _ = _run(programs, PROGRAM)
    assert (again["loaded"], again["captures"], again["out"]) == (5, 0, first["out"])


SHAPES = """
def f(x):
    return (x.sin() * 2).sum(-1)


compiled = kiln.compile(f, dynamic=False)
OUT = []
for rows in [int(r) for r in os.environ["ROWS"].split(",")]:
    x = torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3)
    got = compiled(x)
    torch.testing.assert_close(got, f(x))
    OUT.append(got.sum().item())
"""


def test_guards_choose_among_recorded_variants(tmp_path):
    first, _ = _run(tmp_path, SHAPES, ROWS="2")
    assert (first["captures"], first["stored"]) == (1, 1)
    other, _ = _run(tmp_path, SHAPES, ROWS="5")  # the recorded variant's size guard fails
    assert (other["captures"], other["loaded"], other["stored"]) == (1, 0, 1)
    both, _ = _run(tmp_path, SHAPES, ROWS="5,2,5")
    assert (both["captures"], both["loaded"], both["entries"]) == (0, 2, 2)
    assert both["out"] == [other["out"][0], first["out"][0], other["out"][0]]


NUMBERS = """
def f(x, n):
    return x * n + 1


compiled = kiln.compile(f)
x = torch.ones(3)
OUT = []
for n in (2.0, 3.0, 4.0):
    got = compiled(x, n)
    torch.testing.assert_close(got, f(x, n))
    OUT.append(got.sum().item())
"""


def test_automatic_dynamic_numbers_load_the_dynamic_variant_first(tmp_path):
    first, _ = _run(tmp_path, NUMBERS)
    assert (first["captures"], first["entries"]) == (2, 2)  # n == 2.0, then n an input
    second, _ = _run(tmp_path, NUMBERS)  # the recompile memory says n varies: that variant, once
    assert (second["captures"], second["loaded"], second["entries"]) == (0, 1, 1)
    assert second["out"] == first["out"]


UNPORTABLE = """
def make():
    class Local:  # a class no other process can name: the type guard on OBJ has no meaning there
        scale = 2.0

    return Local()


OBJ = make()


def f(x):
    return x * OBJ.scale


got = kiln.compile(f)(torch.ones(2))
torch.testing.assert_close(got, torch.full((2,), 2.0))
OUT = got.tolist()
"""


def test_a_frame_whose_guards_name_a_process_object_is_not_recorded(tmp_path):
    first, stderr = _run(tmp_path, UNPORTABLE, logs="cache")
    assert (first["captures"], first["stored"]) == (1, 0)
    assert "not cached on disk" in stderr and "make.<locals>.Local" in stderr
    second, _ = _run(tmp_path, UNPORTABLE)
    assert (second["captures"], second["loaded"]) == (1, 0)


def test_the_frame_cache_switched_off_records_nothing(programs):
    off, _ = _run(programs, "kiln.config.frame_cache = False\n" + PROGRAM)
    assert (off["captures"], off["stored"]) == (5, 0)
    assert not (programs / "cache" / "frames").exists()


def test_a_corrupt_record_is_captured_again_and_rewritten(programs):
    _run(programs, SHAPES, ROWS="2")
    [record] = (programs / "cache" / "frames").glob("*.json")
    data = bytearray(record.read_bytes())
    data[-3] ^= 0x01
    record.write_bytes(bytes(data))
    rebuilt, stderr = _run(programs, SHAPES, ROWS="2")
    assert "corrupt" in stderr
    assert (rebuilt["captures"], rebuilt["loaded"], rebuilt["stored"]) == (1, 0, 1)
    again, _ = _run(programs, SHAPES, ROWS="2")
    assert (again["captures"], again["loaded"]) == (0, 1)


# ---------------------------------------------------------------- portable values, in process
def _round_trip(value, f_globals=None):
    data, modules, _ = _portable.dumps(value, f_globals)
    return _portable.loads(data, f_globals), modules


def test_guards_are_rebuilt_by_their_constructor():
    import sympy

    x = LocalSource("x")
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    guards = [TypeMatch(x, torch.Tensor), IdMatch(LocalSource("m"), torch.nn),
              TensorMatch.from_tensor(x, torch.ones(2, 3), dynamic_sizes=(0,), dynamic_strides=(1,)),
              ShapeRelation(sympy.Eq(s0 % 2, 0), {s0: TensorSizeSource(x, 0)}), TorchGlobalState.capture()]
    back, modules = _round_trip(guards)
    assert back[:4] == guards[:4]
    assert back[1].obj is torch.nn and back[1].obj_id == id(torch.nn)
    assert back[4].state == guards[4].state and back[4].native_snapshot is not None  # taken again here
    assert "torch" in modules
    check = GuardSet(back).compile({})
    assert check({"x": torch.ones(4, 3), "m": torch.nn})
    assert not check({"x": torch.ones(3, 3), "m": torch.nn})


def test_objects_without_a_name_are_refused():
    class Local:
        pass

    for value in (Local(), Local, object(), lambda: 1, [1].append):
        with pytest.raises(_portable.Unportable):
            _portable.dumps(IdMatch(LocalSource("v"), value))
    with pytest.raises(_portable.Unportable):
        _portable.body_objects({"__kiln_k0": (1, [2])}, {})
    _portable.body_objects({"__kiln_k0": (1, torch.float32), "__kiln_modules1": sys.modules}, {})


def _closing_over(value, default=0.5):
    def fn(x, k=default):
        return x + k if value else x

    return fn


def test_a_function_guard_is_rebuilt_from_the_function_there():
    fn = _closing_over("and will be removed in version 5.40.0")
    guard = FunctionMatch.from_function(LocalSource("fn"), fn)
    [described], _ = _round_trip([guard])
    assert type(described) is _portable.FunctionDescription
    # a twin made anew (another process's) with an equal closure and defaults: the guard of it
    twin = _closing_over("and will be removed in version 5.40.0")
    [rebuilt] = _portable.resolve_functions([described], {"fn": twin}, {})
    assert rebuilt == FunctionMatch.from_function(LocalSource("fn"), twin)
    assert GuardSet([rebuilt]).compile({})({"fn": twin})
    # a different closure value, default or code: no guard, the frame is captured again
    for other in (_closing_over("other"), _closing_over("and will be removed in version 5.40.0", 1.5),
                  types.FunctionType((lambda x, k=0.5: x - k).__code__, {}, "fn", (0.5,))):
        assert _portable.resolve_functions([described], {"fn": other}, {}) is None
