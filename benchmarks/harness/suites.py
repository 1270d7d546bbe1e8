"""The suites: named lists of workloads (a callable and its inputs, built on a device).

- ``overhead``: per-call cost of a cache hit (tiny functions, where the frontend dominates);
- ``capture``: graphs, graph breaks and compile time on model code, some of it with graph
  breaks (``.item()``, a data-dependent branch, a loop over ``tolist()``);
- ``kernels``: softmax, LayerNorm, GELU and reductions on mid-sized tensors;
- ``models``: an MLP, a convnet, a transformer block, the demo's GPT, and models from
  ``transformers`` built from small random configurations when that package is installed;
- ``recompiles``: sequences of calls whose inputs change (a float argument, an ``.item()``
  value, a module attribute, the sequence length), counting the graphs each compiler makes;
- ``scaling``: cold compile time and peak memory of a transformer block stack (8 to 512
  layers) and an unrolled loop (1k, 10k iterations), and a fresh process's first compile,
  each in its own interpreter (``scaling.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .scaling import scaling_cases

__all__ = ["SUITES", "CallSequence", "Workload"]


@dataclass(frozen=True)
class Workload:
    """One thing to time: ``make(device) -> (callable, args)``."""

    suite: str
    name: str
    make: Callable[[str], tuple[Callable[..., Any], tuple[Any, ...]]]


@dataclass(frozen=True)
class CallSequence:
    """Calls of one callable with changing inputs: ``make(device) -> (callable, calls)``, each
    call ``(args, before)`` where ``before`` (or None) runs first (e.g. sets an attribute)."""

    suite: str
    name: str
    make: Callable[[str], tuple[Callable[..., Any], list[tuple[tuple[Any, ...], Callable[[], None] | None]]]]


def _randn(device: str, *shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(*shape, generator=g).to(device)


def _module(build: Callable[[], nn.Module], *shape: int) -> Callable[[str], tuple[Any, tuple]]:
    def make(device: str) -> tuple[Any, tuple]:
        torch.manual_seed(0)
        return build().to(device).eval(), (_randn(device, *shape),)

    return make


def _fn(fn: Callable[..., Any], *shapes: tuple[int, ...]) -> Callable[[str], tuple[Any, tuple]]:
    def make(device: str) -> tuple[Any, tuple]:
        return fn, tuple(_randn(device, *s) for s in shapes)

    return make


def _add_one(x):
    return x + 1


def _three_ops(x, y):
    return torch.relu(x * y + 1)


def _softmax(x):
    return torch.softmax(x, dim=-1)


def _layer_norm(x):
    return F.layer_norm(x, x.shape[-1:])


def _gelu(x):
    return F.gelu(x)


def _reductions(x):
    return x.sum(dim=-1) + x.amax(dim=-1) - x.mean(dim=-1)


class _TwoLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(256, 256), nn.Linear(256, 256)


class _LogsScale(_TwoLinear):
    """Reads a statistic back mid-forward (``.item()``, as logging code does): a graph break."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.a(x))
        scale = h.abs().mean().item()
        return self.b(h) / (1.0 + abs(scale))


