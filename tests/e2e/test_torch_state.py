"""kiln and torch.compile in one process, one after the other and interleaved, in any order:
neither leaves torch's global state (mode stacks, dispatch keys, fake-mode flags, grad mode,
autocast, saved-tensors hooks) different from what it found, also when a trace fails inside an
op or stops in a generator."""

from __future__ import annotations

import gc
import math

import pytest
import torch
import torch.utils._python_dispatch as python_dispatch
from torch import nn

import kiln


def torch_state() -> dict:
    """Every piece of torch's global state that a compiler may touch while tracing."""
    c = torch._C
    keys = list(c._TorchDispatchModeKey.__members__.values())
    return {
        "dispatch_stack": c._len_torch_dispatch_stack(),
        "function_stack": c._len_torch_function_stack(),
        "infra_modes": tuple(c._get_dispatch_mode(k) for k in keys),
        "include": str(c._dispatch_tls_local_include_set()),
        "exclude": str(c._dispatch_tls_local_exclude_set()),
        "meta_in_tls": c._meta_in_tls_dispatch_include(),
        "in_dispatch_mode": python_dispatch._is_in_torch_dispatch_mode,
        "in_non_infra_mode": python_dispatch._is_in_non_infra_torch_dispatch_mode,
        "torch_function": c._is_torch_function_enabled(),
        "grad": torch.is_grad_enabled(),
        "inference": torch.is_inference_mode_enabled(),
        "autocast_cpu": torch.is_autocast_enabled("cpu"),
        "autocast_dtype": torch.get_autocast_dtype("cpu"),
        "saved_tensors_hooks": c._autograd._top_saved_tensors_default_hooks(True),
        "default_dtype": torch.get_default_dtype(),
    }


