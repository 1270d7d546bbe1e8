"""kiln.guards benchmark: how long a compiled guard check takes.

Cases (each a median over timed batches, after warm-up; all in one process). Checkers are
called through ``functools.partial`` (a C-level call, as the frame hook calls them from C),
torch's guard manager likewise. Times are this
thread's CPU time (``time.thread_time_ns``), which other processes on a shared machine do
not inflate; ``--wall`` uses the wall clock instead.

* one tensor: a single TensorMatch, native batch path and pure-Python path;
* 100 guards: type and value guards on 50 attributes of one object;
* module call: what a trace of ``forward(self, x)`` on a module with 10 parameters
  (5 Linear layers in a ModuleList) guards: module structure of every module (with the order
  of the ModuleList, which forward iterates), two Python
  attributes read by forward, tensor matches on the input and the 10 parameters, and the
  global torch state; compared with torch.compile's own cache-hit guard check on the same
  module (its RootGuardManager.check on the frame locals), and with the per-call overhead
  torch.compile(backend="eager") adds over eager;
* the same module with roughly torch's coverage: torch 2.13 installs no guards on the
  parameters or submodules of an inlined nn.Module, only on the input tensor, the global
  state and a few globals, so this row is the like-for-like comparison.

Run: ``python benchmarks/guards_bench.py`` (``--quick`` for fewer samples).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from kiln.guards import (
    AttrSource,
    EqualsMatch,
    GuardSet,
    ItemSource,
    LocalSource,
    ModuleStructureMatch,
    TensorMatch,
    TorchGlobalState,
    TypeMatch,
)

CLOCK = time.thread_time_ns


def median_ns(fn: Callable[[], Any], *, number: int, samples: int) -> float:
    """Median over ``samples`` batches of ``number`` calls, in ns per call, after warm-up."""
    clock = CLOCK
    for _ in range(number):
        fn()
    times = []
    for _ in range(samples):
        t0 = clock()
        for _ in range(number):
            fn()
        times.append((clock() - t0) / number)
    return statistics.median(times)


def paired_difference_ns(
    base: Callable[[], Any], other: Callable[[], Any], *, number: int, samples: int
) -> float:
    """Median over rounds of (a batch of ``other``) - (a batch of ``base``), ns per call.

    Rounds alternate the two, so drifts in machine load cancel out of each difference.
    """
    clock = CLOCK

    def batch(fn: Callable[[], Any]) -> float:
        t0 = clock()
        for _ in range(number):
            fn()
        return (clock() - t0) / number

    batch(base)
    batch(other)
    return statistics.median(batch(other) - batch(base) for _ in range(samples))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(5))
        self.use_relu = True
        self.scale = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
            if self.use_relu:
                x = x.relu()
        return x * self.scale


def module_guards(net: Net, x: torch.Tensor) -> GuardSet:
    """The guards a trace of ``net(x)`` depends on, addressed as symexec would."""
    self_ = LocalSource("self")
    gs = GuardSet()
    gs.add(ModuleStructureMatch.from_module(self_, net))
    for attr in ("use_relu", "scale"):
        gs.add(EqualsMatch(AttrSource(self_, attr), getattr(net, attr)))
    layers = ItemSource(AttrSource(self_, "_modules"), "layers")
    # forward iterates the ModuleList, so the order of its entries matters too
    gs.add(ModuleStructureMatch.from_module(layers, net.layers, ordered=True))
    for i, layer in enumerate(net.layers):
        src = ItemSource(AttrSource(layers, "_modules"), str(i))
        gs.add(ModuleStructureMatch.from_module(src, layer))
        for name, p in layer._parameters.items():
            gs.add(TensorMatch.from_tensor(ItemSource(AttrSource(src, "_parameters"), name), p))
    gs.add(TensorMatch.from_tensor(LocalSource("x"), x))
    gs.add(TorchGlobalState.capture())
    return gs


class Config:
    pass


def hundred_guards() -> tuple[GuardSet, dict[str, Any]]:
    cfg = Config()
    gs = GuardSet([TypeMatch(LocalSource("cfg"), Config)])
    for i in range(50):
        value = (i, f"v{i}", float(i), None, True)[i % 5]
        setattr(cfg, f"a{i}", value)
        src = AttrSource(LocalSource("cfg"), f"a{i}")
        gs.add(TypeMatch(src, type(value)))
        if len(gs) < 100:
            gs.add(EqualsMatch(src, value))
    assert len(gs) == 100, len(gs)
    return gs, {"cfg": cfg}


def torch_compile_figures(net: Net, x: torch.Tensor, number: int, samples: int) -> dict[str, float]:
    """torch.compile's guard check on the same frame, and its per-call overhead."""
    import torch._dynamo
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    torch._dynamo.reset()
    compiled = torch.compile(net, backend="eager")
    compiled(x)
    compiled(x)
    out: dict[str, float] = {}
    entries = _debug_get_cache_entry_list(Net.forward.__code__)
    if entries:
        manager = entries[0].guard_manager
        frame = {"self": net, "x": x}
        if manager.check(frame):
            out["torch guard check"] = median_ns(partial(manager.check, frame), number=number,
                                                 samples=samples)
    out["torch.compile call - eager call"] = paired_difference_ns(
        lambda: net(x), lambda: compiled(x), number=max(number // 10, 100), samples=3 * samples)
    torch._dynamo.reset()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--wall", action="store_true", help="wall clock instead of CPU time")
    args = parser.parse_args()
    global CLOCK
    if args.wall:
        CLOCK = time.perf_counter_ns
    number, samples = (2000, 15) if args.quick else (10000, 41)
    torch.set_num_threads(1)
    rows: list[tuple[str, float, str]] = []

    x = torch.randn(4, 8)
    one = GuardSet([TensorMatch.from_tensor(LocalSource("x"), x)])
    check = one.compile({})
    frame = {"x": x}
    assert check(frame)
    rows.append(("1 tensor match (native batch)", median_ns(partial(check, frame), number=number,
                                                           samples=samples), ""))
    py_check = one.compile({}, native=False)
    assert py_check(frame)
    rows.append(("1 tensor match (pure Python)", median_ns(partial(py_check, frame),
                                                          number=number, samples=samples), ""))

    gs100, frame100 = hundred_guards()
    check100 = gs100.compile({})
    assert check100(frame100)
    rows.append(("100 guards (type+value on 50 attrs)", median_ns(partial(check100, frame100),
                                                                 number=number, samples=samples), ""))

    net = Net()
    xin = torch.randn(2, 8)
    gs = module_guards(net, xin)
    check_mod = gs.compile({})
    module_frame = {"self": net, "x": xin}
    assert check_mod(module_frame), check_mod.explain(module_frame)
    kiln_ns = median_ns(partial(check_mod, module_frame), number=number, samples=samples)
    rows.append((f"module call ({len(gs)} guards, 11 tensors)", kiln_ns, "target < 3000 ns"))

    light = GuardSet([TypeMatch(LocalSource("self"), Net),
                      EqualsMatch(AttrSource(LocalSource("self"), "training"), True),
                      EqualsMatch(AttrSource(LocalSource("self"), "use_relu"), True),
                      TensorMatch.from_tensor(LocalSource("x"), xin),
                      TorchGlobalState.capture()])
    check_light = light.compile({})
    assert check_light(module_frame)
    light_ns = median_ns(partial(check_light, module_frame), number=number, samples=samples)
    rows.append(("module call, torch's coverage (no param guards)", light_ns, ""))

    for name, value in torch_compile_figures(net, xin, number, samples).items():
        note = (f"kiln/torch: full {kiln_ns / value:.2f}, same coverage {light_ns / value:.2f}"
                if value > 0 else "")
        rows.append((name, value, note))

    width = max(len(r[0]) for r in rows)
    clock = "wall clock" if args.wall else "thread CPU time"
    print(f"kiln.guards benchmark (torch {torch.__version__}, {clock}, medians of {samples} "
          f"batches x {number} calls)")
    print(f"{'case':<{width}}  {'ns/check':>10}  note")
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>10.0f}  {note}")


if __name__ == "__main__":
    main()
