"""kiln.aotgrad benchmark: the runtime wrapper's per-call cost, and what a training step saves
for backward, against eager and torch.compile(backend="aot_eager") in the same process.

- Per call: forward + backward of ``x + 1`` on a 1-element tensor that requires grad (the
  wrapper's own cost: an autograd.Function around two tiny ATen graphs), median
  microseconds after warm-up, interleaved rounds.
- Compile: the first training step (forward, loss, backward) of transformers' GPT2 language
  model (2 layers, width 64) and of a 12-layer MLP, against eager's step: what the first
  call of each compiler costs, every kiln figure after a ``kiln.reset()`` and every torch
  one after ``torch._dynamo.reset()`` (imports paid before).
- Saved for backward: one training step of a 12-layer MLP with GELU (width 256, batch 64):
  the bytes of the distinct storages autograd keeps for backward other than the parameters'
  and the input's (counted with ``torch.autograd.graph.saved_tensors_hooks``), with kiln's
  min-cut and save-all partitions, and the step's time; on CUDA also the step's peak memory
  (``torch.cuda.max_memory_allocated`` above what was allocated before it: parameters'
  gradients, activations, temporaries).

Run: ``python benchmarks/aotgrad_bench.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

import kiln


def _add_one(x):
    return x + 1


def _per_call(fn, rounds: int, number: int) -> float:
    x = torch.ones(1, requires_grad=True)
    for _ in range(20):
        fn(x).backward()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn(x).backward()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


class MLP(nn.Module):
    def __init__(self, layers: int = 12, width: int = 256) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = nn.functional.gelu(layer(x))
        return x


def _saved_bytes(step, exclude) -> int:
    """Bytes of the distinct storages autograd saves for backward during ``step()``, less
    those of ``exclude`` (the parameters and the input: alive anyway)."""
    seen: dict[int, int] = {}
    kept = {t.untyped_storage().data_ptr() for t in exclude}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in kept:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(seen.values())


def _first_step(make, batch, compiler) -> float:
    model = make()
    compiled = compiler(model)
    start = time.perf_counter()
    compiled(**batch)["loss"].backward() if isinstance(batch, dict) else compiled(batch).square().mean().backward()
    return time.perf_counter() - start


def _compile_times(quick: bool) -> None:
    try:
        import transformers
    except ImportError:
        transformers = None
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    cases = [("12-layer MLP", MLP, torch.randn(64, 256))]
    if transformers is not None:
        cases.append(("GPT2 LM, 2 layers", lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64)), {"input_ids": ids, "labels": ids}))

    def kiln_compile(m):
        kiln.reset()
        return kiln.compile(m, backend="aot_eager")

    def torch_compile(m):
        torch._dynamo.reset()
        return torch.compile(m, backend="aot_eager")

    print("\n| first training step (compile included) | eager s | kiln aot_eager s | torch.compile aot_eager s | kiln/torch |")
    print("|---|---|---|---|---|")
    for name, make, batch in cases:
        _first_step(make, batch, kiln_compile)  # imports and first-use costs of both
        _first_step(make, batch, torch_compile)
        rounds = 1 if quick else 3
        eager = statistics.median(_first_step(make, batch, lambda m: m) for _ in range(rounds))
        ours = statistics.median(_first_step(make, batch, kiln_compile) for _ in range(rounds))
        theirs = statistics.median(_first_step(make, batch, torch_compile) for _ in range(rounds))
        print(f"| {name} | {eager:.3f} | {ours:.3f} | {theirs:.3f} | {ours / theirs:.2f} |")


def _peak_bytes(step, device: str) -> int:
    """Peak bytes the caching allocator handed out during ``step()`` above what was allocated
    before it (CUDA only: the CPU allocator keeps no such count)."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    step()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


def _saved_and_peak(device: str, quick: bool) -> None:
    torch.manual_seed(0)
    model = MLP().to(device)
    x = torch.randn(64, 256, device=device)
    kiln.reset()
    torch._dynamo.reset()
    models = {"eager": model,
              "kiln aot_eager (min cut)": kiln.compile(model, backend="aot_eager"),
              "kiln aot_eager (save_all)": kiln.compile(model, backend="aot_eager",
                                                       options={"aotgrad.partitioner": "save_all"}),
              "torch.compile aot_eager": torch.compile(model, backend="aot_eager")}
    cuda = device == "cuda"
    print(f"\n| 12-layer MLP + GELU, one training step on {device} | activations saved for backward MB "
          f"| {'peak memory of the step MB | ' if cuda else ''}step ms |")
    print("|---|---|---|" + ("---|" if cuda else ""))
    for name, m in models.items():
        def step(m=m):
            m(x).square().mean().backward()
            model.zero_grad(set_to_none=True)

        kiln.reset()
        step()  # compile
        saved = _saved_bytes(step, [x, *model.parameters()])
        peak = f"{_peak_bytes(step, device) / 2**20:.2f} | " if cuda else ""
        times = []
        for _ in range(3 if quick else 15):
            if cuda:
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            step()
            if cuda:
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - start)
        print(f"| {name} | {saved / 2**20:.2f} | {peak}{statistics.median(times) * 1e3:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, number = (3, 200) if args.quick else (15, 2000)

    kiln.reset()
    torch._dynamo.reset()
    runs = {"eager": _add_one, "kiln aot_eager": kiln.compile(_add_one, backend="aot_eager"),
            "torch.compile aot_eager": torch.compile(_add_one, backend="aot_eager")}
    per_call = {name: [] for name in runs}
    for _ in range(3):  # interleaved
        for name, fn in runs.items():
            per_call[name].append(_per_call(fn, rounds, number))
    print("| forward + backward of x + 1 (1 element) | µs per call |")
    print("|---|---|")
    for name, values in per_call.items():
        print(f"| {name} | {statistics.median(values):.1f} |")
    eager = statistics.median(per_call["eager"])
    kiln_cost = statistics.median(per_call["kiln aot_eager"]) - eager
    torch_cost = statistics.median(per_call["torch.compile aot_eager"]) - eager
    print(f"\nwrapper cost over eager: kiln {kiln_cost:.1f} µs, torch.compile {torch_cost:.1f} µs "
          f"(kiln/torch {kiln_cost / torch_cost:.2f})")

    _compile_times(args.quick)

    _saved_and_peak("cpu", args.quick)
    if torch.cuda.is_available():
        _saved_and_peak("cuda", args.quick)

if __name__ == "__main__":
    main()
