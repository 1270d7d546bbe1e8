"""Programs the differential fuzzer (scripts/fuzz.py) found kiln getting wrong, minimised:
each one is a case of tests/e2e/test_fuzz.py::test_regression, run and compared with eager
like a fuzzed program. ``scripts/fuzz.py --save`` appends to this file; only programs that
failed at some point belong here. The comment above a case is the failure it showed."""

REGRESSIONS: list[tuple[str, str]] = []  # (name, source)


def _add(name: str, source: str) -> None:
    REGRESSIONS.append((name, source))
