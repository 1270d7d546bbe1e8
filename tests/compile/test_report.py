"""The HTML report of a trace (kiln.report): parsed as HTML, and opened in a headless Chromium."""

import glob
import html
import json
import os
import shutil
import subprocess
import tomllib
from html.parser import HTMLParser

import pytest
import torch
from trace_support import lines, train

import kiln
from kiln.__main__ import main
from kiln.report import load_trace, render_report, write_report

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_VOID = {"meta", "input", "br", "hr", "img", "link", "col", "source", "wbr"}


class Element:
    def __init__(self, tag: str, attrs: dict, parent: "Element | None") -> None:
        self.tag, self.attrs, self.parent, self.children = tag, attrs, parent, []

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for c in self.children:
            if isinstance(c, Element):
                yield c
                yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list["Element"]:
        return [e for e in self.iter() if (tag is None or e.tag == tag) and (cls is None or cls in e.classes)
                and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.current = Element("#document", {}, None)

    def handle_starttag(self, tag, attrs):
        element = Element(tag, dict(attrs), self.current)
        self.current.children.append(element)
        if tag not in _VOID:
            self.current = element

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Element(tag, dict(attrs), self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse(page: str) -> Element:
    parser = _Parser()
    parser.feed(page)
    parser.close()
    return parser.root


def _highlighted(block: Element) -> tuple[int, str]:
    """The highlighted line of a source block: (its number, its text)."""
    (hll,) = block.find_all("span", cls="hll")
    (number,) = hll.find_all("span", cls="linenos")
    return int(number.text()), hll.text()[len(number.text()):]


def _check_anchors(doc: Element) -> None:
    ids = [e.attrs["id"] for e in doc.iter() if "id" in e.attrs]
    assert len(ids) == len(set(ids)), "ids are unique"
    links = [e.attrs["href"][1:] for e in doc.find_all("a") if e.attrs.get("href", "").startswith("#")]
    assert links and not set(links) - set(ids), sorted(set(links) - set(ids))[:5]


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("trace"))
    train(directory)
    return directory


@pytest.fixture(scope="module")
def page(trace_dir):
    return write_report(trace_dir)


@pytest.fixture(scope="module")
def doc(page):
    with open(page, encoding="utf-8") as f:
        return parse(f.read())


def test_the_graph_break_with_its_source_line(doc):
    _check_break(doc)


def _check_break(doc: Element) -> None:
    (first, second) = doc.find_all("article", cls="break")
    for article in (first, second):
        assert "depends on its data" in article.find_all("p", cls="reason")[0].text()
        (loc,) = article.find_all("div", cls="loc")
        assert int(loc.attrs["data-line"]) == lines()["break"]
        assert loc.attrs["data-file"].endswith("trace_support.py")
        number, text = _highlighted(loc)
        assert number == lines()["break"] and text.strip().startswith("if y.sum() > 0:")
    # it names the resume function's compile it continues in
    assert "__kiln_resume_in_forward" in first.text()


def test_the_recompiles_with_the_failing_guard_explained(doc):
    _check_recompiles(doc)


def _check_recompiles(doc: Element) -> None:
    forward, resume = doc.find_all("article", cls="recompile")
    assert "tensor L['x'] size(0): expected 4, got 6" in forward.find_all("code", cls="guard")[0].text()
    assert "automatic dynamic" in forward.find_all("div", cls="hint")[0].text()
    assert _highlighted(forward.find_all("div", cls="loc")[0])[0] == lines()["def"]
    assert "tensor L['y'] size(0): expected 4, got 6" in resume.text()
    # a resume function starts at the graph break that made it
    assert _highlighted(resume.find_all("div", cls="loc")[0])[0] == lines()["break"]


def test_the_dynamic_dimension(doc):
    _check_dynamic(doc)


def _check_dynamic(doc: Element) -> None:
    shapes = doc.find_all("article", cls="shapes")
    assert len(shapes) == 2  # the two compiles after the recompile; the first two are static
    rows = [[td.text() for td in tr.find_all("td")] for tr in shapes[0].find_all("tr", cls="symbol")]
    batch = next(r for r in rows if r[1] == "L['x'].size(0)")
    assert batch[2] == "6" and batch[3] == "[1, inf]" and batch[4] == ""
    assert batch[5].startswith("automatic dynamic")


def test_the_training_step(doc):
    _check_training(doc)


def _check_training(doc: Element) -> None:
    compiles = doc.find_all("article", cls="compile")
    assert len(compiles) == 4
    first = compiles[0]
    summaries = [s.text() for s in first.find_all("summary")]
    assert {"joint graph", "forward graph", "backward graph"} <= set(summaries)
    assert any(s.startswith("saved for the backward (") for s in summaries)
    assert [h.text() for h in first.find_all("h4")][:3] == ["aotgrad", "inductor: forward", "inductor: backward"]
    kernels = [tr for tr in first.find_all("tr") if tr.attrs.get("id", "").startswith(first.attrs["id"] + "-backward-")]
    assert kernels and all(tr.find_all("td", cls="nodes")[0].text() for tr in kernels)
    # the tree links each kernel of each compile
    tree = doc.find_all("section", id="tree")[0]
    linked = {a.attrs["href"][1:] for a in tree.find_all("a")}
    assert {tr.attrs["id"] for tr in kernels} <= linked


def test_code_is_highlighted_by_pygments(doc):
    blocks = doc.find_all("div", cls="code")
    assert len(blocks) > 20
    keywords = [span.text() for span in doc.find_all("span", cls="k")]
    assert "def" in keywords and "return" in keywords
    cpp = [b for b in doc.find_all("details", cls="codeblock") if b.find_all("summary")[0].text() == "C++ kernels"]
    assert cpp and cpp[0].find_all("span", cls="cp")  # preprocessor lines: the C++ lexer


def test_the_timeline_the_phases_and_the_summary(doc):
    timeline = doc.find_all("section", id="timeline")[0]
    assert len(timeline.find_all("rect")) == 4
    phases = doc.find_all("section", id="phases")[0]
    totals = {td.attrs["data-phase"]: td.text() for td in phases.find_all("td", cls="phase-total")}
    assert set(totals) == {"capture", "aotgrad", "inductor", "guards", "load", "other"}
    assert float(totals["inductor"].split()[0]) > 0
    summary = {tr.find_all("th")[0].text(): tr.find_all("td")[0].text()
               for tr in doc.find_all("section", id="summary")[0].find_all("tr")}
    assert summary["compiles"] == "4" and summary["graph breaks"] == "2" and summary["recompiles"] == "2"


def test_links_resolve_and_nothing_is_fetched(doc, page):
    _check_anchors(doc)
    for e in doc.iter():
        for name in ("src", "href"):
            value = e.attrs.get(name) or ""
            assert not value.startswith(("http:", "https:", "//")), (e.tag, value)
    assert not doc.find_all("link") and all("src" not in s.attrs for s in doc.find_all("script"))
    assert doc.find_all("input", id="search") and doc.find_all("nav", id="toc")


def test_the_transformed_code_decompiled(trace_dir, monkeypatch):
    trace = load_trace(trace_dir)
    page = render_report(trace)
    assert "decompiled (kiln.decompile)" in page and "(kiln.decompile failed" not in page
    # the replacements' source files beside the trace, named in their sections
    files = glob.glob(os.path.join(trace_dir, "code", "kiln-replacement-*.py"))
    assert files and all(f"<code>{html.escape(f)}</code>" in page for f in files)
    # the resume function after the break, as the user's source (kiln.decompile's own output)
    assert "__kiln_resume_in_" in page
    monkeypatch.setattr(kiln, "decompile", None)  # a kiln without a decompiler
    assert "decompiled (kiln.decompile)" not in render_report(trace)
    monkeypatch.setattr(kiln, "decompile", lambda code: f"# the source of {code.co_name}", raising=False)
    page = render_report(trace)
    assert "decompiled (kiln.decompile)" in page and "the source of forward" in page


def test_failing_guards_in_plain_words():
    from kiln.report._render import explain_failure

    assert "automatic dynamic" in explain_failure("tensor L['x'] size(0): expected 4, got 6")
    assert "train() and eval()" in explain_failure("module L['self'] training: expected False, got True")
    assert "dtype" in explain_failure("tensor L['x'] dtype: expected torch.float32, got torch.float64")
    assert "Python number" in explain_failure("L['n'] == 3: expected 3, got 4")
    assert "new entry" in explain_failure("something else entirely")


def test_bytecode_of_another_python_version(trace_dir):
    trace = load_trace(trace_dir)
    trace.processes[0].header["python"] = "3.99.0"
    assert "written by Python 3.99.0" in render_report(trace)


def test_a_line_cut_short_is_skipped_and_named(trace_dir, tmp_path):
    (path,) = glob.glob(os.path.join(trace_dir, "*.jsonl"))
    copy = tmp_path / os.path.basename(path)
    shutil.copy(path, copy)
    with open(copy, "a") as f:
        f.write('{"event": "frame", "comp')
    trace = load_trace(str(tmp_path))
    assert len(trace.compiles) == 4 and len(trace.problems) == 1
    assert "a write cut short" in render_report(trace)


def test_the_command_line(trace_dir, tmp_path, capsys):
    out = tmp_path / "out.html"
    assert main(["report", trace_dir, "-o", str(out), "--title", "my run"]) == 0
    assert f"report: {out}" in capsys.readouterr().out
    assert "<title>my run</title>" in out.read_text()
    from kiln.report import main as console_main

    empty = tmp_path / "empty"
    empty.mkdir()
    assert console_main([str(empty)]) == 2
    assert "no trace files" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "no such trace folder" in capsys.readouterr().err


def test_the_console_script_and_the_dependencies_are_declared():
    with open(os.path.join(REPO, "packages", "compile", "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["scripts"]["kiln-report"] == "kiln.report:main"
    names = {d.split(">")[0].split("=")[0].split("<")[0].strip() for d in project["dependencies"]}
    assert {"pygments", "jinja2"} <= names
    with open(os.path.join(REPO, "hatch.toml"), "rb") as f:
        hatch = tomllib.load(f)
    assert any(d.startswith("pygments") for d in hatch["envs"]["default"]["dependencies"])
    assert any(d.startswith("pygments") for d in hatch["envs"]["hatch-test"]["extra-dependencies"])


def _break(x):
    y = x.sin()
    if y.sum() > 0:  # explain's break
        y = y + 1
    return y.cos()


def test_explain_writes_the_report_of_its_call(tmp_path):
    info = kiln.explain(_break)(torch.ones(3))
    path = info.report(str(tmp_path / "sub" / "explain.html"))
    with open(path, encoding="utf-8") as f:
        doc = parse(f.read())
    (article,) = doc.find_all("article", cls="break")
    number, text = _highlighted(article.find_all("div", cls="loc")[0])
    assert number == _break.__code__.co_firstlineno + 2 and "# explain's break" in text
    assert len(doc.find_all("article", cls="compile")) == 2
    _check_anchors(doc)


# -- a real browser ----------------------------------------------------------------------------
def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _browser(*args: str) -> subprocess.CompletedProcess:
    binary = _chromium()
    if binary is None:
        pytest.skip("no Chromium binary on PATH (apt-get install chromium); the report is checked as HTML above")
    return subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--no-first-run", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=180)


def test_in_a_headless_browser(page, tmp_path):
    url = "file://" + os.path.abspath(page)
    shot = tmp_path / "report.png"
    done = _browser(f"--screenshot={shot}", "--window-size=1280,2000", url)
    assert shot.exists(), done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000

    dom = _browser("--virtual-time-budget=5000", "--dump-dom", url)
    doc = parse(dom.stdout)
    (body,) = doc.find_all("body")
    assert body.attrs.get("data-ready") == "1", "the page's script ran"
    toc = [a.text() for a in doc.find_all("a", cls="toc-link")]
    assert len(toc) == 8 and toc[0] == "Summary" and "Graph breaks and eager frames (2)" in toc
    for section in ("summary", "timeline", "phases", "tree", "breaks", "recompiles", "shapes", "compiles"):
        assert doc.find_all("section", id=section), section
    # what the acceptance asks, as the browser has the page after its script ran
    _check_break(doc)
    _check_recompiles(doc)
    _check_dynamic(doc)
    _check_training(doc)
    _check_anchors(doc)


def test_search_in_a_headless_browser(page):
    url = "file://" + os.path.abspath(page) + "#search=__kiln_resume_in_forward"
    doc = parse(_browser("--virtual-time-budget=5000", "--dump-dom", url).stdout)
    searchable = [e for e in doc.iter() if "data-search" in e.attrs]
    hidden = [e for e in searchable if "hidden-by-search" in e.classes]
    shown = [e for e in searchable if "hidden-by-search" not in e.classes]
    assert hidden and shown
    assert all("__kiln_resume_in_forward" in e.text() for e in shown)
    assert all("__kiln_resume_in_forward" not in e.text() for e in hidden)
    (count,) = doc.find_all("span", id="search-count")
    assert count.text() == f"{len(shown)} of {len(searchable)} match"


def test_the_trace_files_are_json_lines(trace_dir):
    (path,) = glob.glob(os.path.join(trace_dir, "*.jsonl"))
    with open(path) as f:
        assert all(isinstance(json.loads(line), dict) for line in f)


def _specializes(x):
    return torch.zeros(int(x.shape[0]) + 1) + x.sum()  # the size as a Python int


def test_a_specialized_size_with_its_line(tmp_path):
    info_dir = tmp_path / "trace"
    kiln.config.trace_dir = str(info_dir)
    try:
        kiln.compile(_specializes, backend="eager", dynamic=True)(torch.ones(5))
    finally:
        kiln.config.trace_dir = None
    doc = parse(render_report(load_trace(str(info_dir))))
    (article,) = doc.find_all("article", cls="shapes")
    (block,) = article.find_all("div", cls="specialization")
    assert "s0 specialized (s0 = 5)" in block.text()
    number, text = _highlighted(block.find_all("div", cls="loc")[0])
    assert number == _specializes.__code__.co_firstlineno + 1 and "# the size as a Python int" in text
