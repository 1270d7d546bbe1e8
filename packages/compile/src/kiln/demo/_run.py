"""The demo: compile a small GPT for inference and one training step, and show what happened.

Steps (each shown as it runs): build the model and a batch; explain the capture (graphs,
graph breaks with reasons, guards); compile with kiln and with torch.compile and time each
first call; check that kiln's answers match eager (outputs, loss, gradients, parameters after
an optimizer step); time the steady state of eager, kiln and torch.compile, interleaved.
Both compilers use ``backend="eager"`` until kiln's own inductor backend exists, so the
comparison is between the frontends (capture, guards, per-call overhead).
"""

from __future__ import annotations

import copy
import platform
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

import kiln

from ._model import GPT, GPTConfig
from ._timing import measure, time_once

__all__ = ["DemoResult", "run_demo", "shorten"]

BACKEND = "eager"
GRAPH_LINES = 24  # lines of each captured graph's code the demo keeps (the head of forward)
GUARD_EXAMPLES = 8


@dataclass
class DemoResult:
    """Everything the demo measured (also what the HTML report shows)."""

    device: str
    versions: dict[str, str]
    config: dict[str, int]
    graphs: int = 0
    compiled_graphs: int = 0
    graph_breaks: int = 0
    break_reasons: list[str] = field(default_factory=list)
    ops: int = 0
    guards: int = 0
    guard_examples: list[str] = field(default_factory=list)  # the first GUARD_EXAMPLES guards
    graph_code: list[str] = field(default_factory=list)  # each graph's code, first GRAPH_LINES lines
    compile_s: dict[str, float] = field(default_factory=dict)      # first call, by compiler
    inference_ms: dict[str, float] = field(default_factory=dict)   # steady state, by variant
    train_step_ms: dict[str, float] = field(default_factory=dict)
    numerics: dict[str, bool] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Progress:
    """A progress display: rich's when installed, plain lines otherwise."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._rich: Any = None
        try:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            # no refresh thread: it would take the GIL from the timing loops (measured: the
            # demo's launch-bound GPU inference 12% slower than the harness's with it)
            self._rich = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                  TimeElapsedColumn(), auto_refresh=False)
        except ImportError:
            pass

    @contextmanager
    def run(self) -> Iterator[Callable[[str], None]]:
        if self._rich is None:
            step = [0]

            def advance(text: str) -> None:
                step[0] += 1
                print(f"[{step[0]}/{self.total}] {text}", flush=True)

            yield advance
            return
        with self._rich as progress:
            task = progress.add_task("starting", total=self.total)

            def advance(text: str) -> None:
                progress.update(task, advance=1, description=text, refresh=True)

            yield advance


def outputs_match(a: Any, b: Any) -> bool:
    """Whether two results are equal within torch's default tolerances (the same ops ran,
    so float32 defaults apply); shared by the demo and the benchmark harness."""
    try:
        torch.testing.assert_close(a, b)  # the same ops run: float32 defaults
    except AssertionError:
        return False
    return True


def shorten(code: str, lines: int, width: int = 110) -> str:
    """The first ``lines`` lines of ``code``, each cut to ``width`` characters, then a line
    saying how many were left out."""
    all_lines = [line if len(line) <= width else line[:width - 4] + " ..."
                 for line in code.strip("\n").splitlines()]
    if len(all_lines) <= lines:
        return "\n".join(all_lines)
    return "\n".join([*all_lines[:lines], f"    ... ({len(all_lines) - lines} more lines)"])


def run_demo(device: str | None = None, *, rounds: int = 10, config: GPTConfig | None = None,
             batch: int = 8) -> DemoResult:
    """Run the demo on ``device`` (CUDA when available, else CPU); returns the figures."""
    import torch._dynamo

    config = config or GPTConfig()

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "kiln": kiln.__version__, "machine": platform.machine()}
    result = DemoResult(device, versions, asdict(config))
    progress = _Progress(total=7)
    with progress.run() as advance:
        advance("building a GPT and a batch")
        torch.manual_seed(0)
        model = GPT(config).to(device).eval()
        gen = torch.Generator(device="cpu").manual_seed(1)
        idx = torch.randint(0, config.vocab, (batch, config.block), generator=gen).to(device)
        targets = torch.randint(0, config.vocab, (batch, config.block), generator=gen).to(device)

        advance("explaining the capture")
        with torch.no_grad():
            info = kiln.explain(model)(idx)
        result.graphs, result.graph_breaks, result.ops = info.graph_count, info.graph_break_count, info.op_count
        result.break_reasons = [str(r) for r in info.break_reasons]
        result.guards = len(info.guards)
        result.guard_examples = [g.describe() for g in info.guards[:GUARD_EXAMPLES]]
        result.graph_code = [shorten(gm.code, GRAPH_LINES) for gm in info.graphs]

        advance("compiling (kiln, then torch.compile)")
        kiln.reset()
        torch._dynamo.reset()
        compiled_graphs: list[Any] = []

        def counting_eager(gm: Any, example_inputs: list[Any]) -> Any:
            compiled_graphs.append(gm)
            return gm.forward

        ours = kiln.compile(model, backend=counting_eager)
        theirs = torch.compile(model, backend=BACKEND)
        with torch.no_grad():
            result.compile_s["kiln"] = time_once(lambda: ours(idx), device)
            result.compile_s["torch.compile"] = time_once(lambda: theirs(idx), device)
            expected = model(idx)
            result.numerics["inference output"] = outputs_match(ours(idx), expected)
        # what kiln.compile really compiled (explain only traces): a silent fallback to eager
        # would show here as 0
        result.compiled_graphs = len(compiled_graphs)

        advance("checking a training step against eager")
        result.numerics.update(_check_training(model, idx, targets))

        advance("timing inference (steady state)")
        with torch.no_grad():
            t = measure({"eager": lambda: model(idx), "kiln": lambda: ours(idx),
                         "torch.compile": lambda: theirs(idx)}, device=device, rounds=rounds)
        result.inference_ms = {k: v * 1000 for k, v in t.items()}

        advance("timing a training step (steady state)")
        result.train_step_ms = _time_training(model, idx, targets, device, rounds)

        advance("done")
    return result


def _train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, idx: torch.Tensor,
                targets: torch.Tensor) -> torch.Tensor:
    opt.zero_grad(set_to_none=True)
    _, loss = model(idx, targets)
    loss.backward()
    opt.step()
    return loss


def _check_training(model: torch.nn.Module, idx: torch.Tensor, targets: torch.Tensor) -> dict[str, bool]:
    eager_model = copy.deepcopy(model).train()
    kiln_model = copy.deepcopy(model).train()
    compiled = kiln.compile(kiln_model, backend=BACKEND)
    opt_e = torch.optim.SGD(eager_model.parameters(), lr=0.1)
    opt_k = torch.optim.SGD(kiln_model.parameters(), lr=0.1)
    loss_e = _train_step(eager_model, opt_e, idx, targets)
    opt_k.zero_grad(set_to_none=True)
    _, loss_k = compiled(idx, targets)
    loss_k.backward()
    grads = all(outputs_match(a.grad, b.grad) for a, b in zip(eager_model.parameters(), kiln_model.parameters(), strict=True))
    opt_k.step()
    params = all(outputs_match(a, b) for a, b in zip(eager_model.parameters(), kiln_model.parameters(), strict=True))
    return {"training loss": outputs_match(loss_k, loss_e), "gradients": grads, "parameters after SGD step": params}


def _time_training(model: torch.nn.Module, idx: torch.Tensor, targets: torch.Tensor, device: str,
                   rounds: int) -> dict[str, float]:
    variants: dict[str, Callable[[], Any]] = {}
    for name in ("eager", "kiln", "torch.compile"):
        m = copy.deepcopy(model).train()
        opt = torch.optim.SGD(m.parameters(), lr=1e-3)
        runner = {"eager": m, "kiln": kiln.compile(m, backend=BACKEND),
                  "torch.compile": torch.compile(m, backend=BACKEND)}[name]
        variants[name] = lambda r=runner, o=opt: _train_step(r, o, idx, targets)
    t = measure(variants, device=device, rounds=rounds, number=3)
    return {k: v * 1000 for k, v in t.items()}
