"""Graph breaks forced at every breakable call and branch of the corpus (tests/e2e/cases.py):
the frame is traced up to the instruction, and its replacement (graph, the instruction run
for real, the resume function run as plain bytecode) must give eager's answers and leave the
inputs as eager leaves them. This checks the resume machinery (stack and locals passed,
liveness, free variables, side effects before the break) on real model code, where breaks
otherwise happen only at a few places."""

import inspect
import types

import pytest
import torch
from cases import CASES
from e2e_support import assert_same, clone_args

from kiln.symexec import SymexecCaches
from kiln.symexec._breaks import _CALLS, _JUMPS
from kiln.symexec._capture import _trace
from kiln.symexec._unsupported import Unsupported
from kiln.symexec.bytecode import decode, in_loop, resumable


def _function_and_arguments(fn, args, kwargs):
    """The Python function a call ``fn(*args, **kwargs)`` starts, its argument mapping, and
    the positional/keyword split to call a replacement with."""
    if isinstance(fn, torch.nn.Module):
        fn = types.MethodType(type(fn).forward, fn)
    if isinstance(fn, types.MethodType):
        fn, args = fn.__func__, (fn.__self__, *args)
    bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)  # the frame's own
    bound.apply_defaults()
    L = dict(bound.arguments)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        L[name] = cell.cell_contents
    return fn, L, args, kwargs


def _break_points(code):
    """Indices of the instructions a break may be forced at (the static part of break_point:
    the rest is decided while tracing, where such a break may still be refused)."""
    if resumable(code) is not None:
        return []
    bc = decode(code)
    return [k for k, i in enumerate(bc.instructions()) if i.name in _CALLS | _JUMPS and not in_loop(bc, k)]


def _replacement_function(fn, cap):
    code = cap.replacement(cap.graph_module.forward)
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


def _run(fn, args, kwargs, compile_resumes):
    """Call ``fn``; with ``compile_resumes`` under kiln's frame callback, so that the resume
    function (and whatever else starts) is captured and compiled as kiln would."""
    if not compile_resumes:
        return fn(*args, **kwargs)
    import kiln.frameeval as fe
    from kiln._policy import FrameCompiler

    with fe.callback_set(FrameCompiler(lambda gm, example_inputs: gm.forward)):
        return fn(*args, **kwargs)


@pytest.mark.parametrize("compile_resumes", [False, True], ids=["resume_as_bytecode", "resume_compiled"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_forced_break_at_every_breakable_instruction(name, compile_resumes):
    make, _, _ = CASES[name]
    fn, args, kwargs = make()
    pristine = clone_args((args, kwargs))
    func, _, _, _ = _function_and_arguments(fn, args, kwargs)
    points = _break_points(func.__code__)
    tried = 0
    caches = SymexecCaches()  # shared by the traces below, with fresh resume functions for each
    for index in points:
        caches.resume_functions.clear()
        eager_fn, eager_args, eager_kwargs = make()
        eager_args, eager_kwargs = clone_args(pristine)
        expected = eager_fn(*eager_args, **eager_kwargs)
        run_fn, _, _ = make()
        run_args, run_kwargs = clone_args(pristine)
        func, L, call_args, call_kwargs = _function_and_arguments(run_fn, run_args, run_kwargs)
        try:
            cap = _trace(func.__code__, L, func.__globals__, (index, 1), Unsupported("forced"), caches=caches)
        except Unsupported:
            continue  # refused while tracing (a value the resume needs, a try block, ...)
        except Exception as e:  # the trace never reached the instruction: it ended before
            if type(e).__name__ != "StopTracing":
                raise
            continue
        if cap.graph_break is None:
            continue  # the code returned before reaching the instruction (another branch)
        actual = _run(_replacement_function(func, cap), call_args, call_kwargs, compile_resumes)
        assert_same(actual, expected, f"break at {index}")
        assert_same((run_args, run_kwargs), (eager_args, eager_kwargs), f"inputs, break at {index}")
        tried += 1
    if points:
        assert tried or name in _NO_BREAK_REACHED, (name, points)


# Cases whose breakable instructions are all refused or never reached (checked by hand):
# calls of functions made while tracing (comprehensions on 3.11, nested defs), which the
# replacement cannot rebuild; a branch inside an except clause the call never enters.
_NO_BREAK_REACHED = frozenset({"dict_comprehension_and_items", "nested_function_definition",
                               "try_without_exception"})


_MODELS = {
    "bert": lambda t: t.BertModel(t.BertConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)),
    "llama": lambda t: t.LlamaModel(t.LlamaConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128)),
    "gpt2": lambda t: t.GPT2Model(t.GPT2Config(
        vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=32, bos_token_id=0, eos_token_id=0)),
}


@pytest.mark.parametrize("name", sorted(_MODELS))
def test_forced_breaks_in_a_transformers_forward(name):
    # The model's own forward (under its decorators): a break at each of its calls and
    # branches that tracing reaches, with everything after it run as plain bytecode.
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = _MODELS[name](transformers).eval()
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    forward = inspect.unwrap(type(model).forward)
    bound = inspect.signature(forward, follow_wrapped=False).bind(model, input_ids=ids)
    bound.apply_defaults()
    with torch.no_grad():
        expected = forward(model, input_ids=ids).last_hidden_state
        broken = 0
        caches = SymexecCaches()
        for index in _break_points(forward.__code__):
            caches.resume_functions.clear()
            try:
                cap = _trace(forward.__code__, dict(bound.arguments), forward.__globals__, (index, 1),
                             Unsupported("forced"), caches=caches)
            except Exception as e:
                if type(e).__name__ != "StopTracing":
                    raise  # refusing is not expected here: every reached point breaks
                continue
            if cap.graph_break is None:
                continue
            actual = _replacement_function(forward, cap)(model, input_ids=ids).last_hidden_state
            torch.testing.assert_close(actual, expected, msg=lambda m, i=index: f"break at {i}: {m}")
            broken += 1
    assert broken >= 5
