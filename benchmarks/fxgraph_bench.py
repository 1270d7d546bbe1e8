"""kiln.fxgraph benchmark: GraphModule call cost against hand-written code, and the cost of
building, linting and generating code for a 10,000-node graph (with torch.fx alongside).

Run: ``python benchmarks/fxgraph_bench.py`` (``--quick`` for fewer repeats). Prints one table;
every figure is the median of interleaved repeats after a warm-up.
"""

from __future__ import annotations

import argparse
import operator
import platform
import statistics
import sys
import time
import timeit

from kiln.fxgraph import Graph, GraphModule

# -- call overhead -----------------------------------------------------------------------------

def _python_graph() -> GraphModule:
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    a = g.call_function(operator.add, (x, y))
    b = g.call_function(operator.mul, (a, 3))
    c = g.call_function(operator.sub, (b, x))
    d = g.call_function(max, (c, y))
    e = g.call_function(operator.floordiv, (d, 2))
    f = g.call_function(abs, (e,))
    h = g.call_function(operator.xor, (f, a))
    i = g.call_function(min, (h, 1000))
    g.output((i, a))
    return GraphModule({}, g)


def _python_hand(x, y):
    add = x + y
    mul = add * 3
    sub = mul - x
    max_1 = max(sub, y)
    floordiv = max_1 // 2
    abs_1 = abs(floordiv)
    xor = abs_1 ^ add
    min_1 = min(xor, 1000)
    return (min_1, add)


def _torch_case():
    import torch

    torch.set_num_threads(1)  # a per-call figure, not a parallel-kernel one: keep it steady
    torch.manual_seed(0)
    w1, b1 = torch.randn(8, 8), torch.randn(8)
    w2, b2 = torch.randn(8, 8), torch.randn(8)
    linear = torch.nn.functional.linear
    g = Graph()
    x = g.placeholder("x")
    h = g.call_function(linear, (x, g.get_attr("w1"), g.get_attr("b1")))
    h = g.call_function(torch.relu, (h,))
    h = g.call_function(linear, (h, g.get_attr("w2"), g.get_attr("b2")))
    h = g.call_method("softmax", (h,), {"dim": -1})
    g.output(g.call_function(operator.mul, (h, 2.0)))
    gm = GraphModule({"w1": w1, "b1": b1, "w2": w2, "b2": b2}, g)

    class Hand:
        def __init__(self):
            self.w1, self.b1, self.w2, self.b2 = w1, b1, w2, b2

        def forward(self, x):
            h = linear(x, self.w1, self.b1)
            h = torch.relu(h)
            h = linear(h, self.w2, self.b2)
            return h.softmax(dim=-1) * 2.0

    hand = Hand().forward
    x = torch.randn(4, 8)
    torch.testing.assert_close(gm(x), hand(x))
    return gm, hand, (x,)


def _ns(value: float) -> str:
    return f"{value:.0f} ns" if value < 10_000 else f"{value / 1000:.2f} us"


def _per_call_ns(fn, args, number: int, repeat: int) -> list[float]:
    timer = timeit.Timer(lambda: fn(*args))
    return [t / number * 1e9 for t in timer.repeat(repeat=repeat, number=number)]


def measure_call(gm, hand, args, number: int, repeat: int) -> tuple[float, float]:
    """Median ns per call of the GraphModule and the hand-written function, interleaved."""
    assert gm(*args) is not None and hand(*args) is not None
    _per_call_ns(gm, args, number, 3)
    _per_call_ns(hand, args, number, 3)
    ours, theirs = [], []
    for _ in range(repeat):
        ours += _per_call_ns(gm, args, number, 1)
        theirs += _per_call_ns(hand, args, number, 1)
    return statistics.median(ours), statistics.median(theirs)


# -- 10,000-node graph -------------------------------------------------------------------------

def build_large(n: int) -> Graph:
    g = Graph()
    xs = [g.placeholder(f"x{i}") for i in range(4)]
    vals = list(xs)
    fns = (operator.add, operator.mul, operator.sub, max)
    for i in range(n - 5):
        a = vals[-1]
        b = vals[-1 - (i * 7919) % min(len(vals), 50)]
        vals.append(g.call_function(fns[i % 4], (a, b)))
    g.output(vals[-1])
    return g


