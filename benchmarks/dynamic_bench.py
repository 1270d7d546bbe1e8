"""Dynamic shapes: graphs per sweep and the cost of symbolic capture, kiln vs torch.compile.

For each model and each ``dynamic`` setting (True, None), both compilers (each with a counting
eager backend, reset first) run the same calls in one process; every output is compared with
eager. Sweeps:

* TinyGPT (embedding, causal attention built with ``ones(t, t).tril()``, GELU MLP; the issue's
  acceptance model): 26 calls, batch 1..8 and length 5..64 in random order;
* GPT2Model, LlamaModel, BertModel (transformers, 2 layers, width 32) with a padding mask:
  7 calls, batch 1..5, length 8..30.

Then the capture cost: the first call of a fresh compile (after ``kiln.reset``), static
(``dynamic=False``) against symbolic (``dynamic=True``), medians of ``--repeat``; and the
per-call cost of a cache hit with 3 symbolic dims against a static entry (20k-call loops,
median of 15 rounds), for both compilers.

Run: ``python benchmarks/dynamic_bench.py`` (``--quick``: 1 repeat, no transformers).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from torch import nn

import kiln

LAYERS = 2  # transformers models' depth (--layers)


class TinyGPT(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(128, d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.heads = heads

    def forward(self, idx):
        b, t = idx.shape
        x = self.emb(idx) + self.pos(torch.arange(t, device=idx.device))
        q, k, v = self.qkv(self.ln1(x)).split(x.size(-1), dim=-1)
        hd = x.size(-1) // self.heads
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / hd ** 0.5
        mask = torch.ones(t, t, device=idx.device).tril()
        att = att.masked_fill(mask == 0, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, -1)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


def _tiny():
    rng = random.Random(0)
    shapes = [(rng.randint(1, 8), rng.randint(5, 64)) for _ in range(24)] + [(1, 7), (1, 30)]
    torch.manual_seed(0)
    return TinyGPT().eval(), [((torch.randint(0, 50, (b, t)),), {}) for b, t in shapes]


def _transformers(name):
    import transformers

    torch.manual_seed(0)
    small = dict(vocab_size=128, num_hidden_layers=LAYERS, num_attention_heads=4, hidden_size=32,
                 intermediate_size=64, max_position_embeddings=64)
    model = {
        "GPT2Model": lambda: transformers.GPT2Model(transformers.GPT2Config(
            vocab_size=128, n_embd=32, n_layer=LAYERS, n_head=4, n_positions=64)),
        "LlamaModel": lambda: transformers.LlamaModel(transformers.LlamaConfig(num_key_value_heads=2, **small)),
        "BertModel": lambda: transformers.BertModel(transformers.BertConfig(**small)),
    }[name]().eval()
    calls = []
    for b, t in ((2, 8), (2, 13), (3, 21), (4, 9), (1, 17), (1, 11), (5, 25)):
        mask = torch.ones(b, t, dtype=torch.long)
        mask[0, -2:] = 0
        calls.append(((), {"input_ids": torch.randint(0, 128, (b, t)), "attention_mask": mask}))
    return model, calls


def _first(out):
    if isinstance(out, torch.Tensor):
        return out
    return out[0] if isinstance(out, tuple) else out.last_hidden_state


def sweep(model, calls, compiler, dynamic):
    """(graphs, seconds for the whole sweep, every output equal to eager)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    kiln.reset()
    torch._dynamo.reset()
    compiled = compiler(model, backend=backend, dynamic=dynamic)
    same = True
    start = time.perf_counter()
    with torch.no_grad():
        outs = [compiled(*a, **k) for a, k in calls]
    seconds = time.perf_counter() - start
    with torch.no_grad():
        for out, (a, k) in zip(outs, calls, strict=True):
            same &= torch.allclose(_first(out), _first(model(*a, **k)), atol=1e-5, rtol=1e-4)
    return len(graphs), seconds, same


def capture_cost(model, call, dynamic, repeat):
    times = []
    for _ in range(repeat):
        kiln.reset()
        compiled = kiln.compile(model, backend="eager", dynamic=dynamic)
        start = time.perf_counter()
        with torch.no_grad():
            compiled(*call[0], **call[1])
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _add_one(x):
    return x + 1


def hit_cost(compiler, dynamic, rounds, number=20000):
    """Median microseconds per call of a cache hit: ``x + 1`` on a (2, 3, 4) tensor."""
    kiln.reset()
    torch._dynamo.reset()
    compiled = compiler(_add_one, backend="eager", dynamic=dynamic)
    x = torch.randn(2, 3, 4)
    compiled(x)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            compiled(x)
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layers", type=int, default=2, help="depth of the transformers models")
    args = parser.parse_args()
    global LAYERS
    LAYERS = args.layers
    repeat = 1 if args.quick else args.repeat
    models = [("TinyGPT", _tiny)]
    if not args.quick:
        models += [(n, lambda n=n: _transformers(n)) for n in ("GPT2Model", "LlamaModel", "BertModel")]
    print("| model | dynamic | graphs kiln | graphs torch.compile | sweep s kiln | sweep s torch | outputs equal |")
    print("|---|---|---|---|---|---|---|")
    costs = []
    for name, make in models:
        model, calls = make()
        for dynamic in (True, None):
            k = sweep(model, calls, kiln.compile, dynamic)
            t = sweep(model, calls, torch.compile, dynamic)
            print(f"| {name} | {dynamic} | {k[0]} | {t[0]} | {k[1]:.2f} | {t[1]:.2f} | {k[2] and t[2]} |")
        static = capture_cost(model, calls[0], False, repeat)
        symbolic = capture_cost(model, calls[0], True, repeat)
        costs.append((name, static, symbolic))
    print("\n| model | capture static s | capture symbolic s | symbolic/static |")
    print("|---|---|---|---|")
    for name, static, symbolic in costs:
        print(f"| {name} | {static:.3f} | {symbolic:.3f} | {symbolic / static:.2f} |")
    rounds = 3 if args.quick else 15
    print("\n| cache hit, x + 1 on (2, 3, 4) | static µs | 3 symbolic dims µs | difference µs |")
    print("|---|---|---|---|")
    for name, compiler in (("kiln", kiln.compile), ("torch.compile", torch.compile)):
        static, symbolic = hit_cost(compiler, False, rounds), hit_cost(compiler, True, rounds)
        print(f"| {name} | {static:.2f} | {symbolic:.2f} | {symbolic - static:+.2f} |")


if __name__ == "__main__":
    main()
