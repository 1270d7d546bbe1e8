"""Rendering a loaded trace (``_load.Trace``) as one self-contained HTML page.

The page (``templates/report.html.j2``, with its stylesheet and script inlined) has: a
summary; a compile timeline and a chart of each compile's phases (inline SVG); a tree of
frames, their compiles, graphs and kernels (a resume function under the compile whose graph
break made it); each graph break and each recompile with the user's source line
highlighted, failing guards explained; symbolic sizes; and per compile its generated code
(captured graph, aotgrad's graphs and saved values, inductor's wrapper and kernels with the
nodes each fused, the guards' checker, the transformed code), highlighted by pygments. A
small inline script adds a table of contents and search. Nothing is fetched: no server, no
downloads.

The expensive work is here, not in the compile: highlighting, and disassembling the code
objects the trace holds marshaled (which needs the Python version that wrote them); where
``kiln.decompile`` exists (``getattr(kiln, "decompile", None)``), it gives each transformed
code's Python source too.
"""

from __future__ import annotations

import base64
import dis
import functools
import html
import io
import marshal
import sys
import time
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, PythonLexer, TextLexer

from ._load import Compile, Trace

__all__ = ["render_report"]

PHASES = ("capture", "aotgrad", "inductor", "guards", "load", "other")
COLORS = {"capture": "#1c7ed6", "aotgrad": "#f59f00", "inductor": "#d9480f", "guards": "#2f9e44",
          "load": "#7048e8", "other": "#adb5bd"}
_LEXERS = {"python": PythonLexer, "cpp": CppLexer, "text": TextLexer}


@functools.cache
def _environment() -> jinja2.Environment:
    # a key a trace lacks (a file cut short, an older kiln's) renders empty, never fails the page
    return jinja2.Environment(loader=jinja2.PackageLoader("kiln.report", "templates"),
                              autoescape=True, trim_blocks=True, lstrip_blocks=True)


def code_html(code: str, language: str = "python", *, first: int = 1, mark: tuple[int, ...] = ()) -> Markup:
    """``code`` highlighted (``language``: python, cpp or text), lines numbered from
    ``first``; the lines numbered in ``mark`` are highlighted (class ``hll``)."""
    formatter = HtmlFormatter(linenos="inline", linenostart=first, cssclass="code",
                              hl_lines=[n - first + 1 for n in mark], wrapcode=True)
    return Markup(highlight(code or "\n", _LEXERS[language](stripnl=False), formatter))


def source_html(location: dict[str, Any] | None) -> Markup:
    """The lines around a recorded location (``_trace._location``), its own line
    highlighted, in a block naming the file and line (``data-file``, ``data-line``)."""
    if not location:
        return Markup('<p class="muted">(no source location)</p>')
    first, lines = location.get("context") or [location.get("line") or 1, [location.get("text", "")]]
    line = location.get("line") or first
    head = Markup('<div class="loc" data-file="{0}" data-line="{1}"><span class="where">{0}:{1} in {2}</span>'
                  '<code class="srcline">{3}</code>').format(location.get("file", "?"), line,
                                                             location.get("function", "?"),
                                                             location.get("text", "").strip())
    return head + code_html("\n".join(lines), first=first, mark=(line,)) + Markup("</div>")


def _frame_source(c: Compile) -> Markup:
    """The compiled function's source as traced, the line it starts at highlighted: its
    first line, or for a resume function the line of the graph break that made it."""
    first, lines = c.frame.get("source") or [c.code["line"], []]
    line = c.code["line"]
    if c.parent is not None:
        loc = next((b["location"] for b in c.parent.all("graph_break")
                    if c.code["name"] in b.get("resumes", ()) and b.get("location")), None)
        if loc is not None and loc.get("file") == c.code["file"]:
            line = loc["line"]
    location = {"file": c.code["file"], "line": line, "function": c.code["qualname"],
                "text": lines[line - first] if 0 <= line - first < len(lines) else "",
                "context": [first, lines]}
    return source_html(location)


def _code_object(b64: str, python: str | None) -> Any:
    """The code object marshaled in a trace, or the reason it cannot be read here."""
    here = sys.version.split()[0]
    if python and python.rsplit(".", 1)[0] != here.rsplit(".", 1)[0]:
        return f"(written by Python {python}; its bytecode reads only under that version, this is {here})"
    if not b64:
        return "(not recorded)"
    try:
        return marshal.loads(base64.b64decode(b64))
    except Exception as e:  # a corrupt or foreign record
        return f"(cannot read the recorded code: {type(e).__name__}: {e})"


