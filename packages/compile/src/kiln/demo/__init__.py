"""kiln.demo: the main job. ``python -m kiln demo`` compiles a small GPT with kiln for
inference and one training step, prints what happened and writes an HTML report."""

from ._model import GPT, GPTConfig
from ._report import render_html, render_text
from ._run import DemoResult, outputs_match, run_demo
from ._timing import measure, time_once

__all__ = ["GPT", "DemoResult", "GPTConfig", "measure", "outputs_match", "render_html", "render_text",
           "run_demo", "time_once"]
