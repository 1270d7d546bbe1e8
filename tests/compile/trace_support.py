"""A model with a graph break, a recompile, a dynamic dimension and a training step, compiled
with kiln's default backend under a trace folder (tests/compile/test_trace.py and
test_report.py read what it wrote)."""

import contextlib
import inspect

import torch

import kiln


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)

    def forward(self, x):
        y = self.fc(x).relu()
        if y.sum() > 0:  # the graph break: a branch on the data
            y = y * 2
        return y.square().mean()


def lines() -> dict[str, int]:
    """The lines of Net.forward the trace must name: its ``def`` and the graph break."""
    source, first = inspect.getsourcelines(Net.forward)
    found = {"def": first}
    for i, text in enumerate(source):
        if "# the graph break" in text:
            found["break"] = first + i
    return found


@contextlib.contextmanager
def settings(**values):
    """kiln.config with ``values`` inside the block, as it was after it."""
    before = {name: getattr(kiln.config, name) for name in values}
    for name, value in values.items():
        setattr(kiln.config, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(kiln.config, name, value)


def train(directory: str, sizes=(4, 6)) -> None:
    """Two training steps of a compiled Net (batch sizes ``sizes``: the second recompiles with
    the batch dimension dynamic) traced into ``directory``; each loss and gradient is checked
    against eager's."""
    torch.manual_seed(0)
    model = Net()
    reference = Net()
    reference.load_state_dict(model.state_dict())
    compiled = kiln.compile(model)
    with settings(trace_dir=directory, graph_cache=False, frame_cache=False, recompile_memory=False,
                  raise_internal_errors=True):
        kiln.reset()
        try:
            for n in sizes:
                x = torch.randn(n, 8)
                loss = compiled(x)
                loss.backward()
                expected = reference(x)
                expected.backward()
                torch.testing.assert_close(loss, expected)
                torch.testing.assert_close(model.fc.weight.grad, reference.fc.weight.grad)
        finally:
            kiln.reset()
