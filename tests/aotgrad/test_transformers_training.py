"""Training steps of transformers models through kiln.aotgrad (issue 15's acceptance): GPT2
and Llama language models and BERT with a classification head, with labels, 3 SGD steps;
the loss and every parameter's gradient equal eager's at each step."""

from __future__ import annotations

import copy

import pytest
import torch

import kiln
from kiln.aotgrad import aot_compile

T = pytest.importorskip("transformers")

SMALL = dict(vocab_size=128, num_hidden_layers=2, num_attention_heads=4, hidden_size=32, intermediate_size=64,
             max_position_embeddings=64)
IDS = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(0))

MODELS = {
    "gpt2": (lambda: T.GPT2LMHeadModel(T.GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64)),
             {"input_ids": IDS, "labels": IDS}),
    "llama": (lambda: T.LlamaForCausalLM(T.LlamaConfig(num_key_value_heads=2, **SMALL)),
              {"input_ids": IDS, "labels": IDS}),
    "bert": (lambda: T.BertForSequenceClassification(T.BertConfig(**SMALL)),
             {"input_ids": IDS, "labels": torch.tensor([0, 1])}),
}


class _Aot:
    handles_dynamic_inputs = True

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return aot_compile(gm, example_inputs, kiln.compile_context())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_steps_match_eager(name):
    build, batch = MODELS[name]
    kiln.reset()
    torch.manual_seed(0)
    model = build().train()
    reference = copy.deepcopy(model)
    backend = _Aot()
    compiled = kiln.compile(model, backend=backend)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        torch.manual_seed(step)  # dropout: the same masks
        expected = reference(**batch).loss
        expected.backward()
        torch.manual_seed(step)
        got = compiled(**batch).loss
        got.backward()
        torch.testing.assert_close(got, expected)
        for (n, p_ref), p in zip(reference.named_parameters(), model.parameters(), strict=True):
            assert (p.grad is None) == (p_ref.grad is None), n
            if p_ref.grad is not None:
                torch.testing.assert_close(p.grad, p_ref.grad, msg=n)
        opt_ref.step()
        opt.step()
        opt_ref.zero_grad()
        opt.zero_grad()
    assert backend.graphs >= 1
