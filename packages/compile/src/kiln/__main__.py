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
    demo.add_argument("--report", default=None,
                      help="where to write the HTML report (default: $XDG_CACHE_HOME/kiln/"
                           "demo-report.html, i.e. ~/.cache/kiln/demo-report.html)")
    demo.add_argument("--json", default=None, help="also write the figures as JSON here")
    demo.add_argument("--rounds", type=int, default=10, help="timing rounds (median over them)")
    args = parser.parse_args(argv)

    from kiln.demo import default_report_path, render_html, render_text, run_demo

    result = run_demo(args.device, rounds=args.rounds)
    print(render_text(result))
    report = os.path.abspath(args.report or default_report_path())
    os.makedirs(os.path.dirname(report), exist_ok=True)
    with open(report, "w", encoding="utf-8") as f:
        f.write(render_html(result))
    print(f"\nreport: {report}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result.as_dict(), f, indent=2)
    return 0 if all(result.numerics.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
