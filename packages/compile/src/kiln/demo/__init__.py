"""kiln.demo: the main job. ``python -m kiln demo`` compiles a small GPT with kiln for
inference and one training step, prints what happened (figures, the captured graph's code,
some guards) and writes an HTML report (by default ``default_report_path()``, in the user's
cache folder)."""

from ._model import GPT, GPTConfig
from ._report import default_report_path, render_html, render_text
from ._run import DemoResult, outputs_match, run_demo
from ._timing import measure, time_once

__all__ = ["GPT", "DemoResult", "GPTConfig", "default_report_path", "measure", "outputs_match",
           "render_html", "render_text", "run_demo", "time_once"]
