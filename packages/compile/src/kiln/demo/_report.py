"""The demo's output: a terminal summary (the capture's figures, each captured graph's code
shortened, some guards, then one table per comparison: first calls, generated code, steady
state and numerics) and a self-contained HTML report (the same, with an SVG bar chart per
comparison; no JavaScript, no downloads), written by default to ``default_report_path()``:
the user's cache folder, never the source tree. With a trace folder set (``KILN_TRACE``,
``kiln.config.trace_dir``) it links to that trace's report (``kiln.report``)."""

from __future__ import annotations

import html
import os
import textwrap
from pathlib import Path
from typing import Any

from ._variants import KILN, KILN_EAGER, TORCH, TORCH_EAGER

__all__ = ["TITLES", "default_report_path", "render_html", "render_text"]


def default_report_path() -> str:
    """Where ``python -m kiln demo`` writes its HTML report unless told otherwise:
    ``$XDG_CACHE_HOME/kiln/demo-report.html`` (``~/.cache/kiln/demo-report.html`` when
    XDG_CACHE_HOME is unset)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "kiln", "demo-report.html")


# Each comparison's title and what it compares (keys as _variants.COMPARISONS).
TITLES = {
    "backends": ("kiln.compile(model) vs torch.compile(model): each one's default backend",
                 "kiln: aotgrad + inductor (C++ kernels for CPU tensors; on CUDA, ATen calls from a "
                 "generated wrapper until its Triton part exists); torch: Inductor. First calls with "
                 "empty caches, imports excluded."),
    "frontends": ("The frontends: backend='eager' for both",
                  "Capture, guards and per-call cost: the captured graph runs as Python, nothing is "
                  "generated."),
}
_COLORS = {"eager": "#8a8a8a", KILN.name: "#d9480f", TORCH.name: "#1c7ed6",
           KILN_EAGER.name: "#f59f00", TORCH_EAGER.name: "#74c0fc"}
_CHECKS = ("inference output", "training loss", "gradients", "parameters after SGD step")


def _seconds(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def _code(comparison: Any, variant: str, workload: str) -> str:
    c = comparison.code.get(variant, {}).get(workload)
    if not c or not c["graphs"]:
        return "n/a"  # nothing compiled to code, or the count was not available
    return f"{c['kernels']} + {c['externs']} ({c['graphs']} graph{'s' if c['graphs'] != 1 else ''})"


def _verdict(comparison: Any, variant: str, check: str) -> str:
    verdict = "match" if comparison.numerics[variant][check] else "MISMATCH"
    return f"{verdict}, max diff {comparison.max_diff[variant][check]:.1e}"


def _rows(result: Any) -> list[tuple[str, str]]:
    r = result
    failed = [f"{v}: {check}" for c in r.comparisons.values() for v in c.variants[:1]
              for check, ok in c.numerics[v].items() if not ok]
    captures = ", ".join(f"{c.variants[0]}: {c.captures}" for c in r.comparisons.values())
    backends = r.comparisons["backends"]
    kiln_v, torch_v = backends.variants
    first = ", ".join(f"{w} {backends.compile_s[kiln_v][w]:.2f} s vs {backends.compile_s[torch_v][w]:.2f} s "
                      f"({backends.compile_s[kiln_v][w] / backends.compile_s[torch_v][w]:.2f}x)"
                      for w in backends.compile_s[kiln_v])
    return [
        ("device", f"{r.device} (Python {r.versions['python']}, torch {r.versions['torch']})"),
        ("graphs captured", str(r.graphs)),
        ("graph breaks", f"{r.graph_breaks}" + (f": {'; '.join(r.break_reasons)}" if r.break_reasons else "")),
        ("ops in the graph", str(r.ops)),
        ("guards", str(r.guards)),
        ("frames kiln.compile compiled", f"{captures} (inference and training step)"),
        ("first call, kiln vs torch.compile", first),
        ("numerics match eager (kiln)", "yes, both backends" if not failed else "NO: " + ", ".join(failed)),
    ]


def _table(comparison: Any) -> tuple[list[str], list[list[str]]]:
    """One comparison as a table: a header and rows of cells (eager, kiln's, torch's)."""
    c = comparison
    kiln_v, torch_v = c.variants
    names = ("eager", kiln_v, torch_v)
    header = ["", *names]
    rows: list[list[str]] = []
    for workload, label in (("inference", "first call"), ("training step", "first call (forward + backward)")):
        rows.append([f"{workload}: {label}", "", *(_seconds(c.compile_s[v][workload]) for v in (kiln_v, torch_v))])
        if c.code:
            rows.append([f"{workload}: kernels + ATen calls", "", *(_code(c, v, workload) for v in (kiln_v, torch_v))])
    for workload, table in (("inference", c.inference_ms), ("training step", c.train_step_ms)):
        rows.append([f"{workload}: steady state", *(f"{table[n]:.2f} ms" for n in names)])
        rows.append(["  speed-up vs eager", *(f"{table['eager'] / table[n]:.2f}x" for n in names)])
    for check in _CHECKS:
        rows.append([f"numerics: {check}", "", *(_verdict(c, v, check) for v in (kiln_v, torch_v))])
    return header, rows


def render_text(result: Any) -> str:
    """A plain-text summary for the terminal."""
    width = max(len(k) for k, _ in _rows(result))
    lines = [f"{k.ljust(width)}  {v}" for k, v in _rows(result)]
    for i, code in enumerate(result.graph_code):
        lines.append("")
        lines.append(f"graph {i + 1} of {len(result.graph_code)} (its generated code, shortened):")
        lines += [f"  {line}" for line in code.splitlines()]
    if result.guard_examples:
        lines.append("")
        lines.append(f"guards ({len(result.guard_examples)} of {result.guards}):")
        lines += [f"  {g}" for g in result.guard_examples]
    for name, comparison in result.comparisons.items():
        title, note = TITLES[name]
        header, rows = _table(comparison)
        widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
        lines += ["", f"== {title} ==", *textwrap.wrap(note, 100)]
        for row in (header, *rows):
            lines.append("  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]).rstrip())
    return "\n".join(lines)


def _bar_chart(comparison: Any) -> str:
    """Steady-state times of one comparison as SVG bars: eager, kiln's, torch's, per workload."""
    groups = [("inference", comparison.inference_ms), ("training step", comparison.train_step_ms)]
    names = ["eager", *comparison.variants]
    top = max(v for _, t in groups for v in t.values()) or 1.0
    bar_w, gap, group_gap, height = 46, 8, 60, 220
    width = max(60 + len(groups) * (len(names) * (bar_w + gap) + group_gap), 60 + len(names) * 220)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 60}" '
             'font-family="sans-serif" font-size="12">']
    x = 50
    for label, table in groups:
        for name in names:
            h = table[name] / top * height
            parts.append(f'<rect x="{x}" y="{height - h + 10:.1f}" width="{bar_w}" height="{h:.1f}" '
                         f'fill="{_COLORS[name]}"><title>{html.escape(name)}: {table[name]:.3f} ms</title></rect>')
            parts.append(f'<text x="{x + bar_w / 2}" y="{height - h + 5:.1f}" text-anchor="middle">'
                         f'{table[name]:.2f}</text>')
            x += bar_w + gap
        parts.append(f'<text x="{x - (len(names) * (bar_w + gap)) / 2}" y="{height + 30}" '
                     f'text-anchor="middle" font-weight="bold">{html.escape(label)} (ms)</text>')
        x += group_gap
    for i, name in enumerate(names):
        lx = 50 + i * 220
        parts.append(f'<rect x="{lx}" y="{height + 42}" width="10" height="10" fill="{_COLORS[name]}"/>')
        parts.append(f'<text x="{lx + 14}" y="{height + 51}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(result: Any, trace_report: str | None = None) -> str:
    """The report as one HTML document; ``trace_report``: the HTML report of the run's
    structured trace (``python -m kiln report``), linked from the page when given."""
    esc = html.escape
    trace_link = (f'<p>Every compile of this run, step by step: <a id="trace-report" '
                  f'href="{esc(Path(trace_report).absolute().as_uri())}">the trace report</a> '
                  f'({esc(trace_report)}).</p>' if trace_report else "")
    summary = "\n".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in _rows(result))
    sections = []
    for name, comparison in result.comparisons.items():
        title, note = TITLES[name]
        header, rows = _table(comparison)
        head = "".join(f"<th>{esc(c)}</th>" for c in header)
        body = "\n".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
        sections.append(f"<h2>{esc(title)}</h2><p>{esc(note)}</p>\n<table><tr>{head}</tr>\n{body}</table>\n"
                        f"{_bar_chart(comparison)}")
    guards = "\n".join(f"<li><code>{esc(g)}</code></li>" for g in result.guard_examples)
    graphs = "\n".join(f"<h3>graph {i + 1} of {len(result.graph_code)}</h3><pre>{esc(code)}</pre>"
                       for i, code in enumerate(result.graph_code))
    cfg = ", ".join(f"{k}={v}" for k, v in result.config.items())
    newline = "\n"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>kiln demo report</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 64em; }}
table {{ border-collapse: collapse; margin-bottom: 1.5em; }}
th, td {{ border: 1px solid #ccc; padding: 4px 10px; text-align: left; }}
th {{ background: #f4f4f4; }}
pre {{ background: #f8f8f8; padding: 0.8em; overflow-x: auto; }}
</style></head><body>
<h1>kiln demo: a GPT ({esc(cfg)})</h1>
{trace_link}
<h2>Capture</h2><table>{summary}</table>
{newline.join(sections)}
<p>Kernels + ATen calls: the kernels each compiler generated and the ATen or library calls
(matmuls, ops without a lowering) its wrapper makes between them, over the forward graph
(inference) or the forward and backward graphs (training step). Numerics: against eager
within <code>torch.testing.assert_close</code>'s default tolerances (float32: rtol 1.3e-6,
atol 1e-5), with the largest absolute difference seen.</p>
<h2>Captured graphs (generated code, shortened)</h2>
{graphs}
<h2>Some of the guards ({len(result.guard_examples)} of {result.guards})</h2><ul>{guards}</ul>
</body></html>
"""