class _Gated(_TwoLinear):
    """A data-dependent branch (early exit when activations are small)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x))
        if h.mean() > 0.01:
            h = h + self.b(h)
        return h.softmax(-1)


def _grouped_matmul(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    # transformers' grouped-mm fallback: host-side group boundaries, one matmul per group
    out = x.new_zeros(x.shape[0], w.shape[2])
    start = 0
    for i, end in enumerate(offs.tolist()):
        out[start:end] = x[start:end] @ w[i]
        start = end
    return out


def _moe_step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x)
    offs = torch.tensor([16, 40, 64], device=x.device)
    return _grouped_matmul(h, w, offs).relu()


def _mlp() -> nn.Module:
    return nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(256, 256), nn.GELU())])


def _convnet() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(32, 10))


def _block() -> nn.Module:
    from kiln.demo._model import Block, GPTConfig

    return Block(GPTConfig(width=256, heads=8))


def _gpt(device: str) -> tuple[Any, tuple]:
    from kiln.demo import GPT, GPTConfig

    torch.manual_seed(0)
    cfg = GPTConfig()
    idx = torch.randint(0, cfg.vocab, (8, cfg.block), generator=torch.Generator().manual_seed(0))
    return GPT(cfg).to(device).eval(), (idx.to(device),)


def _transformers_models() -> list[Workload]:
    try:
        import transformers
    except ImportError:
        return []

    def model(build: Callable[[], Any]) -> Callable[[str], tuple[Any, tuple]]:
        def make(device: str) -> tuple[Any, tuple]:
            torch.manual_seed(0)
            m = build().to(device).eval()
            ids = torch.randint(0, 512, (4, 32), generator=torch.Generator().manual_seed(0)).to(device)
            return (lambda i: m(input_ids=i).last_hidden_state), (ids,)

        return make

    def bert() -> Any:
        return transformers.BertModel(transformers.BertConfig(
            vocab_size=512, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=256))

    def gpt2() -> Any:
        return transformers.GPT2Model(transformers.GPT2Config(
            vocab_size=512, n_embd=128, n_layer=2, n_head=4, n_positions=64))

    def llama() -> Any:
        return transformers.LlamaModel(transformers.LlamaConfig(
            vocab_size=512, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=256, max_position_embeddings=64))

    return [Workload("models", "hf_bert_small", model(bert)),
            Workload("models", "hf_gpt2_small", model(gpt2)),
            Workload("models", "hf_llama_small", model(llama))]


def _scale_and_shift(x: torch.Tensor, s: float) -> torch.Tensor:
    return x * s + 1.0 / (1.0 + abs(s))


def _normalize_by_item(x: torch.Tensor) -> torch.Tensor:
    return x / (1e-6 + x.abs().max().item())


class _Temperature(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(32, 32)
        self.temperature = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.proj(x) / self.temperature, dim=-1)


def _self_attention(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x @ x.transpose(-1, -2) / 4.0, dim=-1) @ x


def _float_values(device: str) -> tuple[Any, list]:
    x = _randn(device, 64, 32)
    return _scale_and_shift, [((x, s), None) for s in (0.5, 0.75, 1.25, 2.0, -1.5, 3.0)]


def _item_values(device: str) -> tuple[Any, list]:
    return _normalize_by_item, [((_randn(device, 64, 32) * (i + 1),), None) for i in range(6)]


def _temperatures(device: str) -> tuple[Any, list]:
    torch.manual_seed(0)
    model = _Temperature().to(device).eval()
    x = _randn(device, 8, 32)

    def setter(t: float) -> Callable[[], None]:
        return lambda: setattr(model, "temperature", t)

    return model, [((x,), setter(t)) for t in (1.0, 0.7, 0.5, 0.3, 2.0, 1.5)]


def _sequence_lengths(device: str) -> tuple[Any, list]:
    return _self_attention, [((_randn(device, 2, n, 16),), None) for n in (16, 17, 18, 19, 20, 24)]


SUITES: dict[str, list[Any]] = {
    "overhead": [Workload("overhead", "x+1 (1 element)", _fn(_add_one, (1,))),
                 Workload("overhead", "3 ops (8 elements)", _fn(_three_ops, (8,), (8,)))],
    "capture": [Workload("capture", "mlp", _module(_mlp, 32, 256)),
                Workload("capture", "transformer block", _module(_block, 4, 64, 256)),
                Workload("capture", "gpt", _gpt),
                # code with graph breaks (for both compilers)
                Workload("capture", "item() mid-forward", _module(_LogsScale, 32, 256)),
                Workload("capture", "data-dependent branch", _module(_Gated, 32, 256)),
                Workload("capture", "grouped matmul (tolist)", _fn(_moe_step, (64, 32), (3, 32, 32)))],
    "kernels": [Workload("kernels", "softmax", _fn(_softmax, (512, 1024))),
                Workload("kernels", "layer_norm", _fn(_layer_norm, (512, 1024))),
                Workload("kernels", "gelu", _fn(_gelu, (512, 1024))),
                Workload("kernels", "reductions", _fn(_reductions, (512, 1024)))],
    "models": [Workload("models", "mlp", _module(_mlp, 32, 256)),
               Workload("models", "convnet", _module(_convnet, 8, 3, 32, 32)),
               Workload("models", "transformer block", _module(_block, 4, 64, 256)),
               Workload("models", "gpt", _gpt),
               *_transformers_models()],
    "recompiles": [CallSequence("recompiles", "float argument (6 values)", _float_values),
                   CallSequence("recompiles", ".item() value (6 inputs)", _item_values),
                   CallSequence("recompiles", "module attribute (6 values)", _temperatures),
                   CallSequence("recompiles", "sequence length (6 lengths)", _sequence_lengths)],
    "scaling": scaling_cases(),
}
