"""kiln.symshapes benchmark: fake-tensor propagation through a 12-layer transformer.

Runs the ATen-level work of a GPT-style forward pass (layer_norm, linear projections, head
split/merge views, scaled_dot_product_attention, GELU MLP, residual adds; 12 layers) on fake
tensors, with kiln's FakeTensorMode and with torch's own
``torch._subclasses.fake_tensor.FakeTensorMode`` on the same ops in the same run:

* static: every size is concrete;
* symbolic: batch and sequence length are symbols (a kiln ShapeEnv, resp. torch's ShapeEnv
  with those dims marked DYNAMIC).

One sample = build a fresh mode (and ShapeEnv), convert the input and the weights to fakes,
run the forward pass. Medians of ``--repeat`` samples after ``--warmup`` samples; the ratio
is kiln / torch (lower is better; the target is <= 1.5). kiln's DispatchCache is per mode,
so each sample starts cold (torch's fake-tensor cache is process-wide and stays warm); the
last column shows kiln with its cache off, every op through its meta kernel.

Run: ``python benchmarks/symshapes_bench.py`` (``--quick`` for fewer samples).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from kiln.symshapes import ShapeEnv
from kiln.symshapes.bridge import FakeTensorMode, from_real

LAYERS, D_MODEL, HEADS, BATCH, SEQ = 12, 256, 8, 4, 128


def make_weights() -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)

    def w(*shape):
        return torch.randn(*shape, generator=g) * 0.02

    return [
        {
            "ln1_w": torch.ones(D_MODEL), "ln1_b": torch.zeros(D_MODEL),
            "qkv_w": w(3 * D_MODEL, D_MODEL), "qkv_b": torch.zeros(3 * D_MODEL),
            "out_w": w(D_MODEL, D_MODEL), "out_b": torch.zeros(D_MODEL),
            "ln2_w": torch.ones(D_MODEL), "ln2_b": torch.zeros(D_MODEL),
            "fc1_w": w(4 * D_MODEL, D_MODEL), "fc1_b": torch.zeros(4 * D_MODEL),
            "fc2_w": w(D_MODEL, 4 * D_MODEL), "fc2_b": torch.zeros(D_MODEL),
        }
        for _ in range(LAYERS)
    ]


def forward(x: torch.Tensor, layers: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    b, t, d = x.shape
    for p in layers:
        h = F.layer_norm(x, (d,), p["ln1_w"], p["ln1_b"])
        qkv = F.linear(h, p["qkv_w"], p["qkv_b"])
        q, k, v = qkv.split(d, dim=-1)
        q, k, v = (z.view(b, t, HEADS, d // HEADS).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        a = a.transpose(1, 2).reshape(b, t, d)
        x = x + F.linear(a, p["out_w"], p["out_b"])
        h = F.layer_norm(x, (d,), p["ln2_w"], p["ln2_b"])
        x = x + F.linear(F.gelu(F.linear(h, p["fc1_w"], p["fc1_b"])), p["fc2_w"], p["fc2_b"])
    return x


def kiln_run(x, layers, symbolic: bool, cache: bool = True):
    env = ShapeEnv() if symbolic else None
    mode = FakeTensorMode(env, cache=cache)
    fx = from_real(mode, x, dynamic_dims=(0, 1) if symbolic else (), name="x" if symbolic else None)
    fl = [{k: from_real(mode, v) for k, v in p.items()} for p in layers]
    with mode:
        out = forward(fx, fl)
    return out


def torch_run(x, layers, symbolic: bool):
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode as TorchFakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext
    from torch.fx.experimental.symbolic_shapes import ShapeEnv as TorchShapeEnv

    mode = TorchFakeTensorMode(shape_env=TorchShapeEnv() if symbolic else None)
    if symbolic:
        ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.DYNAMIC, DimDynamic.STATIC])
        fx = mode.from_tensor(x, symbolic_context=ctx, source=ConstantSource("x"))
    else:
        fx = mode.from_tensor(x)
    fl = [{k: mode.from_tensor(v, static_shapes=True) for k, v in p.items()} for p in layers]
    with mode:
        out = forward(fx, fl)
    return out


def measure(fn, warmup: int, repeat: int) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="1 warm-up, 5 samples")
    args = parser.parse_args()
    warmup, repeat = (1, 5) if args.quick else (args.warmup, args.repeat)
    x, layers = torch.randn(BATCH, SEQ, D_MODEL), make_weights()
    print(f"fake propagation, {LAYERS}-layer transformer (d={D_MODEL}, heads={HEADS}, batch={BATCH}, seq={SEQ}); "
          f"median of {repeat} after {warmup} warm-up; torch {torch.__version__}")
    for symbolic in (False, True):
        k_out, t_out = kiln_run(x, layers, symbolic), torch_run(x, layers, symbolic)
        k_shape = [s.node.hint if isinstance(s, torch.SymInt) else s for s in k_out.shape]
        t_shape = [s.node.hint if isinstance(s, torch.SymInt) else s for s in t_out.shape]
        assert k_shape == t_shape == list(x.shape), (k_out.shape, t_out.shape)
        assert symbolic == isinstance(k_out.shape[1], torch.SymInt) == isinstance(t_out.shape[1], torch.SymInt)
    print(f"{'shapes':<10} {'kiln ms':>10} {'torch ms':>10} {'kiln/torch':>11}  {'kiln, no dispatch cache':>24}")
    for symbolic in (False, True):
        k = measure(lambda s=symbolic: kiln_run(x, layers, s), warmup, repeat)
        t = measure(lambda s=symbolic: torch_run(x, layers, s), warmup, repeat)
        n = measure(lambda s=symbolic: kiln_run(x, layers, s, cache=False), warmup, repeat)
        print(f"{'symbolic' if symbolic else 'static':<10} {k * 1e3:>10.2f} {t * 1e3:>10.2f} {k / t:>10.2f}x"
              f"  {n * 1e3:>12.2f} ms = {n / t:.2f}x")


if __name__ == "__main__":
    main()
