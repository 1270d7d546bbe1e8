"""``python -m benchmarks run --suite overhead,models --device cpu [--out results.json]`` and
``python -m benchmarks compare old.json new.json`` (also ``python -m benchmarks --compare
old.json new.json``)."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), default=None,
                        help="kiln's figures of two result files, side by side (as the compare command)")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="time suites for eager, torch.compile and kiln")
    run.add_argument("--suite", default="all", help="comma list of overhead,capture,kernels,models,recompiles,scaling or all")
    run.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    run.add_argument("--rounds", type=int, default=15)
    run.add_argument("--out", default=None, help="write the results as JSON here")
    cmp = sub.add_parser("compare", help="kiln's figures of two result files, side by side")
    cmp.add_argument("old")
    cmp.add_argument("new")
    args = parser.parse_args(argv)
    if args.compare is not None:
        args.command, (args.old, args.new) = "compare", args.compare
    elif args.command is None:
        parser.error("a command is needed: run, compare (or --compare OLD NEW)")

    import torch

    from benchmarks.harness import SUITES, compare, run_suites
    from benchmarks.harness.run import format_table, save

    if args.command == "compare":
        with open(args.old) as a, open(args.new) as b:
            print(compare(json.load(a), json.load(b)))
        return 0
    names = list(SUITES) if args.suite == "all" else args.suite.split(",")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    result = run_suites(names, device, args.rounds)
    print(format_table(result))
    if args.out:
        save(result, args.out)
        print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
