"""kiln's hook and torch.compile's (Dynamo's) in one process: each chains to the other's
evaluation function, neither crashes, both give the right answers. Needs torch (3.11 only in
CI); kiln.frameeval itself never imports torch."""

import torch

import kiln.frameeval as fe


def f(x):
    return x * 2 + 1


def f_replacement(x):
    return x * 3


def g(x):
    return torch.relu(f(x)) - 1


def test_torch_compile_inside_and_around_kiln_callbacks(recorder):
    compiled = torch.compile(g, backend="eager")
    x = torch.linspace(-2, 2, 5)
    expected = g(x)
    fe.add_cache_entry(f.__code__, lambda L: isinstance(L["x"], int), f_replacement.__code__)
    with fe.callback_set(recorder):
        assert torch.equal(compiled(x), expected)
        assert f(2) == 6  # kiln's cache hit (ints only)
    # kiln's callback saw torch's own Python frames (Dynamo's wrapper) while both were active
    assert any("torch" in code.co_filename for code in recorder.codes())
    assert not fe.is_installed()
    assert torch.equal(compiled(x), expected)
    with fe.callback_set(fe.RUN_ONLY):
        assert torch.equal(compiled(x), expected)
        assert f(2) == 6
    assert not fe.is_installed()
    torch._dynamo.reset()