def disassembly(b64: str, python: str | None) -> str:
    """``dis`` of a marshaled code object, nested code objects included."""
    code = _code_object(b64, python)
    if isinstance(code, str):
        return code
    out = io.StringIO()
    dis.dis(code, file=out)
    return out.getvalue()


def decompiled(b64: str, python: str | None) -> str | None:
    """``kiln.decompile``'s source of a marshaled code object, None where kiln has none."""
    import kiln

    decompile = getattr(kiln, "decompile", None)
    if decompile is None:
        return None
    code = _code_object(b64, python)
    if isinstance(code, str):
        return code
    try:
        return str(decompile(code))
    except Exception as e:  # a limit of the decompiler must not cost the report
        return f"(kiln.decompile failed: {type(e).__name__}: {e})"


_HINTS = (
    ("compiled by <kiln.compile", "another kiln.compile configuration (backend, mode, options) runs this "
                                  "code: each keeps entries of its own"),
    (" training:", "the module switched between train() and eval(): dropout, batch norm and the "
                   "autograd graph differ, so another graph is compiled"),
    ("size(", "a tensor's size changed: the next compile makes that dimension a symbol (automatic "
              "dynamic), so one graph serves the sizes that follow"),
    ("stride(", "a tensor's strides changed (a transposed or sliced input): the graph was compiled "
                "for the earlier layout"),
    ("dtype", "a tensor's dtype changed: kernels are compiled per dtype"),
    ("device", "a tensor moved to another device"),
    ("requires_grad", "requires_grad changed: a training graph (forward and backward) and an "
                      "inference graph differ"),
    ("grad_enabled", "grad mode changed (torch.no_grad): another graph is needed"),
    ("type:", "an argument's type changed"),
    (" is a ", "an object's type or structure changed"),
    ("expected", "a value the trace specialized on changed (a Python number becomes a graph input "
                 "at its second value under dynamic=None)"),
)


def explain_failure(text: str) -> str:
    """A plain-words reading of a failing guard's explanation."""
    for needle, hint in _HINTS:
        if needle in text:
            return hint
    return "the entry's guards do not hold for this call, so a new entry is compiled"


def _svg_timeline(trace: Trace) -> Markup:
    compiles = trace.compiles
    if not compiles:
        return Markup('<p class="muted">(no compiles)</p>')
    t0 = min(c.start for c in compiles)
    t1 = max(c.start + c.seconds for c in compiles)
    span = max(t1 - t0, 1e-6)
    width, row, left = 900, 28, 130
    height = row * len(trace.processes) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width + left + 10} {height}" '
             f'width="100%" role="img" aria-label="compile timeline">']
    for p in trace.processes:
        y = 4 + row * p.index
        parts.append(f'<text x="0" y="{y + 16}" class="axis">{html.escape(p.label)}</text>')
        for c in p.compiles:
            x = left + (c.start - t0) / span * width
            w = max(c.seconds / span * width, 2.0)
            color = "#c92a2a" if c.all("graph_break") or c.status != "compiled" else "#1c7ed6"
            title = f"#{c.number} {c.code['qualname']} ({c.frame['why']}): {c.seconds * 1e3:.1f} ms, {c.status}"
            parts.append(f'<a href="#{c.anchor}"><rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 8}" '
                         f'fill="{color}" opacity="0.8"><title>{html.escape(title)}</title></rect></a>')
    parts.append(f'<text x="{left}" y="{height - 4}" class="axis">0 s</text>')
    parts.append(f'<text x="{left + width}" y="{height - 4}" class="axis" text-anchor="end">{span:.2f} s</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _svg_phases(trace: Trace) -> Markup:
    compiles = trace.compiles
    if not compiles:
        return Markup("")
    longest = max(c.seconds for c in compiles) or 1e-6
    width, row, left = 700, 20, 330
    height = row * len(compiles) + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width + left + 90} {height}" '
             f'width="100%" role="img" aria-label="compile time per phase">']
    for i, c in enumerate(compiles):
        y = 4 + row * i
        label = f"#{c.number} {c.code['qualname']}"[:48]
        parts.append(f'<a href="#{c.anchor}"><text x="0" y="{y + 13}" class="axis">{html.escape(label)}</text></a>')
        x = float(left)
        for phase, seconds in c.phases().items():
            w = seconds / longest * width
            if w <= 0:
                continue
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 5}" fill="{COLORS[phase]}">'
                         f'<title>{phase}: {seconds * 1e3:.1f} ms</title></rect>')
            x += w
        parts.append(f'<text x="{x + 4:.1f}" y="{y + 13}" class="axis">{c.seconds * 1e3:.0f} ms</text>')
    y = height - 14
    x = float(left)
    for phase in PHASES:
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{COLORS[phase]}"/>'
                     f'<text x="{x + 14}" y="{y}" class="axis">{phase}</text>')
        x += 90
    parts.append("</svg>")
    return Markup("".join(parts))


