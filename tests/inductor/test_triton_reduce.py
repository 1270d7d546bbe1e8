"""kiln_reduce (``triton._runtime.resolve_reduce``): ``tl.reduce`` itself on a GPU; under the
interpreter a pairwise tree calling the combine function on whole halves of the blocks (the
interpreter's own reduce calls it once per element, in Python).

Anywhere: a kernel calling ``kiln_reduce`` compiles for an H100 target (no GPU needed) to the
same PTX as the same kernel calling ``tl.reduce``. Reductions with kiln's combine functions
(argmax and argmin with ties and NaNs, NaN-propagating max and min, products) over odd, even
and one-element rows give eager's answers (on a GPU too). Under the interpreter a looped
normalization over many rows runs in seconds, not minutes.
"""

from __future__ import annotations

import time

import pytest
import torch
from triton_support import CUDA, compile_for_an_h100
from triton_support import run_like_eager as _run

from kiln.inductor.triton._runtime import HEADER

_COMPILE = '''

@triton.jit
def ours(out, out_index, x, RBLOCK: tl.constexpr):
    r = tl.arange(0, RBLOCK)[None, :]
    v = tl.load(x + r)
    best, index = kiln_reduce((v, r.to(tl.int64)), 1, kiln_argmax)
    tl.store(out + tl.arange(0, 1)[:, None], kiln_reduce(v, 1, kiln_mul)[:, None] + best[:, None])
    tl.store(out_index + tl.arange(0, 1)[:, None], index[:, None])


@triton.jit
def theirs(out, out_index, x, RBLOCK: tl.constexpr):
    r = tl.arange(0, RBLOCK)[None, :]
    v = tl.load(x + r)
    best, index = tl.reduce((v, r.to(tl.int64)), 1, kiln_argmax)
    tl.store(out + tl.arange(0, 1)[:, None], tl.reduce(v, 1, kiln_mul)[:, None] + best[:, None])
    tl.store(out_index + tl.arange(0, 1)[:, None], index[:, None])


import json
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend

target = GPUTarget("cuda", 90, 32)
options = make_backend(target).parse_options({}).__dict__
signature = {"out": "*fp32", "out_index": "*i64", "x": "*fp32", "RBLOCK": "constexpr"}
ptx = {fn.__name__: triton.compile(ASTSource(fn, signature, {(3,): 128}, {}), target=target, options=options).asm["ptx"]
       for fn in (ours, theirs)}
def code(text, name):  # the instructions: no line-number directives, debug sections or comments
    text = text.split(".section")[0].replace(name, "K")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith((".loc", ".file", "//"))]


print(json.dumps({"same": code(ptx["ours"], "ours") == code(ptx["theirs"], "theirs"),
                  "instructions": len(code(ptx["ours"], "ours")),
                  "kiln_reduce": repr(kiln_reduce)}))
'''


def test_on_a_gpu_kiln_reduce_is_tritons_own(tmp_path):
    pytest.importorskip("triton.backends.nvidia")
    got = compile_for_an_h100(HEADER + _COMPILE, tmp_path)
    assert got["same"] and got["instructions"] > 50, got
    assert "_interpreted_reduce" not in got["kiln_reduce"]


@pytest.mark.parametrize("cols", [1, 2, 37, 64])
def test_reductions_with_kilns_combines_give_eagers_answers(cols):
    torch.manual_seed(0)
    x = torch.randn(5, cols)
    x[1] = 0.5  # ties: the first index wins
    x[2, cols // 2] = float("nan")  # a NaN wins (and propagates through max and min)
    x[3, 0] = float("nan")
    ints = torch.randint(-3, 4, (5, cols))
    _run(lambda x, i: (x.argmax(1), x.argmin(1), x.amax(1), x.amin(1), (x * 0.5 + 1).prod(1), i.prod(1)), x, ints)


@pytest.mark.skipif(CUDA, reason="times triton's interpreter, which CI runs without a GPU; with CUDA these kernels run on the GPU, not in the interpreter")
def test_a_looped_normalization_over_many_rows_takes_seconds():
    """(The interpreter's per-element reduce took 95 s for this call.)"""
    x = torch.randn(300, 96) * 2 + 1
    start = time.perf_counter()
    _run(lambda x: (torch.softmax(x, 0), x.logsumexp(0), x.argmax(0)), x)
    assert time.perf_counter() - start < 30
