"""``python -m kiln <command>``: ``demo`` runs the main job (see kiln.demo); ``report DIR``
turns a structured trace (``KILN_TRACE=DIR``) into one HTML page (see kiln.report)."""

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
    report_cmd = sub.add_parser("report", help="turn a kiln trace (KILN_TRACE=DIR) into one HTML page")
    from kiln.report import add_arguments, run

    add_arguments(report_cmd)
    args = parser.parse_args(argv)
    if args.command == "report":
        return run(args)

    from kiln.demo import default_report_path, render_html, render_text, run_demo

    result = run_demo(args.device, rounds=args.rounds)
    print(render_text(result))
    trace_report = _trace_report()
    report = os.path.abspath(args.report or default_report_path())
    os.makedirs(os.path.dirname(report), exist_ok=True)
    with open(report, "w", encoding="utf-8") as f:
        f.write(render_html(result, trace_report))
    print(f"\nreport: {report}")
    if trace_report:
        print(f"trace report: {trace_report}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result.as_dict(), f, indent=2)
    return 0 if all(result.numerics.values()) else 1


def _trace_report() -> str | None:
    """The demo's trace as an HTML report in the trace folder, where one is set (KILN_TRACE,
    kiln.config.trace_dir) and holds a trace; else None."""
    from kiln._trace import trace_dir
    from kiln.report import write_report

    folder = trace_dir()
    if not folder:
        return None
    try:
        return os.path.abspath(write_report(folder, title="kiln demo: every compile"))
    except (FileNotFoundError, ValueError):
        return None


if __name__ == "__main__":
    sys.exit(main())