def _kernels(c: Compile) -> list[dict[str, Any]]:
    rows = []
    for e in c.all("inductor"):
        for name, nodes in (e.get("fused") or {}).items():
            rows.append({"half": e["half"], "name": name, "nodes": nodes, "id": f"{c.anchor}-{e['half']}-{name}"})
    return rows


def _summary(trace: Trace) -> list[tuple[str, Any]]:
    compiles = trace.compiles
    caches: dict[str, int] = {}
    for c in compiles:
        for e in c.all("cache"):
            key = f"{e['kind']} cache {e['result']}"
            caches[key] = caches.get(key, 0) + 1
    rows = [
        ("processes", len(trace.processes)),
        ("compiles", len(compiles)),
        ("frames (code objects)", len({(c.code["file"], c.code["line"], c.code["qualname"]) for c in compiles})),
        ("graphs", sum(1 for c in compiles if (c.first("graph") or {}).get("op_count"))),
        ("ops captured", sum((c.first("graph") or {}).get("op_count", 0) for c in compiles)),
        ("graph breaks", sum(len(c.all("graph_break")) for c in compiles)),
        ("frames run eagerly", sum(len(c.all("eager")) for c in compiles)),
        ("recompiles", sum(1 for c in compiles if c.frame["why"] == "guard failure")),
        ("recompile limits hit", sum(len(c.all("recompile_limit")) for c in compiles)),
        ("kernels", sum(int(e.get("kernels") or 0) for c in compiles for e in c.all("inductor"))),
        ("compile time", f"{sum(c.seconds for c in compiles):.2f} s"),
    ]
    return rows + sorted(caches.items())


def _tree(trace: Trace) -> list[dict[str, Any]]:
    """Frames (code objects compiled as roots, in order of first compile), each with its
    compiles; resume functions sit under the compile whose break made them (``children``)."""
    frames: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c in trace.compiles:
        if c.parent is not None:
            continue
        key = (c.process, c.code["file"], c.code["line"], c.code["qualname"])
        if key not in frames:
            frames[key] = {"id": f"frame-{len(frames)}", "code": c.code, "compiles": []}
        frames[key]["compiles"].append(c)
    return list(frames.values())


def render_report(trace: Trace, title: str = "kiln trace report") -> str:
    """The HTML page of ``trace`` (see the module docstring)."""
    env = _environment()
    python = {p.index: p.header.get("python") for p in trace.processes}
    folder = resources.files("kiln.report") / "templates"
    styles = (folder / "report.css").read_text(encoding="utf-8") + HtmlFormatter(cssclass="code").get_style_defs(".code")
    template = env.get_template("report.html.j2")
    return template.render(
        title=title, trace=trace, compiles=trace.compiles, summary=_summary(trace), tree=_tree(trace),
        timeline=_svg_timeline(trace), phases=_svg_phases(trace), phase_names=PHASES, colors=COLORS,
        totals={phase: sum(c.phases()[phase] for c in trace.compiles) for phase in PHASES},
        styles=Markup(styles), script=Markup((folder / "report.js").read_text(encoding="utf-8")),
        code=code_html, source=source_html, frame_source=_frame_source, kernels=_kernels,
        explain_failure=explain_failure,
        disassembly=lambda c, e: disassembly(e.get("code_b64", ""), python.get(c.process)),
        decompiled=lambda c, e: decompiled(e.get("code_b64", ""), python.get(c.process)),
        generated=time.strftime("%Y-%m-%d %H:%M:%S"),
    )
