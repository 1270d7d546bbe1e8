"""``python -m kiln <command>``: ``demo`` runs the main job (see kiln.demo)."""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kiln", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="compile a small GPT and show what kiln did")
    demo.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    demo.add_argument("--report", default="kiln-demo-report.html", help="where to write the HTML report")
    demo.add_argument("--json", default=None, help="also write the figures as JSON here")
    demo.add_argument("--rounds", type=int, default=10, help="timing rounds (median over them)")
    args = parser.parse_args(argv)

    from kiln.demo import render_html, render_text, run_demo

    result = run_demo(args.device, rounds=args.rounds)
    print(render_text(result))
    with open(args.report, "w", encoding="utf-8") as f:
        f.write(render_html(result))
    print(f"\nreport: {os.path.abspath(args.report)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result.as_dict(), f, indent=2)
    return 0 if all(result.numerics.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