class Attention(nn.Module):
    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
        q, k, v = (z.view(b, s, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(s, s, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))


def _train_step(model, compiled, x) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    loss = compiled(x).square().mean()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
    return loss.detach(), grads


def _compilers(model):
    return {
        "kiln": kiln.compile(model, backend="eager"),
        "torch": torch.compile(model, backend="eager"),
        "torch-aot": torch.compile(model, backend="aot_eager"),
    }


@pytest.mark.parametrize("order", [("kiln", "torch", "torch-aot"), ("torch", "kiln", "torch-aot"),
                                   ("torch-aot", "torch", "kiln")])
def test_kiln_and_torch_compile_interleaved_keep_torch_state(order):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Attention()
    reference = Attention()
    reference.load_state_dict(model.state_dict())
    compilers = _compilers(model)
    before = torch_state()
    for step in range(4):
        x = torch.randn(2, 5, 16)
        for name in order:
            ref_loss, ref_grads = _train_step(reference, reference, x.clone())
            # the reference takes its step first: undo it so both start from equal weights
            with torch.no_grad():
                for p, g in zip(reference.parameters(), ref_grads, strict=True):
                    p += 0.1 * g
            loss, grads = _train_step(model, compilers[name], x)
            _train_step(reference, reference, x.clone())
            torch.testing.assert_close(loss, ref_loss)
            for g, r in zip(grads, ref_grads, strict=True):
                torch.testing.assert_close(g, r)
            assert torch_state() == before, (step, name)
            with torch.no_grad():
                torch.testing.assert_close(compilers[name](x), reference(x))
            assert torch_state() == before, (step, name)
    gc.collect()
    assert torch_state() == before
    torch._dynamo.reset()


def _mismatched(x, w):
    y = x.relu()
    return y @ w  # raises inside the traced op when the shapes do not fit


def _stops_in_generator(x):
    def gen():
        yield x + 1
        yield x * 2
        yield x.sum().item()  # never reached
    it = gen()
    first = next(it)
    return first * 3


def _data_dependent_branch(x):
    y = x * 2
    if y.sum() > 0:
        return y.sin()
    return y.cos()


def _autocast_inside(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
    return y.float().relu()


def test_failing_and_stopped_traces_keep_torch_state():
    before = torch_state()
    x, w, bad = torch.randn(3, 4), torch.randn(4, 5), torch.randn(3, 5)
    with pytest.raises(RuntimeError):
        kiln.compile(_mismatched, backend="eager")(x, bad)
    assert torch_state() == before
    for fn, args in ((_stops_in_generator, (x,)), (_data_dependent_branch, (x,)),
                     (_autocast_inside, (x, w))):
        compiled = kiln.compile(fn, backend="eager")
        torch.testing.assert_close(compiled(*args), fn(*args))
        assert torch_state() == before, fn.__name__
        torch.testing.assert_close(compiled(*args), fn(*args))
        assert torch_state() == before, fn.__name__
    gc.collect()
    assert torch_state() == before
    # torch.compile still traces on fakes correctly afterwards
    torch._dynamo.reset()
    model = Attention()
    torch.testing.assert_close(torch.compile(model, backend="aot_eager")(torch.randn(2, 5, 16)).shape,
                               torch.Size([2, 5, 16]))
    assert torch_state() == before
    torch._dynamo.reset()


def test_kiln_inside_torch_fake_mode_matches_eager():
    """kiln called while torch's own fake mode is active (as inside a torch.compile backend's
    compiler): its fake mode enters over torch's and gives it back; the answer is what eager
    gives under that mode, and torch's mode keeps working."""
    from torch._subclasses.fake_tensor import FakeTensorMode as TorchFakeTensorMode

    def fn(x, w):
        return (x @ w).relu() + 1

    x, w = torch.randn(3, 4), torch.randn(4, 5)
    compiled = kiln.compile(fn, backend="eager")
    before = torch_state()
    torch_mode = TorchFakeTensorMode(allow_non_fake_inputs=True)
    with torch_mode:
        inside = torch_state()
        for _ in range(3):
            expected, got = fn(x, w), compiled(x, w)
            assert type(got) is type(expected) and got.shape == expected.shape and got.dtype == expected.dtype
            assert torch_state() == inside
            assert torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is torch_mode
    gc.collect()
    assert torch_state() == before
    torch.testing.assert_close(compiled(x, w), fn(x, w))


def test_kept_errors_hold_no_frames_and_leak_no_torch_guards():
    # Printing a tensor runs torch's _str with a _DisableFuncTorch guard in a local. A kept
    # Unsupported (a graph break, here at the print of a list) with its traceback held every
    # caller's frame alive: the guard stayed in force (functorch's keys excluded for the rest
    # of the process) and the tensors in those frames too. (The break that first showed it
    # came from a namedtuple's __new__ compiled under the guard; such a __new__ is never a
    # root now.)
    def fn(x):
        y = x * 2
        print("step", y, y.tolist())
        return y + 1

    before = torch_state()
    compiled = kiln.compile(fn, backend="eager")
    x = torch.arange(2.0)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), fn(x))
        assert torch_state() == before  # no gc.collect(): freed when the call returns
    errors = [e for e in kiln.session().stats.breaks if isinstance(e, BaseException)]
    assert errors and all(e.__traceback__ is None and e.__context__ is None for e in errors)


def test_calls_that_change_torchs_process_wide_state_run_eagerly_each_call():
    # recorded as graph ops they ran once, at trace time: set_default_dtype was lost (a
    # float32 result where eager gives float64) and an OpInfo-style seeded dropout drew other
    # numbers than eager's
    from torch.testing._utils import wrapper_set_seed

    def dtype_switch(x):
        torch.set_default_dtype(torch.float64)
        y = torch.ones(2) + x
        torch.set_default_dtype(torch.float32)
        return y

    def seeded(x):
        return wrapper_set_seed(nn.functional.dropout, x, 0.5) * 2

    x = torch.randn(2)
    for fn in (dtype_switch, seeded):
        kiln.reset()
        compiled = kiln.compile(fn)
        for _ in range(2):
            got, expected = compiled(x), fn(x)
            assert got.dtype == expected.dtype
            torch.testing.assert_close(got, expected)
            assert torch.get_default_dtype() == torch.float32
            torch.rand(3)  # moves the generator between calls
