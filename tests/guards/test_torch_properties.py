"""Hypothesis on real tensors: for random traced tensors and random candidates, the native
batched check, the pure-Python check and the explanation all agree."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln.guards import GuardSet, LocalSource, TensorMatch

DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool]


@st.composite
def tensors(draw):
    shape = draw(st.lists(st.integers(0, 3), max_size=3))
    dtype = draw(st.sampled_from(DTYPES))
    t = torch.zeros(shape, dtype=dtype)
    if len(shape) >= 2 and draw(st.booleans()):
        t = t.transpose(0, 1)
    if dtype.is_floating_point and draw(st.booleans()):
        t = t.requires_grad_()
        if draw(st.booleans()):
            t = torch.nn.Parameter(t.detach())
    return t


@st.composite
def guards_for(draw, t):
    ndim = t.dim()
    free = draw(st.lists(st.integers(0, max(ndim - 1, 0)), max_size=ndim)) if ndim else []
    free_strides = draw(st.lists(st.integers(0, max(ndim - 1, 0)), max_size=ndim)) if ndim else []
    return TensorMatch.from_tensor(LocalSource("x"), t, dynamic_sizes=free,
                                   dynamic_strides=free_strides)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), traced=tensors(), candidate=tensors())
def test_native_python_and_explain_agree(data, traced, candidate):
    guard = data.draw(guards_for(traced))
    gs = GuardSet([guard])
    frame = {"x": candidate}
    native, python = gs.compile()(frame), gs.compile(native=False)(frame)
    assert native is python
    assert (gs.explain(frame) is None) is native
    assert gs.compile()({"x": traced}) is True
