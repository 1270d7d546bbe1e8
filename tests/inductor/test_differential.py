"""Random programs of pointwise ops and reductions (sums, max, min over either dimension,
kept) on ``[rows, cols]`` inputs, compiled by kiln and compared with eager exactly: inputs are
small integers stored as floats, so every result is exact in any order of summation (a
program whose values leave float32's exact integers is drawn again). Row counts reach the sizes
where Triton reductions are split (by rows, over the leading dim), and the programs' order
interleaves reductions over the same rows, which the scheduler may fuse out of order
(``_scheduler._join_before``). C++ kernels on CPU tensors; Triton kernels on a GPU, or
through triton's interpreter."""

from __future__ import annotations

import random

import pytest
import torch
from triton_support import DEVICE, OPTIONS

import kiln

_UNARY = [lambda a: a * 2, lambda a: a.relu(), lambda a: -a, lambda a: a + 1]
_BINARY = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b, torch.maximum]
_REDUCE = [lambda a, d: a.sum(d, keepdim=True), lambda a, d: a.amax(d, keepdim=True),
           lambda a, d: a.amin(d, keepdim=True)]


def _program(rng: random.Random):
    """A function of ``(x, y)`` returning 1-3 of its 3-9 steps' values."""
    steps = []
    for _ in range(rng.randint(3, 9)):
        kind = rng.random()
        if kind < 0.3:
            steps.append(("unary", rng.randrange(len(_UNARY)), rng.randrange(100)))
        elif kind < 0.65:
            steps.append(("binary", rng.randrange(len(_BINARY)), rng.randrange(100), rng.randrange(100)))
        else:
            steps.append(("reduce", rng.randrange(len(_REDUCE)), rng.randrange(100), rng.randrange(2)))
    outputs = rng.sample(range(len(steps)), k=min(len(steps), rng.randint(1, 3)))

    def program(x, y):
        values = [x, y]
        for step in steps:
            def pick(i):
                return values[i % len(values)]
            if step[0] == "unary":
                values.append(_UNARY[step[1]](pick(step[2])))
            elif step[0] == "binary":
                values.append(_BINARY[step[1]](pick(step[2]), pick(step[3])))
            else:
                values.append(_REDUCE[step[1]](pick(step[2]), step[3]))
        return tuple(values[2 + i] for i in outputs)

    return program


def _exact_program(rng: random.Random, x: torch.Tensor, y: torch.Tensor):
    """The first program ``rng`` draws whose values on ``x`` and ``y`` stay float32's exact
    integers (products can grow past 2**24), with its results."""
    for _ in range(100):
        program = _program(rng)
        expected = program(x, y)
        if all(e.abs().max() <= 2**22 for e in expected):
            return program, expected
    raise AssertionError("no program with exact values in 100 draws")


def _check(graphs, seed: int, device: str, options) -> None:
    rng = random.Random(seed)
    rows, cols = rng.choice([3, 64, 1100, 2048]), rng.choice([5, 40, 96])
    x = torch.randint(-4, 5, (rows, cols)).float().to(device)
    y = torch.randint(-4, 5, (rows, cols)).float().to(device)
    with torch.no_grad():
        program, expected = _exact_program(rng, x, y)
        actual = kiln.compile(program, options=options)(x, y)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)  # exact: integer values
    (graph,) = graphs  # compiled whole, as kernels of the code generator under test
    assert graph.kernels and not graph.fallbacks
    assert bool(graph.triton_code) == (options is not None or device != "cpu")


@pytest.mark.parametrize("seed", range(24))
def test_cpp_kernels(graphs, seed):
    _check(graphs, 1000 + seed, "cpu", None)


@pytest.mark.parametrize("seed", range(8))
def test_triton_kernels(graphs, seed):
    pytest.importorskip("triton")
    _check(graphs, 5000 + seed, DEVICE, OPTIONS)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_a_buffer_reading_the_last_kernel_never_joins_the_one_before(graphs, backend):
    # a row sum (a kernel over rows), a column max (a kernel over columns), then a value over
    # rows that reads the column max: it fits the row kernel's loops but must come after
    if backend == "triton":
        pytest.importorskip("triton")
    device, options = ("cpu", None) if backend == "cpp" else (DEVICE, OPTIONS)
    x = torch.randint(-4, 5, (64, 40)).float().to(device)
    y = torch.randint(-4, 5, (64, 40)).float().to(device)

    def program(x, y):
        return x.sum(1, keepdim=True), x - y.amax(0, keepdim=True)

    with torch.no_grad():
        torch.testing.assert_close(kiln.compile(program, options=options)(x, y), program(x, y), rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_a_write_into_an_input_never_joins_a_kernel_before_a_reader_of_the_input(graphs, backend):
    # the column max reads x before the in-place update: the update fits the row sum's loops
    # (two steps back) but must stay after the column max
    if backend == "triton":
        pytest.importorskip("triton")
    device, options = ("cpu", None) if backend == "cpp" else (DEVICE, OPTIONS)

    def program(x):
        rows, columns = x.sum(1, keepdim=True), x.amax(0, keepdim=True)
        x.mul_(2)
        return rows, columns

    x = torch.randint(-4, 5, (64, 40)).float().to(device)
    mine = x.clone()
    with torch.no_grad():
        expected = program(x)
        actual = kiln.compile(program, options=options)(mine)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    torch.testing.assert_close(mine, x, rtol=0, atol=0)
