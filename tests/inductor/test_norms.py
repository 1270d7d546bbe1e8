"""Batch norm through kiln.inductor: decomposed (evaluation, training and backward) into
pointwise ops and per-channel reductions that fuse with their neighbours, never an ATen call
of the batch-norm kernels; results, running statistics and gradients as eager's."""

from __future__ import annotations

import copy

import torch
from torch import nn

import kiln


def _convnet():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())


def test_evaluation_batch_norm_fuses_with_relu(graphs):
    model = _convnet().eval()
    x = torch.randn(4, 3, 16, 16)
    with torch.no_grad():
        expected = model(x)
        got = kiln.compile(model)(x)
    torch.testing.assert_close(got, expected)
    (graph,) = graphs
    assert "batch_norm" not in graph.wrapper_code
    # (batch norm + relu) after each convolution, and the input and the two weights copied
    # channels-last for the convolutions (test_layout.py)
    assert (graph.kernels, graph.externs) == (5, 2)


def test_training_batch_norm_forward_backward_and_running_statistics(graphs):
    model = _convnet().train()
    eager = copy.deepcopy(model)
    x = torch.randn(4, 3, 16, 16)
    compiled = kiln.compile(model)
    for _ in range(2):
        compiled(x).square().mean().backward()
        eager(x).square().mean().backward()
    for (name, mine), theirs in zip(model.state_dict().items(), eager.state_dict().values(), strict=True):
        torch.testing.assert_close(mine, theirs, msg=name)
    for (name, mine), theirs in zip(model.named_parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, msg=name)
    assert all("batch_norm" not in g.wrapper_code for g in graphs)
