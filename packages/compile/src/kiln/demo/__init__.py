"""kiln.demo: the main job. ``python -m kiln demo`` compiles a small GPT for inference and one
training step with kiln and with torch.compile, each with its default backend (kiln's
aotgrad + inductor, torch's Inductor) and then both with ``backend="eager"`` (the frontends
alone); prints what happened (first-call and steady-state times, generated kernels, the
numerics against eager, the captured graph's code, some guards) and writes an HTML report (by
default ``default_report_path()``, in the user's cache folder)."""

from ._model import GPT, GPTConfig
from ._report import default_report_path, render_html, render_text
from ._run import Comparison, DemoResult, outputs_match, run_demo
from ._timing import measure, time_once
from ._variants import COMPARISONS, VARIANTS, Variant

__all__ = ["COMPARISONS", "GPT", "VARIANTS", "Comparison", "DemoResult", "GPTConfig", "Variant",
           "default_report_path", "measure", "outputs_match", "render_html", "render_text", "run_demo",
           "time_once"]
