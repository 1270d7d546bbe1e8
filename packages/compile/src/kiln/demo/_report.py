"""The demo's output: a terminal summary (the figures, each captured graph's code shortened,
some guards) and a self-contained HTML report (the same, tables and an SVG bar chart; no
JavaScript, no downloads), written by default to ``default_report_path()``: the user's cache
folder, never the source tree."""

from __future__ import annotations

import html
import os
from typing import Any

__all__ = ["default_report_path", "render_html", "render_text"]


def default_report_path() -> str:
    """Where ``python -m kiln demo`` writes its HTML report unless told otherwise:
    ``$XDG_CACHE_HOME/kiln/demo-report.html`` (``~/.cache/kiln/demo-report.html`` when
    XDG_CACHE_HOME is unset)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "kiln", "demo-report.html")

_COLORS = {"eager": "#8a8a8a", "kiln": "#d9480f", "torch.compile": "#1c7ed6"}


def _rows(result: Any) -> list[tuple[str, str]]:
    r = result
    ok = all(r.numerics.values())
    return [
        ("device", f"{r.device} (Python {r.versions['python']}, torch {r.versions['torch']})"),
        ("graphs captured", f"{r.graphs} (compiled by kiln.compile: {r.compiled_graphs})"),
        ("graph breaks", f"{r.graph_breaks}" + (f": {'; '.join(r.break_reasons)}" if r.break_reasons else "")),
        ("ops in the graph", str(r.ops)),
        ("guards", str(r.guards)),
        ("compile time, kiln", f"{r.compile_s['kiln'] * 1000:.0f} ms"),
        ("compile time, torch.compile", f"{r.compile_s['torch.compile'] * 1000:.0f} ms"),
        ("numerics match eager", "yes" if ok else "NO: " + ", ".join(k for k, v in r.numerics.items() if not v)),
    ]


def _timing_rows(result: Any) -> list[tuple[str, str, str, str]]:
    out = []
    for label, table in (("inference", result.inference_ms), ("training step", result.train_step_ms)):
        e = table["eager"]
        for name in ("eager", "kiln", "torch.compile"):
            out.append((label, name, f"{table[name]:.3f} ms", f"{e / table[name]:.2f}x"))
    return out


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
    lines.append("")
    lines.append(f"{'':14}{'variant':16}{'time':>12}{'speed-up vs eager':>20}")
    lines += [f"{a:14}{b:16}{c:>12}{d:>20}" for a, b, c, d in _timing_rows(result)]
    lines.append("")
    lines.append("backend 'eager' for both compilers: the figures compare the frontends "
                 "(kiln's inductor backend is not built yet)")
    return "\n".join(lines)


def _bar_chart(result: Any) -> str:
    groups = [("inference", result.inference_ms), ("training step", result.train_step_ms)]
    names = ["eager", "kiln", "torch.compile"]
    top = max(v for _, t in groups for v in t.values()) or 1.0
    bar_w, gap, group_gap, height = 46, 8, 60, 220
    width = 60 + len(groups) * (len(names) * (bar_w + gap) + group_gap)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 60}" '
             'font-family="sans-serif" font-size="12">']
    x = 50
    for label, table in groups:
        for name in names:
            h = table[name] / top * height
            parts.append(f'<rect x="{x}" y="{height - h + 10:.1f}" width="{bar_w}" height="{h:.1f}" '
                         f'fill="{_COLORS[name]}"><title>{name}: {table[name]:.3f} ms</title></rect>')
            parts.append(f'<text x="{x + bar_w / 2}" y="{height - h + 5:.1f}" text-anchor="middle">'
                         f'{table[name]:.2f}</text>')
            x += bar_w + gap
        parts.append(f'<text x="{x - (len(names) * (bar_w + gap)) / 2}" y="{height + 30}" '
                     f'text-anchor="middle" font-weight="bold">{html.escape(label)} (ms)</text>')
        x += group_gap
    legend_x = 50
    for name in names:
        parts.append(f'<rect x="{legend_x}" y="{height + 42}" width="10" height="10" fill="{_COLORS[name]}"/>')
        parts.append(f'<text x="{legend_x + 14}" y="{height + 51}">{html.escape(name)}</text>')
        legend_x += 110
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(result: Any) -> str:
    """The report as one HTML document."""
    esc = html.escape
    summary = "\n".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in _rows(result))
    timing = "\n".join(f"<tr><td>{esc(a)}</td><td>{esc(b)}</td><td>{esc(c)}</td><td>{esc(d)}</td></tr>"
                       for a, b, c, d in _timing_rows(result))
    checks = "\n".join(f"<tr><td>{esc(k)}</td><td>{'match' if v else 'MISMATCH'}</td></tr>"
                       for k, v in result.numerics.items())
    guards = "\n".join(f"<li><code>{esc(g)}</code></li>" for g in result.guard_examples)
    graphs = "\n".join(f"<h3>graph {i + 1} of {len(result.graph_code)}</h3><pre>{esc(code)}</pre>"
                       for i, code in enumerate(result.graph_code))
    cfg = ", ".join(f"{k}={v}" for k, v in result.config.items())
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>kiln demo report</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 60em; }}
table {{ border-collapse: collapse; margin-bottom: 1.5em; }}
th, td {{ border: 1px solid #ccc; padding: 4px 10px; text-align: left; }}
th {{ background: #f4f4f4; }}
pre {{ background: #f8f8f8; padding: 0.8em; overflow-x: auto; }}
</style></head><body>
<h1>kiln demo: a GPT ({esc(cfg)})</h1>
<h2>Capture</h2><table>{summary}</table>
<h2>Captured graphs (generated code, shortened)</h2>
{graphs}
<h2>Steady state</h2>
<table><tr><th>workload</th><th>variant</th><th>median time</th><th>speed-up vs eager</th></tr>{timing}</table>
{_bar_chart(result)}
<h2>Numerics against eager</h2><table>{checks}</table>
<h2>Some of the guards ({len(result.guard_examples)} of {result.guards})</h2><ul>{guards}</ul>
<p>Both compilers use <code>backend="eager"</code> (kiln's inductor backend is not built yet),
so the figures compare the frontends: capture time and per-call cost.</p>
</body></html>
"""
