"""Differential fuzzing of kiln's frontend for as long as asked (issue 11, item 18).

    python scripts/fuzz.py --seconds 600 [--seed S] [--save] [--report out.json]

Programs come from tests/e2e/fuzz_programs.py, program i from ``random.Random(S + i)``, so a
run is reproducible from its seed. Each is run eagerly and through ``kiln.compile`` (backend
"eager" and a callable backend) and under ``kiln.explain``; disagreements are counted by kind.
The first program of each new failure signature is minimised (statements dropped while the
failure stays) and printed; with ``--save`` it is appended to tests/e2e/fuzz_regressions.py,
where tests/e2e/test_fuzz.py runs it as a regression case.

Programs run in a worker process: when kiln crashes the interpreter or hangs, the parent
records the program as a "process" failure and starts a new worker after it.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
E2E = ROOT / "tests" / "e2e"
REGRESSIONS = E2E / "fuzz_regressions.py"
HANG_SECONDS = 120
SAVED_NOT = ("gap", "generator")  # kinds that are not kiln getting a program wrong


def worker(seed: int, count: int, minimise_each: int) -> None:
    """Run programs seed, seed+1, ...: one JSON line before each ("start") and after each
    ("done", with failures and, for the first ``minimise_each`` of each signature in this
    worker, a minimised program)."""
    sys.path.insert(0, str(E2E))
    import warnings

    import fuzz_programs as fp

    warnings.simplefilter("ignore")
    logging.getLogger("kiln").addHandler(logging.NullHandler())  # failures are reported as data
    seen: collections.Counter[str] = collections.Counter()
    for s in range(seed, seed + count):
        print(json.dumps({"start": s}), flush=True)
        source = fp.generate(fp.RandomDraw(s))
        try:
            compile(source, f"<fuzz {s}>", "exec")
        except SyntaxError as e:  # the generator's own bug: report it, go on
            print(json.dumps({"done": s, "source": source, "failures": [
                {"kind": "generator", "signature": "generator", "detail": repr(e), "minimal": source}]}), flush=True)
            continue
        failures = fp.check_program(source, f"<fuzz {s}>")
        report = []
        for failure in failures:
            sig = fp.signature(failure)
            entry = {"kind": failure.kind, "signature": sig, "detail": failure.detail[:2000]}
            seen[sig] += 1
            if seen[sig] <= minimise_each:
                entry["minimal"] = fp.minimise(source, failure)
                entry["minimal_failures"] = [str(f)[:2000] for f in fp.check_program(entry["minimal"])]
            report.append(entry)
        print(json.dumps({"done": s, "source": source, "failures": report}), flush=True)


def drive(args: argparse.Namespace) -> dict:
    """Run workers until ``args.seconds`` have passed; the summary of what was found."""
    deadline = time.monotonic() + args.seconds
    seed, programs = args.seed, 0
    by_kind: collections.Counter[str] = collections.Counter()
    by_signature: dict[str, dict] = {}
    started = time.monotonic()
    while time.monotonic() < deadline:
        proc = subprocess.Popen([sys.executable, __file__, "--worker", "--seed", str(seed),
                                 "--minimise-each", str(args.minimise_each)],
                                stdout=subprocess.PIPE, text=True, cwd=ROOT)
        current, heard = None, False
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([proc.stdout], [], [], HANG_SECONDS)
                line = proc.stdout.readline() if ready else None
                if not line:
                    kind = "process-hang" if not ready else f"process-exit-{proc.wait()}"
                    if current is not None:
                        source = _source_of(current)
                        _record(by_kind, by_signature, current, source,
                                [{"kind": kind, "signature": kind, "detail": kind, "minimal": source}])
                        programs += 1
                        seed = current + 1
                    break
                message = json.loads(line)
                heard = True
                if "start" in message:
                    current = message["start"]
                    continue
                programs += 1
                seed = message["done"] + 1
                current = None
                _record(by_kind, by_signature, message["done"], message["source"], message["failures"])
                if programs % 50 == 0:
                    print(f"{programs} programs, {time.monotonic() - started:.0f} s, "
                          f"failures {dict(by_kind)}", flush=True)
                    if args.report:  # a partial report, in case the run is cut short
                        args.report.write_text(json.dumps(_summary(args, programs, seed, started, by_kind,
                                                                   by_signature), indent=1))
        finally:
            proc.kill()
            proc.wait()
        if not heard:  # kiln did not even import (someone's edit in progress): wait for it
            print("worker ran no program; retrying in 10 s", file=sys.stderr, flush=True)
            time.sleep(10)
    return _summary(args, programs, seed, started, by_kind, by_signature)


def _summary(args: argparse.Namespace, programs: int, seed: int, started: float,
             by_kind: collections.Counter, by_signature: dict) -> dict:
    return {"programs": programs, "seconds": round(time.monotonic() - started),
            "first_seed": args.seed, "next_seed": seed, "failures_by_kind": dict(by_kind),
            "signatures": by_signature}


def _source_of(seed: int) -> str:
    sys.path.insert(0, str(E2E))
    import fuzz_programs as fp

    return fp.generate(fp.RandomDraw(seed))


def _record(by_kind: collections.Counter, by_signature: dict, seed: int, source: str,
            failures: list[dict]) -> None:
    for failure in failures:
        by_kind[failure["kind"]] += 1
        entry = by_signature.setdefault(failure["signature"], {"count": 0, "seeds": []})
        entry["count"] += 1
        entry["seeds"].append(seed)
        if "minimal" in failure:
            minimals = entry.setdefault("minimals", {})
            minimals[failure["minimal"]] = minimals.get(failure["minimal"], 0) + 1
        if "minimal" in failure and "minimal" not in entry:
            entry.update(kind=failure["kind"], detail=failure["detail"], source=source,
                         minimal=failure["minimal"], minimal_failures=failure.get("minimal_failures"))


def save(summary: dict) -> int:
    """Append the minimised program of each signature not saved yet; how many were added."""
    text = REGRESSIONS.read_text()
    added = 0
    for sig, entry in sorted(summary["signatures"].items()):
        minimal = entry.get("minimal")
        if entry.get("kind") in SAVED_NOT or not minimal or minimal in text or '"""' in minimal \
                or "\\" in minimal:
            continue
        name = re.sub(r"[^a-z0-9]+", "-", sig.lower()).strip("-")[:60] + f"-{entry['seeds'][0]}"
        detail = entry["detail"].splitlines()[0][:150]
        text += f'\n# {detail}\n_add("{name}", """\\\n{minimal}""")\n'
        added += 1
    REGRESSIONS.write_text(text)
    return added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600, help="how long to run")
    parser.add_argument("--seed", type=int, default=0, help="the first program's seed")
    parser.add_argument("--save", action="store_true",
                        help="append minimised failing programs to tests/e2e/fuzz_regressions.py")
    parser.add_argument("--report", type=Path, help="write the summary as JSON to this file")
    parser.add_argument("--minimise-each", type=int, default=1,
                        help="minimise the first N failing programs of each signature (triage)")
    parser.add_argument("--dynamic", action="store_true",
                        help="compile with dynamic=True (every tensor dimension a symbol)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=10**9, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dynamic:
        os.environ["KILN_FUZZ_DYNAMIC"] = "1"  # read by fuzz_programs, in the workers too
    if args.worker:
        worker(args.seed, args.count, args.minimise_each)
        return
    summary = drive(args)
    print(f"\n{summary['programs']} programs in {summary['seconds']} s "
          f"(seeds {summary['first_seed']}..{summary['next_seed'] - 1})")
    print(f"failures by kind: {summary['failures_by_kind']}")
    for sig, entry in sorted(summary["signatures"].items(), key=lambda kv: -kv[1]["count"]):
        print(f"\n=== {sig}: {entry['count']} programs (first seed {entry['seeds'][0]})")
        print(entry.get("detail", "")[:500])
        print(entry.get("minimal", ""))
        others = sorted(entry.get("minimals", {}).items(), key=lambda kv: -kv[1])[1:]
        if others:
            print(f"({len(others)} other minimal programs: see the report)")
    if args.report:
        args.report.write_text(json.dumps(summary, indent=1))
    if args.save:
        print(f"saved {save(summary)} new regression programs to {REGRESSIONS.relative_to(ROOT)}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