def build_large_torch_fx(n: int):
    import torch.fx

    g = torch.fx.Graph()
    vals = [g.placeholder(f"x{i}") for i in range(4)]
    fns = (operator.add, operator.mul, operator.sub, max)
    for i in range(n - 5):
        a = vals[-1]
        b = vals[-1 - (i * 7919) % min(len(vals), 50)]
        vals.append(g.call_function(fns[i % 4], (a, b)))
    g.output(vals[-1])
    return g


def measure_large(n: int, repeat: int) -> dict[str, float]:
    """Median seconds for each stage on an n-node graph (ours, then torch.fx when present)."""
    stages: dict[str, list[float]] = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        out = fn()
        stages.setdefault(name, []).append(time.perf_counter() - t0)
        return out

    have_torch = _have_torch()
    for _ in range(repeat):
        g = timed("build", lambda: build_large(n))
        timed("lint", g.lint)
        timed("codegen", lambda g=g: g.python_code())
        gm = timed("GraphModule (codegen+compile)", lambda g=g: GraphModule({}, g))
        assert gm(0.5, 1.5, 0.25, 2.0) is not None
        if have_torch:
            import torch.fx

            tg = timed("torch.fx build", lambda: build_large_torch_fx(n))
            timed("torch.fx lint", tg.lint)
            timed("torch.fx codegen", lambda tg=tg: tg.python_code("self"))
            timed("torch.fx GraphModule", lambda tg=tg: torch.fx.GraphModule(torch.nn.Module(), tg))
    return {k: statistics.median(v) for k, v in stages.items()}


def _have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (for smoke runs)")
    parser.add_argument("--nodes", type=int, default=10_000)
    args = parser.parse_args(argv)
    number, repeat, large_repeat = (2_000, 5, 1) if args.quick else (20_000, 21, 5)

    print(f"kiln.fxgraph benchmark - Python {platform.python_version()} on {platform.machine()}")
    rows = []
    cases = [("8 int ops", _python_graph(), _python_hand, (3, 4), number)]
    if _have_torch():
        gm, hand, targs = _torch_case()
        cases.append(("2-layer MLP on 4x8", gm, hand, targs, number // 4))
    for label, gm, hand, cargs, n in cases:
        ours, theirs = measure_call(gm, hand, cargs, n, repeat)
        rows.append((f"call {label}: GraphModule vs hand-written", _ns(ours), _ns(theirs), f"{ours / theirs:.2f}x"))
        # gm.forward is the generated function itself (a staticmethod): no instance call.
        ours, theirs = measure_call(gm.forward, hand, cargs, n, repeat)
        rows.append((f"call {label}: gm.forward vs hand-written", _ns(ours), _ns(theirs), f"{ours / theirs:.2f}x"))

    stages = measure_large(args.nodes, large_repeat)
    total = stages["build"] + stages["lint"] + stages["GraphModule (codegen+compile)"]
    for name in ("build", "lint", "codegen", "GraphModule (codegen+compile)"):
        ref = stages.get(f"torch.fx {name.split(' ')[0]}")
        rows.append((f"{args.nodes} nodes: {name}", f"{stages[name] * 1000:.0f} ms",
                     f"{ref * 1000:.0f} ms" if ref else "-", f"{stages[name] / ref:.2f}x" if ref else "-"))
    ref_total = sum(stages.get(k, 0.0) for k in ("torch.fx build", "torch.fx lint", "torch.fx GraphModule"))
    rows.append((f"{args.nodes} nodes: build + lint + GraphModule", f"{total * 1000:.0f} ms",
                 f"{ref_total * 1000:.0f} ms" if ref_total else "-", f"{total / ref_total:.2f}x" if ref_total else "-"))

    headers = ("measure", "kiln", "reference", "ratio")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    print("reference: hand-written Python for calls, torch.fx for the large graph; ratio < 1 means kiln is faster")
    ok = total < 1.0
    print(f"budget: build + lint + code for {args.nodes} nodes under 1 s: {'met' if ok else 'MISSED'} ({total:.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
