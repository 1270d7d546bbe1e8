"""Models from ``transformers`` (small random configurations, no downloads): each whole
forward is one graph with fullgraph=True, returns the same ModelOutput as eager, and the
second call hits the cache. Skipped where transformers is not installed."""

import pytest
import torch
from e2e_support import CountingBackend, assert_same

import kiln

transformers = pytest.importorskip("transformers")


def _bert():
    cfg = transformers.BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=128)
    return transformers.BertModel(cfg)


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=32)
    return transformers.GPT2Model(cfg)


def _llama():
    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   intermediate_size=128, max_position_embeddings=32)
    return transformers.LlamaModel(cfg)


def _comparable(out):
    # the output as plain data: a fresh cache object is compared by its tensors
    items = {}
    for k, v in out.items():
        items[k] = v if isinstance(v, torch.Tensor) else [t for t in _tensors(v)]
    return type(out), items


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)
    elif hasattr(obj, "__dict__"):
        for v in vars(obj).values():
            yield from _tensors(v)


def _t5_encoder():
    cfg = transformers.T5Config(vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                num_heads=4)
    return transformers.T5EncoderModel(cfg)


def _mistral():
    cfg = transformers.MistralConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2,
                                     intermediate_size=128)
    return transformers.MistralModel(cfg)


def _gemma():
    cfg = transformers.GemmaConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=1,
                                   intermediate_size=128, head_dim=16)
    return transformers.GemmaModel(cfg)


def _mixtral():
    cfg = transformers.MixtralConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2,
                                     intermediate_size=128, num_local_experts=4, num_experts_per_tok=2)
    return transformers.MixtralModel(cfg)


def _gpt2_lm_head():
    cfg = transformers.GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=32)
    return transformers.GPT2LMHeadModel(cfg)


@pytest.mark.parametrize("build", [_bert, _gpt2, _llama, _t5_encoder, _mistral, _gemma, _mixtral, _gpt2_lm_head],
                         ids=["bert", "gpt2", "llama", "t5_encoder", "mistral", "gemma", "mixtral", "gpt2_lm_head"])
def test_whole_model_is_one_graph_and_matches_eager(build):
    torch.manual_seed(0)
    model = build().eval()
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    backend = CountingBackend()
    compiled = kiln.compile(model, backend=backend, fullgraph=True)
    with torch.no_grad():
        expected = model(input_ids=ids)
        for _ in range(2):
            actual = compiled(input_ids=ids)
            assert_same(_comparable(actual), _comparable(expected))
    assert len(backend.graphs) == 1
    report = kiln.explain(model)(input_ids=ids)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


@pytest.mark.parametrize("build", [
    lambda: transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)),
    _gpt2_lm_head,
], ids=["bert_mlm", "gpt2_lm_head"])
def test_training_step_matches_eager(build):
    # train mode (dropout draws from the RNG in the same order), the loss made inside
    # forward (a loss module created there, a logger warning replayed), gradients of every
    # parameter equal to eager's
    import copy

    torch.manual_seed(0)
    model = build().train()
    twin = copy.deepcopy(model)
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    backend = CountingBackend()
    compiled = kiln.compile(twin, backend=backend, fullgraph=True)
    torch.manual_seed(1)
    expected = model(input_ids=ids, labels=ids)
    expected.loss.backward()
    torch.manual_seed(1)
    actual = compiled(input_ids=ids, labels=ids)
    actual.loss.backward()
    torch.testing.assert_close(actual.loss, expected.loss)
    for (name, p), (_, q) in zip(model.named_parameters(), twin.named_parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            torch.testing.assert_close(q.grad, p.grad, msg=name)
    assert len(backend.graphs) == 1


def _t5_seq2seq():
    cfg = transformers.T5Config(vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                num_heads=4, decoder_start_token_id=0)
    return transformers.T5ForConditionalGeneration(cfg)


def _bart_seq2seq():
    cfg = transformers.BartConfig(vocab_size=256, d_model=64, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=4, decoder_attention_heads=4,
                                  encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64)
    return transformers.BartForConditionalGeneration(cfg)


@pytest.mark.parametrize("build", [_t5_seq2seq, _bart_seq2seq], ids=["t5", "bart"])
def test_encoder_decoder_with_labels_matches_eager(build):
    # both deep-copy and serialize their config in forward (get_text_config), BART's strict
    # dataclass config validates its fields through a dict keyed by type: traced whole
    torch.manual_seed(0)
    model = build().eval()
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(0))
    backend = CountingBackend()
    compiled = kiln.compile(model, backend=backend, fullgraph=True)
    with torch.no_grad():
        expected = model(input_ids=ids, labels=ids)
        actual = compiled(input_ids=ids, labels=ids)
    torch.testing.assert_close(actual.loss, expected.loss)
    torch.testing.assert_close(actual.logits, expected.logits)
    assert len(backend.graphs) == 1
