"""Swap re-assembled code into real modules, run a workload, print the results.

Run as a script (the tests start it in a fresh interpreter so a broken swap cannot disturb
pytest): ``python roundtrip_workload.py CORPUS MODE`` with CORPUS ``stdlib`` (json, ast,
inspect) or ``torch`` (torch.nn.modules) and MODE ``original`` (no swap), ``identity``
(decode + assemble) or ``nops`` (decode, insert NOPs between instructions so that every
offset, jump argument, EXTENDED_ARG prefix, exception-table range and line-table run moves,
then assemble). Prints one JSON object: ``swapped``, ``identical`` and ``results``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
import sys
import types

from kiln.symexec.bytecode import Instr, decode, map_code

# Instructions the interpreter expects to be followed directly by a specific one (specialized
# PRECALL skips its CALL, a yield's RESUME is checked, FOR_ITER skips END_FOR [+ POP_TOP]).
NO_SPLIT_AFTER = {"YIELD_VALUE", "SEND", "KW_NAMES", "PRECALL", "END_FOR"}


def with_nops(code: types.CodeType) -> types.CodeType:
    bc = decode(code)
    out: list = []
    prev = None
    started = False
    for item in bc.instrs:
        if isinstance(item, Instr) and started and isinstance(prev, Instr) and prev.name not in NO_SPLIT_AFTER:
            out += [Instr("NOP", location=item.location, handler=item.handler) for _ in range(2)]
        started = started or (isinstance(item, Instr) and item.name == "RESUME")
        out.append(item)
        prev = item
    bc.instrs = out
    return bc.to_code()


def identity(code: types.CodeType) -> types.CodeType:
    return decode(code).to_code()


def _functions(module: types.ModuleType):
    seen: set[int] = set()

    def from_namespace(namespace, owner_module):
        for value in list(namespace.values()):
            if id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property):
                yield from (f for f in (value.fget, value.fset, value.fdel) if isinstance(f, types.FunctionType))
            elif isinstance(value, types.FunctionType) and value.__module__ == owner_module:
                yield value
            elif isinstance(value, type) and value.__module__ == owner_module:
                yield from from_namespace(vars(value), owner_module)

    yield from from_namespace(vars(module), module.__name__)


def swap(modules: list[str], mode: str) -> tuple[int, int]:
    transform = {"identity": identity, "nops": with_nops}[mode]
    swapped = identical = 0
    for name in modules:
        for fn in _functions(importlib.import_module(name)):
            new = map_code(fn.__code__, transform)
            identical += new == fn.__code__ and new.co_code == fn.__code__.co_code
            fn.__code__ = new
            swapped += 1
    return swapped, identical


STDLIB = ["json", "json.decoder", "json.encoder", "json.scanner", "ast", "inspect"]


def stdlib_workload() -> list:
    data = {"a": [1, 2.5, None, True, "é\n"], "b": {"c": [], "d": {}}, "e": -0.0, "f": 10**20}
    out: list = [json.dumps(data), json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False),
                 json.dumps(data, separators=(",", ":")), json.loads(json.dumps(data, indent=1)),
                 json.dumps([float("nan"), float("inf")]), json.dumps({1: 2, 3.5: 4, None: 5})]
    out.append(json.loads('{"x": [1, 2, {"y": "\\u00e9"}], "z": 1.5e3}', object_hook=lambda d: sorted(d)))
    out.append(json.loads("[1.25, 2]", parse_float=str, parse_int=lambda s: int(s) * 2))
    out.append(json.dumps({"o": object()}, default=lambda o: "obj"))
    for bad in ('{"a": }', "[1, 2", '"abc', "{'a': 1}", "[1,]"):
        try:
            json.loads(bad)
        except json.JSONDecodeError as exc:
            out.append([exc.msg, exc.pos, exc.lineno, exc.colno])
    for name in STDLIB:
        source = inspect.getsource(importlib.import_module(name))
        tree = ast.parse(source)
        out.append(len(ast.dump(tree, include_attributes=True)))
        out.append(ast.unparse(tree)[:2000])
        out.append(sum(1 for _ in ast.walk(tree)))
        out.append(ast.get_docstring(tree))

    class Renamer(ast.NodeTransformer):
        def visit_Name(self, node):
            return ast.copy_location(ast.Name(id=node.id.upper(), ctx=node.ctx), node)

    tree = Renamer().visit(ast.parse("def f(x, *a, k=1, **kw):\n    return [x + y for y in a if y]"))
    out.append(ast.unparse(ast.fix_missing_locations(tree)))
    out.append(ast.literal_eval("{'a': (1, 2.0, -3j), 'b': [None, True, b'x'], 'c': {1, 2}}").__repr__())
    out.append(ast.dump(ast.increment_lineno(ast.parse("x = 1\ny = 2"), 3), include_attributes=True))
    for name in STDLIB:
        module = importlib.import_module(name)
        for attr, value in sorted(vars(module).items()):
            if callable(value) and not attr.startswith("__"):
                try:
                    sig = str(inspect.signature(value))
                except (TypeError, ValueError) as exc:
                    sig = type(exc).__name__
                out.append([attr, sig, inspect.isfunction(value), inspect.isclass(value)])
        out.append([m for m, _ in inspect.getmembers(module, inspect.isfunction)])
    out.append(str(inspect.getfullargspec(json.dumps)))
    out.append(inspect.getsource(json.loads)[:500])
    out.append(inspect.cleandoc("  a\n    b\n  c"))
    out.append(str(inspect.signature(lambda a, /, b, *c, d=1, **e: None).bind(1, 2, 3, d=4)))
    out.append(sorted(inspect.getclosurevars(Renamer.visit_Name).globals))
    return out


def torch_modules() -> list[str]:
    import torch.nn.modules

    return ["torch.nn.modules." + m.name for m in pkgutil.iter_modules(torch.nn.modules.__path__)]


def torch_workload() -> list:
    import hashlib

    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.set_num_threads(1)

    def digest(t) -> str:
        if isinstance(t, tuple):
            return ",".join(digest(x) for x in t if x is not None and not isinstance(x, tuple)) + "|" + ",".join(
                digest(x) for x in t if isinstance(x, tuple))
        return hashlib.sha1(t.detach().contiguous().numpy().tobytes()).hexdigest()[:16] + str(tuple(t.shape))

    x = torch.randn(4, 8)
    img = torch.randn(2, 3, 16, 16)
    seq = torch.randn(5, 3, 8)
    cases = [
        (nn.Linear(8, 6), x), (nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 2)), x),
        (nn.Conv2d(3, 4, 3, padding=1), img), (nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2)), img),
        (nn.ConvTranspose2d(3, 2, 3, stride=2), img), (nn.AdaptiveAvgPool2d(3), img), (nn.Upsample(scale_factor=2), img),
        (nn.LSTM(8, 12, num_layers=2), seq), (nn.GRU(8, 12, bidirectional=True), seq), (nn.RNN(8, 4), seq),
        (nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0), seq),
        (nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0), (seq, seq)),
        (nn.Embedding(10, 4), torch.tensor([[1, 2], [3, 9]])), (nn.EmbeddingBag(10, 4), torch.tensor([[1, 2], [3, 9]])),
        (nn.Dropout(0.5).eval(), x), (nn.Softmax(dim=1), x), (nn.LogSoftmax(dim=1), x), (nn.Flatten(), img),
        (nn.Unflatten(1, (2, 4)), x), (nn.GroupNorm(1, 3), img), (nn.InstanceNorm2d(3), img), (nn.PixelShuffle(2), torch.randn(1, 4, 3, 3)),
        (nn.Bilinear(8, 8, 3), (x, x)), (nn.CosineSimilarity(), (x, x)), (nn.PairwiseDistance(), (x, x)),
        (nn.Hardtanh(), x), (nn.SiLU(), x), (nn.Mish(), x), (nn.PReLU(), x), (nn.Softplus(), x), (nn.ELU(), x),
        (nn.Identity(), x), (nn.ZeroPad2d(1), img), (nn.Fold((4, 4), 2), torch.randn(1, 12, 9)), (nn.Unfold(2), img),
    ]
    out: list = []
    for module, inp in cases:
        args = inp if isinstance(inp, tuple) else (inp,)
        out.append([type(module).__name__, digest(module(*args)), repr(module)[:200]])
    mha = nn.MultiheadAttention(8, 2)
    out.append(digest(mha(seq, seq, seq)))
    target = torch.tensor([1, 0, 3, 2])
    for loss in (nn.CrossEntropyLoss(), nn.NLLLoss(), nn.MultiMarginLoss()):
        out.append(digest(loss(x[:, :4], target)))
    for loss in (nn.MSELoss(), nn.L1Loss(), nn.SmoothL1Loss(), nn.HuberLoss(), nn.KLDivLoss(reduction="batchmean")):
        out.append(digest(loss(x, x.flip(0))))
    out.append(digest(nn.BCEWithLogitsLoss()(x, x.sigmoid())))
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
    model(x).sum().backward()
    out.append([digest(p.grad) for p in model.parameters()])
    out.append(sorted(model.state_dict()))
    out.append([n for n, _ in model.named_modules()])
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    md = nn.ModuleDict({"a": nn.ReLU(), "b": nn.Tanh()})
    out.append([len(ml), list(md.keys()), repr(ml[1:]), str(nn.ParameterList([nn.Parameter(torch.ones(2))]))])
    return out


def main() -> None:
    corpus, mode = sys.argv[1], sys.argv[2]
    modules = torch_modules() if corpus == "torch" else STDLIB
    for name in modules:
        importlib.import_module(name)
    swapped, identical = swap(modules, mode) if mode != "original" else (0, 0)
    results = torch_workload() if corpus == "torch" else stdlib_workload()
    text = re.sub(r" at 0x[0-9a-f]+", "", json.dumps(results, default=repr))
    print(json.dumps({"swapped": swapped, "identical": identical, "results": text}))


if __name__ == "__main__":
    main()
