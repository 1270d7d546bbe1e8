"""More architectures from ``transformers`` (small random configurations): each whole
forward is one graph with fullgraph=True and equals eager. A broad net for the library
patterns kiln.symexec traces (configs, masks, output dataclasses, registries, caches)."""

import pytest
import torch
from e2e_support import CountingBackend

import kiln

T = pytest.importorskip("transformers")

IDS = torch.randint(4, 256, (2, 16), generator=torch.Generator().manual_seed(0))
PIXELS = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
ENC_DEC = dict(vocab_size=256, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128)

ZOO = {
    "distilbert": (lambda: T.DistilBertModel(T.DistilBertConfig(
        vocab_size=256, dim=64, n_layers=2, n_heads=4, hidden_dim=128)), {"input_ids": IDS}),
    "roberta": (lambda: T.RobertaModel(T.RobertaConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)),
        {"input_ids": IDS}),
    "deberta_v2": (lambda: T.DebertaV2Model(T.DebertaV2Config(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)),
        {"input_ids": IDS}),
    "qwen2": (lambda: T.Qwen2Model(T.Qwen2Config(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128)), {"input_ids": IDS}),
    "opt": (lambda: T.OPTModel(T.OPTConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
        word_embed_proj_dim=64)), {"input_ids": IDS}),
    "gpt_neo": (lambda: T.GPTNeoModel(T.GPTNeoConfig(
        vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]])),
        {"input_ids": IDS}),
    "phi": (lambda: T.PhiModel(T.PhiConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)),
        {"input_ids": IDS}),
    "falcon": (lambda: T.FalconModel(T.FalconConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4)), {"input_ids": IDS}),
    "bloom": (lambda: T.BloomModel(T.BloomConfig(vocab_size=256, hidden_size=64, n_layer=2, n_head=4)),
              {"input_ids": IDS}),
    "vit": (lambda: T.ViTModel(T.ViTConfig(
        image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128)), {"pixel_values": PIXELS}),
    "swin": (lambda: T.SwinModel(T.SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4)),
        {"pixel_values": PIXELS}),
    "convnext": (lambda: T.ConvNextModel(T.ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)),
                 {"pixel_values": PIXELS}),
    "marian_mt": (lambda: T.MarianMTModel(T.MarianConfig(
        **ENC_DEC, max_position_embeddings=64, pad_token_id=0, decoder_start_token_id=0)),
        {"input_ids": IDS, "labels": IDS}),
    "whisper": (lambda: T.WhisperForConditionalGeneration(T.WhisperConfig(
        **ENC_DEC, num_mel_bins=16, max_source_positions=16, max_target_positions=32, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, suppress_tokens=None,
        begin_suppress_tokens=None)),
        {"input_features": torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(0)),
         "labels": IDS[:, :8]}),
}


@pytest.mark.parametrize("backend_name", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("name", sorted(ZOO))
def test_architecture_is_one_graph_equal_to_eager(name, backend_name):
    build, inputs = ZOO[name]
    torch.manual_seed(0)
    model = build().eval()
    backend = CountingBackend(backend_name)
    compiled = kiln.compile(model, backend=backend, fullgraph=True)
    with torch.no_grad():
        expected = model(**inputs)
        actual = compiled(**inputs)
    key = "loss" if "loss" in expected else "last_hidden_state"
    torch.testing.assert_close(actual[key], expected[key])
    assert type(actual) is type(expected) and list(actual.keys()) == list(expected.keys())
    # BLOOM's GELU is a custom torch.autograd.Function: the graph calls its ``apply`` (its
    # backward stays the author's), whose Python ``forward`` runs as it is, inside the graph
    assert len(backend.graphs) == 1
    assert backend.refused == []  # aot_eager: every architecture through kiln.aotgrad


def _resized(inputs, batch, length):
    """The inputs of one architecture at another batch size and sequence length."""
    g = torch.Generator().manual_seed(batch * 100 + length)
    out = {}
    for key, value in inputs.items():
        if key == "input_ids":
            out[key] = torch.randint(4, 256, (batch, length), generator=g)
        elif key == "labels":
            out[key] = torch.randint(4, 256, (batch, max(length // 2, 2)), generator=g)
        else:  # pixels and audio features keep their own sizes: only the batch changes
            out[key] = torch.randn(batch, *value.shape[1:], generator=g)
    return out


@pytest.mark.parametrize("backend_name", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("name", sorted(ZOO))
def test_architecture_with_dynamic_shapes_is_one_graph_over_batches_and_lengths(name, backend_name):
    build, inputs = ZOO[name]
    torch.manual_seed(0)
    model = build().eval()
    backend = CountingBackend(backend_name)
    compiled = kiln.compile(model, backend=backend, dynamic=True)
    shapes = ((2, 16), (3, 11), (4, 20))
    with torch.no_grad():
        for batch, length in shapes:
            args = _resized(inputs, batch, length)
            expected, actual = model(**args), compiled(**args)
            key = "loss" if "loss" in expected else "last_hidden_state"
            torch.testing.assert_close(actual[key], expected[key])
    # (transformers 5.17's DeBERTa-v2 calls torch.jit.script helpers: traced from their
    # Python source, or TorchScript would read every size as an int)
    assert len(backend.graphs) == 1
    # aot_eager: every architecture through kiln.aotgrad
    assert backend.refused == []
