"""kiln.symexec.bytecode benchmark: decode and assemble time per code object.

Run: ``python benchmarks/bytecode_bench.py`` (``--quick`` for fewer repeats; any Python of
3.11-3.13 with ``packages/symexec/src`` importable). The corpus is every code object
(recursively) compiled from a set of standard-library modules. Prints, per stage, the
median over repeats of the total time divided by the number of code objects and of
instructions, the same for ``dis.get_instructions`` as a reference point, and how many code
objects re-assemble byte-identically.
"""

from __future__ import annotations

import argparse
import dis
import importlib
import inspect
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages" / "symexec" / "src"))

from kiln.symexec.bytecode import ConcreteBytecode, assemble, decode, walk_code

MODULES = ["json.decoder", "json.encoder", "ast", "inspect", "dis", "typing", "dataclasses",
           "argparse", "collections", "functools", "enum", "pathlib", "tokenize", "textwrap"]


def corpus() -> list:
    codes = []
    for name in MODULES:
        module = importlib.import_module(name)
        codes.extend(walk_code(compile(inspect.getsource(module), module.__file__, "exec")))
    return codes


def timed(fn, items, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for item in items:
            fn(item)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 9")
    args = parser.parse_args()
    repeats = 3 if args.quick else 9
    codes = corpus()
    decoded = [decode(c) for c in codes]
    n_instr = sum(len(b.instructions()) for b in decoded)
    identical = sum(assemble(b) == c for b, c in zip(decoded, codes, strict=True))
    stages = [
        ("dis.get_instructions (reference)", lambda c: list(dis.get_instructions(c)), codes),
        ("concrete decode", ConcreteBytecode.from_code, codes),
        ("decode (abstract)", decode, codes),
        ("assemble", assemble, decoded),
        ("decode + assemble", lambda c: assemble(decode(c)), codes),
    ]
    print(f"kiln.symexec.bytecode on Python {platform.python_version()}: {len(codes)} code objects, "
          f"{n_instr} instructions from {len(MODULES)} stdlib modules")
    print(f"byte-identical round trips: {identical}/{len(codes)}")
    print(f"{'stage':<36}{'total ms':>10}{'us/code':>10}{'ns/instr':>10}")
    for title, fn, items in stages:
        total = timed(fn, items, repeats)
        print(f"{title:<36}{total * 1e3:>10.1f}{total / len(codes) * 1e6:>10.1f}{total / n_instr * 1e9:>10.0f}")


if __name__ == "__main__":
    main()
