"""Differential fuzzing of kiln's frontend: a generator of small Python programs over tensors and
Python values, and a checker that runs each one eagerly and through ``kiln.compile``.

A program is Python source text: a header comment naming its inputs' aliasing variant, then
``def f(x, y, k, n, lst, d, obj, m):`` whose body is drawn from a small grammar (in-place ops
and views, aliases, augmented assignment on every kind, containers and their methods,
comprehensions, closures, attribute mutation on objects and modules, branches on Python
values and on data, ``is``, ``len``, ``locals()``, builtins that raise) and a ``return`` of a
tuple of locals. Lines that must or may end a graph carry a ``# break`` marker; the checker
reads the markers back from the text, so a shrunk program (fewer lines) is still judged right.

Invariants:
- Generation is a pure function of the choices drawn (``Draw``): the same hypothesis seed or
  ``random.Random`` seed gives the same text. The generator tracks what each local holds, so
  most programs run in eager; those that raise must raise the same type when compiled.
- Every run (eager, compiled with backend="eager", compiled with a callable backend,
  ``kiln.explain``) gets its own ``exec`` of the source (its own globals, its own code object)
  and its own freshly built inputs; inputs depend only on the call number.
- ``check_program`` returns the failures found as ``Failure(kind, detail)``; it never raises
  for a mismatch, so a driver can count failures by kind.
"""

from __future__ import annotations

import dataclasses
import linecache
import logging
import math
import os
import random
import re
import traceback
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import kiln

# --- choices ---------------------------------------------------------------------------------


class RandomDraw:
    """Choices from a seeded ``random.Random`` (the long-running driver)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self.rng.randrange(len(options))]

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class HypothesisDraw:
    """Choices from hypothesis' ``data.draw`` (shrinks toward the first option, the low end)."""

    def __init__(self, data: Any):
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def choice(self, options: Sequence[Any]) -> Any:
        return self.data.draw(self.st.sampled_from(list(options)))

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))


# --- inputs ----------------------------------------------------------------------------------


class Obj:
    """A plain user object with attributes."""

    def __init__(self, a: int, t: torch.Tensor, flag: bool):
        self.a, self.t, self.flag = a, t, flag


class Mod(nn.Module):
    """A module with a parameter, a buffer-like plain tensor attribute and plain attributes."""

    def __init__(self, w: torch.Tensor):
        super().__init__()
        self.w = nn.Parameter(w)
        self.scale = 0.5
        self.count = 0

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a @ self.w * self.scale + self.count


VARIANTS = ("plain", "y_is_x", "lst_holds_x", "obj_t_is_y", "y_view_of_x", "d_holds_lst")
CALLS = ((0, 3), (1, 3), (2, -2))  # (value seed, n) per call: the second hits the cache
# kiln.compile's ``dynamic`` for the compiled runs (scripts/fuzz.py --dynamic sets it to True:
# every tensor dimension a symbol, a differential test of the symbolic-shape path)
DYNAMIC = True if os.environ.get("KILN_FUZZ_DYNAMIC") == "1" else None


def make_inputs(seed: int, n: int, variant: str) -> tuple:
    """The arguments ``(x, y, k, n, lst, d, obj, m)`` of one call; equal for equal arguments."""
    g = torch.Generator().manual_seed(seed)
    r = lambda: torch.randn(3, 3, generator=g)  # noqa: E731
    x, y = r(), r()
    k = torch.randint(0, 16, (3, 3), generator=g)
    lst = [r(), r()]
    d = {"a": r(), "b": r(), "c": 2}
    obj = Obj(1, r(), True)
    m = Mod(r())
    if variant == "y_is_x":
        y = x
    elif variant == "lst_holds_x":
        lst[1] = x
    elif variant == "obj_t_is_y":
        obj.t = y
    elif variant == "y_view_of_x":
        y = x.t()
    elif variant == "d_holds_lst":
        d["b"] = lst[0]
    return x, y, k, n, lst, d, obj, m


ARG_NAMES = ("x", "y", "k", "n", "lst", "d", "obj", "m")


class UserMapping(Mapping):
    """A read-only user Mapping (``dict(UserMapping())`` goes through keys/__getitem__)."""

    def __init__(self) -> None:
        self._data = {"p": 3, "q": 4.0}

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Any:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


@kiln.disable
def _opaque(t: torch.Tensor) -> torch.Tensor:
    """A call kiln must not trace (a graph break)."""
    return t * 2


@kiln.disable
def _eager_item(t: torch.Tensor) -> float:
    """``t.item()`` in a call kiln must not trace (a graph break giving a Python number)."""
    return t.item()


def program_globals() -> dict[str, Any]:
    """A fresh namespace for one ``exec`` of a program (globals are mutated by programs)."""
    return {"torch": torch, "F": F, "_opaque": _opaque, "_eager_item": _eager_item, "Obj": Obj, "G": 0, "GL": [],
            "CFG": types.MappingProxyType({"s": 2.0, "b": 1}), "UM": UserMapping(),
            "__name__": "fuzz_program"}


# --- the generator ---------------------------------------------------------------------------

BREAK = "  # break"  # the line must end a graph (at the top level of f, when it runs)
MAY_BREAK = "  # may break"  # the line may end a graph (kiln may also capture it)
T_SCALARS = ("1", "2.0", "-1.5", "0.5", "n")


@dataclasses.dataclass
class Env:
    """What each local holds: float (3,3) tensors, float (3,) rows, int (3,3) tensors, Python
    numbers, lists of float (3,3) tensors with a known minimum length, dicts with known keys."""

    tensors: list[str]
    rows: list[str]
    itensors: list[str]
    ints: list[str]
    floats: list[str]
    lists: dict[str, int]
    dicts: dict[str, dict[str, str]]
    others: list[str]

    def copy(self) -> Env:
        return Env(list(self.tensors), list(self.rows), list(self.itensors), list(self.ints),
                   list(self.floats), dict(self.lists),
                   {k: dict(v) for k, v in self.dicts.items()}, list(self.others))

    def forget(self, name: str) -> None:
        for group in (self.tensors, self.rows, self.itensors, self.ints, self.floats, self.others):
            if name in group:
                group.remove(name)
        self.lists.pop(name, None)
        self.dicts.pop(name, None)

    def merge(self, other: Env) -> Env:
        """What is known after either of two branches ran."""
        both = lambda a, b: [v for v in a if v in b]  # noqa: E731
        return Env(both(self.tensors, other.tensors), both(self.rows, other.rows),
                   both(self.itensors, other.itensors), both(self.ints, other.ints),
                   both(self.floats, other.floats),
                   {k: min(v, other.lists[k]) for k, v in self.lists.items() if k in other.lists},
                   {k: {kk: vv for kk, vv in v.items() if other.dicts[k].get(kk) == vv}
                    for k, v in self.dicts.items() if k in other.dicts},
                   both(self.others, other.others))

    def names(self) -> list[str]:
        return (self.tensors + self.rows + self.itensors + self.ints + self.floats
                + list(self.lists) + list(self.dicts) + self.others)


class Generator:
    """Draws one program; ``simple`` blocks (loop bodies, closures) neither grow nor shrink
    containers and bind no new names."""

    def __init__(self, draw: Any):
        self.draw = draw
        self.fresh = 0
        self.uses_global = False
        self.env = Env(["x", "y"], [], ["k"], ["n"], [], {"lst": 2}, {"d": {"a": "T", "b": "T", "c": "int"}},
                       ["obj", "m"])

    def new_name(self) -> str:
        self.fresh += 1
        return f"v{self.fresh}"

    def pick(self, names: list[str], default: str) -> str:
        return self.draw.choice(names) if names else default

    def t(self) -> str:
        """A float (3,3) tensor expression that is an existing local (or an element of one)."""
        options = list(self.env.tensors)
        options += [f"{name}[0]" for name, n in self.env.lists.items() if n >= 1]
        options += [f"d[{key!r}]" for key, kind in self.env.dicts.get("d", {}).items() if kind == "T"]
        options.append("obj.t")
        return self.draw.choice(options)

    def tname(self) -> str:
        return self.pick(self.env.tensors, "x")

    def bind(self, kind: str, name: str | None = None) -> str:
        name = name or self.new_name()
        self.env.forget(name)
        {"T": self.env.tensors, "R": self.env.rows, "I": self.env.itensors, "int": self.env.ints,
         "float": self.env.floats, "other": self.env.others}[kind].append(name)
        return name

    # -- statements ---------------------------------------------------------------------------

    def program(self) -> str:
        variant = self.draw.choice(VARIANTS)
        body = self.block(self.draw.integer(1, 8), depth=0, simple=False)
        names = self.env.names()
        count = self.draw.integer(1, 4)
        returned = [self.draw.choice(names) for _ in range(count)]
        if self.draw.integer(0, 3) == 0:
            returned.append(f"{self.draw.choice(names)} is {self.draw.choice(names)}")
        lines = [f"# inputs: {variant}", "def f(x, y, k, n, lst, d, obj, m):"]
        lines += ["    global G, GL"] if self.uses_global else []
        lines += ["    " + line for line in body]
        lines.append(f"    return ({', '.join(returned)},)")
        return "\n".join(lines) + "\n"

    def block(self, count: int, depth: int, simple: bool) -> list[str]:
        lines: list[str] = []
        for _ in range(count):
            lines += self.statement(depth, simple)
        return lines or ["pass"]

    def statement(self, depth: int, simple: bool) -> list[str]:
        kinds = ["inplace", "view_inplace", "augassign", "number", "functional", "attr"]
        if not simple:
            kinds += ["alias", "compute", "container", "dict", "comprehension", "introspect", "inplace_result",
                      "data_dependent", "module", "global", "error"]
            if depth < 2:
                kinds += ["branch", "loop", "closure", "try", "with"]
        kind = self.draw.choice(kinds)
        if kind == "error" and self.draw.integer(0, 2):
            kind = "inplace"  # a third as likely as the others: most programs should run through
        return getattr(self, "s_" + kind)(depth)

    def s_inplace(self, depth: int) -> list[str]:
        t, u = self.t(), self.t()
        return [self.draw.choice((
            f"{t}.add_({u})", f"{t}.mul_({self.draw.choice(T_SCALARS)})", f"{t}.clamp_(-1, 1)",
            f"{t}.relu_()", f"{t}.copy_({u})", f"{t}.sub_({u}, alpha=2)", f"{t}.div_(2.0)",
            f"{t}.neg_()", f"{t}.abs_()", f"{t}.sigmoid_()", f"{t}.fill_(0.25)", f"{t}.zero_()",
            f"{t}.t_()", f"{t}.addcmul_({u}, {u}, value=0.5)", f"{t}.masked_fill_({u} > 0, 1.0)",
            f"{t}.index_add_(0, torch.tensor([0, 2]), {u}[:2])", f"{t}.lerp_({u}, 0.5)"))]

    def s_view_inplace(self, depth: int) -> list[str]:
        t, u = self.t(), self.t()
        return [self.draw.choice((
            f"{t}[0].add_(1)", f"{t}[:, 1].mul_(2)", f"{t}.view(-1)[2].fill_(3.0)",
            f"{t}.view(-1).add_(1)", f"{t}.t().mul_(2)", f"{t}.diagonal().zero_()",
            f"{t}[1:] += 1", f"{t}[0] = {u}[1]", f"{t}[{u} > 0] = 0", f"{t}[:, 0] = n",
            f"{t}.view(9)[n % 9] = 7.0", f"{t}.unsqueeze(0).squeeze(0).sub_(1)",
            f"{t}[0:2].copy_({u}[1:3])", f"{t}.narrow(1, 1, 2).clamp_(min=0)"))]

    def s_augassign(self, depth: int) -> list[str]:
        kind = self.draw.choice(("T", "T", "I", "row", "list"))
        if kind == "T":
            t = self.t()
            op = self.draw.choice(("+=", "-=", "*=", "/=", "//=", "%=", "**=", "@="))
            rhs = {"**=": "2", "//=": "1.5", "%=": "2.0", "@=": self.t()}.get(op)
            return [f"{t} {op} {rhs or self.draw.choice((self.t(), *T_SCALARS))}"]
        if kind == "I":
            i = self.pick(self.env.itensors, "k")
            op = self.draw.choice(("&=", "|=", "^=", "<<=", ">>=", "+=", "*=", "%="))
            rhs = self.draw.choice(("3", "1", "k")) if op not in ("%=",) else "5"
            return [f"{i} {op} {rhs}"]
        if kind == "row" and self.env.rows:
            return [f"{self.draw.choice(self.env.rows)} {self.draw.choice(('+=', '*=', '-='))} {self.t()}[1]"]
        lst = self.draw.choice(list(self.env.lists) or ["lst"])
        if lst not in self.env.lists:
            return self.s_inplace(depth)
        return [f"{lst}[0] += {self.draw.choice(T_SCALARS)}"]

    def s_number(self, depth: int) -> list[str]:
        i = self.pick(self.env.ints, "n")
        if self.env.floats and self.draw.integer(0, 2) == 0:
            f = self.draw.choice(self.env.floats)
            return [f"{f} {self.draw.choice(('+=', '-=', '*=', '/=', '**=', '//=', '%='))} "
                    f"{self.draw.choice(('2', '1.5', i))}"]
        op = self.draw.choice(("+=", "-=", "*=", "//=", "%=", "**=", "<<=", ">>=", "&=", "|=", "^="))
        rhs = {"**=": "2", "//=": "2", "%=": "3", "<<=": "1", ">>=": "1"}.get(op) or self.draw.choice(("1", "5", "len(lst)"))
        return [f"{i} {op} {rhs}"]

    def s_inplace_result(self, depth: int) -> list[str]:
        """The value an in-place op (method, ``inplace=``, ``out=``) returns is its argument."""
        t, u = self.t(), self.t()
        expr = self.draw.choice((
            f"{t}.add_(1)", f"{t}.mul_({u})", f"torch.relu_({t})", f"F.relu({t}, inplace=True)",
            f"torch.add({t}, {u}, out={self.tname()})", f"{t}.clamp_(max=0.5)", f"{t}.t_()",
            f"{t}[0].add_(1)", f"torch.mul({t}, 2, out={u})", f"{t}.copy_({u})",
            f"F.hardtanh({t}, inplace=True)", f"torch.sin({t}, out={t})"))
        kind = "R" if "[0]" in expr else "T"
        name = self.bind(kind)
        return [f"{name} = {expr}", f"{self.bind('other')} = {name} is {t}"]

    def s_functional(self, depth: int) -> list[str]:
        t, u = self.t(), self.t()
        out = self.tname()
        return [self.draw.choice((
            f"F.relu({t}, inplace=True)", f"F.leaky_relu({t}, 0.1, inplace=True)",
            f"F.hardtanh({t}, inplace=True)", f"torch.relu_({t})", f"torch.sigmoid_({t})",
            f"torch.add({t}, {u}, out={out})", f"torch.mul({t}, 2, out={out})",
            f"torch.sin({t}, out={out})", f"torch.clamp({t}, -0.5, 0.5, out={out})",
            f"torch.matmul({t}, {u}, out={out})", f"torch.neg_({t})",
            f"F.silu({t}, inplace=True)", f"F.dropout({t}, 0.0, False, True)"))]

    def s_attr(self, depth: int) -> list[str]:
        t = self.t()
        i = self.pick(self.env.ints, "n")
        return [self.draw.choice((
            "obj.a += 1", f"obj.a = {i}", f"obj.t = {t} * 2", f"obj.t += {t}", "obj.t.mul_(2)",
            "obj.flag = not obj.flag", "m.scale *= 2", f"m.scale = {i}", "m.count += 1",
            f"m.extra = {t}", "obj.a *= 3", "setattr(obj, 'a', obj.a - 1)",
            f"obj.new = [{t}]", "m.training = False", "del obj.flag"))]

    def s_alias(self, depth: int) -> list[str]:
        t = self.t()
        choice = self.draw.integer(0, 5)
        if choice == 3:
            return [f"{self.bind('R')} = {t}[{self.draw.choice(('0', '1', 'n % 3', '-1'))}]"]
        if choice == 4:
            expr = self.draw.choice(("lst", "d", "obj", "m", "obj.t", "d.get('a')"))
            return [f"{self.bind('other')} = {expr}"]
        expr = self.draw.choice((t, f"{t}.view(3, 3)", f"{t}.t()", f"{t}.view(-1).view(3, 3)",
                                 f"{t}[:]", f"{t}.detach()", f"{t}.reshape(3, 3)", f"{t}.contiguous()"))
        target = self.draw.choice(["x", "y", self.new_name(), self.new_name()])
        return [f"{self.bind('T', target)} = {expr}"]

    def s_compute(self, depth: int) -> list[str]:
        t, u = self.t(), self.t()
        expr = self.draw.choice((
            f"{t} + {u}", f"{t} * n", f"{t} @ {u}", f"torch.relu({t}) - {u}", f"{t}.sin() * 2",
            f"torch.where({t} > 0, {t}, {u})", f"{t}.clone()", f"{t} / (1 + {u}.abs())",
            f"{t} * obj.a", f"{t} * m.scale", f"{t}.softmax(-1)", f"{t}.cumsum(0)",
            f"torch.cat([{t}[:1], {u}[1:]])", f"{t} * CFG['s']", f"{t} + len(lst)"))
        target = self.draw.choice(["x", "y", self.new_name()])
        return [f"{self.bind('T', target)} = {expr}"]

    def s_container(self, depth: int) -> list[str]:
        lst = "lst"
        size = self.env.lists.setdefault(lst, 0)
        t = self.t()
        # (line, change of length or None when unknown, kind bound to NEW or None)
        options = [(f"{lst}.append({t})", 1, None), (f"{lst}.extend([{t}, {t} * 2])", 2, None),
                   (f"{lst}.insert(0, {t} + 1)", 1, None), (f"{lst} += [{t}]", 1, None),
                   (f"{lst}.reverse()", 0, None), (f"NEW = {lst} + [{t}]", 0, "other"),
                   ("lst.extend(v for v in d.values() if isinstance(v, torch.Tensor))", None, None), ("NEW = list(lst)", 0, "other"),
                   ("NEW = lst.copy()", 0, "other"), ("NEW = len(lst)", 0, "int"),
                   ("NEW = lst[::-1]", 0, "other"), ("lst.clear()", None, None)]
        if size >= 1:
            options += [(f"{lst}.pop()", -1, None), (f"{lst}[-1] = {t}", 0, None), (f"del {lst}[0]", -1, None),
                        (f"NEW = {lst}.pop(0)", -1, "T"), (f"{lst}.remove({lst}[0])", -1, None),
                        (f"{lst}[0].add_(1)", 0, None)]
        if size >= 2:
            options += [(f"{lst}[0:2] = [{lst}[1], {lst}[0]]", 0, None), (f"{lst}.sort(key=lambda v: 0)", 0, None)]
        line, delta, kind = self.draw.choice(options)
        self.env.lists[lst] = 0 if delta is None else size + delta
        if kind is not None:
            line = line.replace("NEW", self.bind(kind), 1)
        return [line]

    def s_dict(self, depth: int) -> list[str]:
        keys = self.env.dicts.setdefault("d", {})
        t = self.t()
        key = self.draw.choice(("a", "b", "c", "e", "z"))
        choice = self.draw.integer(0, 15)
        if choice == 0:
            keys[key] = "T"
            return [f"d[{key!r}] = {t}"]
        if choice == 1:
            keys.update(e="T", c="int")
            return [f"d.update({{'e': {t}, 'c': 5}})"]
        if choice == 2:
            keys.setdefault(key, "T")
            return [f"{self.bind('other')} = d.setdefault({key!r}, {t})"]
        if choice == 3:
            keys.pop(key, None)
            return [f"d.pop({key!r}, None)"]
        if choice == 4:
            keys["z"] = "T"
            return [f"d.update(z={t})"]
        if choice == 5:
            keys.pop(key, None)
            return [f"if {key!r} in d:", f"    del d[{key!r}]"]
        name = self.new_name()
        expr = self.draw.choice((
            "list(d.keys())", "list(d.values())", "list(d.items())", "dict(d)", "{**d}",
            "dict(d.items())", "dict(CFG)", "len(d.values())", "sorted(d)", "'a' in d.keys()",
            "d.keys() & {'a', 'e'}", "d.get('zz', 0)", "list(reversed(d))", "dict(d, extra=1)",
            "type(d)(d)", "d.copy()", "dict(UM)", "{**UM}", "list(UM.items())", "dict(UM, r=x)",
            "UM['q'] * x", "d | {'n': n}", "list(d.keys() - {'a'})", "d.items() == d.items()"))
        return [f"{self.bind('other', name)} = {expr}"]

    def s_comprehension(self, depth: int) -> list[str]:
        t = self.t()
        expr, kind = self.draw.choice((
            ("[v * 2 for v in lst]", "other"), (f"[{t} * i for i in range(3)]", "other"),
            ("{key: v for key, v in d.items() if isinstance(v, torch.Tensor)}", "other"),
            ("sum(v.sum() for v in lst)", "other"), ("[a + b for a, b in zip(lst, lst[1:])]", "other"),
            ("{i % 2 for i in range(max(min(n, 4), 1))}", "other"), (f"torch.stack([{t}, {t} + 1]).sum(0)", "T"),
            ("[v for v in d.values() if v is x]", "other"), (f"[[c * {t} for c in (1, 2)] for _ in range(2)]", "other"),
            (f"{{i: {t}[i] for i in range(3)}}", "other")))
        return [f"{self.bind(kind)} = {expr}"]

    def s_introspect(self, depth: int) -> list[str]:
        t, u = self.t(), self.t()
        expr, kind = self.draw.choice((
            ("sorted(locals())", "other"), ("len(locals())", "int"), ("locals()['x']", "T"),
            ("'v1' in locals()", "other"), ("vars(obj)", "other"), ("vars()['y']", "T"),
            (f"{t} is {u}", "other"), ("lst[0] is x", "other"), ("len(lst) + len(d)", "int"),
            ("len(x)", "int"), ("isinstance(obj.a, int)", "other"), ("getattr(m, 'scale')", "other"),
            ("hasattr(m, 'extra')", "other"), ("type(obj).__name__", "other"), ("id(x) == id(y)", "other"),
            ("m.w.shape[0]", "int"), ("callable(m)", "other"), ("list(m.parameters())", "other")))
        return [f"{self.bind(kind)} = {expr}"]

    def s_data_dependent(self, depth: int) -> list[str]:
        t = self.t()
        choice = self.draw.integer(0, 5)
        # .item(), .tolist() and int(t) stay in the graph (data-dependent numbers) until a
        # use needs their value
        if choice == 0:
            return [f"{self.bind('float')} = {t}.sum().item()" + MAY_BREAK]
        if choice == 1:
            return [f"{self.bind('other')} = {t}.tolist()" + MAY_BREAK]
        if choice == 2:
            return [f"{self.bind('T')} = _opaque({t})" + BREAK]
        if choice == 3:
            return [f"{self.bind('int')} = int({t}.argmax())" + MAY_BREAK]
        if choice == 4:
            return [f"{self.bind('other')} = {t}.nonzero()" + MAY_BREAK]
        return [f"{self.bind('int')} = 1 if {t}.sum() > 0 else 0" + BREAK]

    def s_module(self, depth: int) -> list[str]:
        t = self.t()
        choice = self.draw.integer(0, 6)
        if choice == 0:
            return ["m.forward = lambda a: a * 3", f"{self.bind('T')} = m({t})"]
        if choice == 1:
            return ["m.w.requires_grad_(False)", f"{self.bind('T')} = m({t})"]
        if choice == 2:
            return [f"{self.bind('T')} = m.forward({t})"]
        if choice == 3:
            return [f"{self.bind('T')} = m.__call__({t})"]
        if choice == 4:
            return [f"{self.bind('T')} = type(m).forward(m, {t})"]
        if choice == 5:
            return [f"{self.bind('other')} = m.__dict__['scale']", f"m.__dict__['count'] = {self.pick(self.env.ints, 'n')}"]
        return [f"{self.bind('T')} = m({t}).detach()"]

    def s_global(self, depth: int) -> list[str]:
        t = self.t()
        line = self.draw.choice(("G += 1", f"G = {self.pick(self.env.ints, 'n')}", "G = len(GL)",
                                 f"GL.append({t})", "GL.extend(lst)", "GL.clear()", "GL = GL + [1]"))
        if line.startswith("G"):
            self.uses_global = True
        return [line]

    def s_error(self, depth: int) -> list[str]:
        """A statement eager raises at; caught in a try block, kiln may break there."""
        t = self.t()
        return [self.draw.choice((
            "len(n)", "abs(lst)", "lst[9]", "d['missing']", "obj.missing", "max([])", "divmod(n, 0)",
            "float('x')", "isinstance(x, 3)", f"{t}.view(5)", f"{t} + 'a'", "n + lst", "sum(d)",
            "int(x)", "iter(n)", "next(iter([]))", "m.nothing", "[].pop()", "{}.popitem()",
            "getattr(obj, 'zz')", "x @ torch.ones(2)", "CFG['s'] = 1", "min(3)", "hash([])")) + MAY_BREAK]

    def s_branch(self, depth: int) -> list[str]:
        t = self.t()
        cond, breaks = self.draw.choice((
            ("n > 2", False), ("len(lst) > 2", False), ("'e' in d", False), ("obj.a > 1", False),
            ("x is y", False), ("isinstance(d.get('c'), int)", False), ("m.scale > 1", False),
            (f"{t}.sum().item() > 0", True), (f"{t}.sum() > 0", True), ("lst", False),
            ("getattr(obj, 'flag', False)", False), ("m.training", False)))
        before = self.env.copy()
        then = self.block(self.draw.integer(1, 3), depth + 1, simple=False)
        after_then, self.env = self.env, before
        other = self.block(self.draw.integer(0, 2), depth + 1, simple=False)
        self.env = after_then.merge(self.env)
        lines = [f"if {cond}:" + (BREAK if breaks else "")] + ["    " + s for s in then]
        if other != ["pass"]:
            lines += ["else:"] + ["    " + s for s in other]
        return lines

    def s_try(self, depth: int) -> list[str]:
        """A try block whose body may raise (an error statement) after changing state."""
        before = self.env.copy()
        body = self.block(self.draw.integer(1, 2), depth + 1, simple=False)
        if self.draw.integer(0, 1):
            body += self.s_error(depth + 1)
        self.env = before.merge(self.env)
        handler = self.draw.choice(("Exception", "(KeyError, IndexError)", "TypeError",
                                    "(RuntimeError, ValueError, ZeroDivisionError)"))
        name = self.bind("other")
        lines = ["try:"] + ["    " + s for s in body] + [f"except {handler} as e:", f"    {name} = type(e).__name__"]
        lines += ["else:", f"    {name} = None"]
        if self.draw.integer(0, 2) == 0:
            lines += ["finally:", f"    {self.t()}.add_(1)"]
        return lines

    def s_with(self, depth: int) -> list[str]:
        """A grad-mode block: parameters may change in place under no_grad."""
        header = self.draw.choice(("with torch.no_grad():", "with torch.enable_grad():",
                                   "with torch.inference_mode(False):"))
        body = self.block(self.draw.integer(1, 2), depth + 1, simple=True)
        if header.startswith("with torch.no_grad") and self.draw.integer(0, 1):
            choice = self.draw.integer(0, 2)
            body.append(("m.w.mul_(0.5)", f"m.w.add_({self.t()})", f"NEW = m({self.t()})")[choice])
            if choice == 2:
                body[-1] = body[-1].replace("NEW", self.bind("T"))
        return [header] + ["    " + s for s in body]

    def s_loop(self, depth: int) -> list[str]:
        header = self.draw.choice(("for i in range(2):", "for v in lst:", "for key in d:",
                                   "for i, v in enumerate(lst):", "while i < 2:"))
        body = self.block(self.draw.integer(1, 2), depth + 1, simple=True)
        if header.startswith("while"):
            return ["i = 0", header] + ["    " + s for s in [*body, "i += 1"]]
        if header.startswith("for v") or header.startswith("for i, v"):
            body.append(self.draw.choice(("v.add_(1)", "v.mul_(0.5)", "pass")))
        return [header] + ["    " + s for s in body]

    def s_closure(self, depth: int) -> list[str]:
        t, u = self.tname(), self.t()
        acc = self.new_name()
        self.bind("int", acc)
        body = self.block(self.draw.integer(0, 2), depth + 1, simple=True)
        fn = f"g{self.fresh}"
        result = self.bind("T")
        ret = self.draw.choice((f"a + {t}", f"a * {acc}", f"{t}.mul_(2)", "a.add_(1)", f"a @ {t}"))
        cells = [acc] + [v for v in self.env.tensors + self.env.itensors + self.env.ints + self.env.floats
                         if v != acc]
        if self.draw.integer(0, 2) == 0:  # rebinding a nonlocal tensor of f
            body.append(f"{self.tname()} = a * 2")
        lines = [f"{acc} = {self.draw.choice(('0', '1', 'n'))}", f"def {fn}(a):",
                 f"    nonlocal {', '.join(cells)}", f"    {acc} += 1"] + ["    " + s for s in body]
        lines.append(f"    return {ret}")
        call = self.draw.choice((f"{fn}({u})", f"{fn}({fn}({u}))", f"(lambda b: {fn}(b) * 2)({u})"))
        lines.append(f"{result} = {call}")
        return lines


def generate(draw: Any) -> str:
    """The source text of one program drawn with ``draw`` (a RandomDraw or HypothesisDraw)."""
    return Generator(draw).program()


# --- running and comparing -------------------------------------------------------------------


@dataclasses.dataclass
class Failure:
    """One disagreement between eager and kiln: kind (output, mutation, identity, alias,
    exception, crash, graphs, globals) and a one-paragraph detail."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.detail}"


def build(source: str, filename: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    """A fresh function ``f`` (own globals, own code object) from ``source``, its lines
    registered in ``linecache`` under ``filename`` so kiln can show them."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = program_globals()
    exec(compile(source, filename, "exec"), namespace)
    return namespace["f"], namespace


def variant_of(source: str) -> str:
    match = re.match(r"# inputs: (\w+)", source)
    return match.group(1) if match else "plain"


@dataclasses.dataclass
class Outcome:
    """What one call did: its result or exception, and its arguments afterwards."""

    args: tuple
    result: Any = None
    error: BaseException | None = None


def call(fn: Callable[..., Any], args: tuple) -> Outcome:
    try:
        return Outcome(args, fn(*args))
    except Exception as e:  # any exception is an outcome to compare
        return Outcome(args, error=e)


def callable_backend(gm: Any, example_inputs: Any) -> Callable[..., Any]:
    """A user backend: the graph's forward, called through a Python closure."""
    forward = gm.forward

    def run(*args: Any) -> Any:
        return forward(*args)

    return run


class _InternalErrors(logging.Handler):
    """Records kiln's "compiling ... failed, running it eagerly" warnings: an exception inside
    kiln that the policy swallowed (the answer stays right, but it is a bug in kiln)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.failures: list[Failure] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "failed, running it eagerly" not in str(record.msg):
            return
        error = record.exc_info[1] if record.exc_info else None
        detail = _describe(error) if error is not None else record.getMessage()
        self.failures.append(Failure("internal", detail))


BACKENDS = (("eager", "eager"), ("callable", callable_backend))


def check_program(source: str, filename: str = "<fuzz>", backends: Sequence[tuple[str, Any]] = BACKENDS,
                  graphs: bool = True) -> list[Failure]:
    """Run ``source`` eagerly and compiled with each of ``backends`` ((label, backend) pairs)
    over CALLS, then (``graphs``) under ``kiln.explain``; the failures found (empty when kiln
    agrees with eager). Internal errors kiln swallowed come first (one per distinct error)."""
    handler = _InternalErrors()
    logger = logging.getLogger("kiln")
    logger.addHandler(handler)
    try:
        failures = _check(source, filename, backends, graphs)
    finally:
        logger.removeHandler(handler)
        kiln.reset()
    internal = list({str(f): f for f in handler.failures}.values())
    return internal + [f for f in failures if not (internal and f.kind == "graphs")]


def _check(source: str, filename: str, backends: Sequence[tuple[str, Any]], graphs: bool) -> list[Failure]:
    variant = variant_of(source)
    failures: list[Failure] = []
    eager_fn, eager_ns = build(source, filename)
    expected = [call(eager_fn, make_inputs(seed, n, variant)) for seed, n in CALLS]
    for label, backend in backends:
        kiln.reset()
        fn, ns = build(source, filename)
        try:
            compiled = kiln.compile(fn, backend=backend, dynamic=DYNAMIC)
        except Exception as e:
            return [Failure("crash", f"kiln.compile raised {e!r}")]
        for i, ((seed, n), want) in enumerate(zip(CALLS, expected, strict=True)):
            got = call(compiled, make_inputs(seed, n, variant))
            where = f"backend={label} call {i}"
            failures += compare_outcomes(got, want, where)
            if failures:
                kiln.reset()
                return failures
        failures += [Failure("globals", f"backend={label}: {m}") for m in
                     differences(ns["G"], eager_ns["G"], "G") + differences(ns["GL"], eager_ns["GL"], "GL")]
        if failures:
            kiln.reset()
            return failures
    return check_graph_counts(source, filename, variant, expected[0]) if graphs else []


# Breaks kiln takes by design on programs without a data-dependent op (substrings of reasons).
ALLOWED_BREAKS = (
    "memory shared by several inputs",  # in place on distinct input tensors over one storage
    "may fail on run-time values inside a try block",  # the op runs inside the user's try
)

# Breaks kiln takes where torch.compile captures the code: capture gaps, not wrong answers
# (DESIGN.md: "zero breaks where torch has zero"). A program whose every unexpected break is one
# of these fails as kind "gap": scripts/fuzz.py counts it, the CI test lets it pass. Remove an
# entry once kiln captures the construct.
CAPTURE_GAPS = (
    "deleting attribute",  # del obj.attr
    "builtin id with tensor",  # id(x) == id(y)
    "returning a set value from a compiled region",  # a set comprehension's frame
    "method 'sort' of list",  # lst.sort(key=lambda v: 0)
    "sorting list",  # the same, as a4625cc words it
    "inference_mode",  # with torch.inference_mode(False):
    "of framedict",  # d | {...}
    "the truth value of tensor %eq",  # d.items() == d.items(): tuples compare with `is` first
    "object L['.0']",  # a comprehension's frame compiled alone, after its caller's break
    "assigning the enclosing function's variable",  # a closure's frame compiled alone, likewise
)


def check_graph_counts(source: str, filename: str, variant: str, want: Outcome) -> list[Failure]:
    """The break invariants: no ``# break`` line and no exception means 0 breaks and at most 1
    graph; a ``# break`` line at the top level of ``f`` means at least 1 break."""
    fn, _ = build(source, filename)
    try:
        explained = kiln.explain(fn)(*make_inputs(*CALLS[0], variant))
    except Exception as e:
        if want.error is not None and type(e) is type(want.error):
            return []
        return [Failure("crash", f"kiln.explain raised {e!r} (eager: {want.error!r})")]
    if want.error is not None:
        return []
    lines = source.splitlines()
    must_break = any(line.startswith("    ") and not line.startswith("     ") and line.endswith(BREAK)
                     for line in lines)
    may_break = any(line.endswith((BREAK, MAY_BREAK)) for line in lines)
    summary = f"graphs={explained.graph_count} breaks={explained.graph_break_count} " \
              f"reasons={[r.reason for r in explained.break_reasons]}"
    # Frames the program did not start (a gc callback of hypothesis' timing code, running when
    # a collection happens during the call) are compiled by kiln too: their breaks are not the
    # program's.
    own = [r for r in explained.break_reasons if r.location is None or r.location.filename == filename]
    reasons = [r.reason for r in own if not any(a in r.reason for a in ALLOWED_BREAKS)]
    gaps = [r for r in reasons if any(g in r for g in CAPTURE_GAPS)]
    if not may_break and (reasons or explained.graph_count > 1 + len(own)):
        kind = "gap" if gaps and len(gaps) == len(reasons) else "graphs"
        return [Failure(kind, f"no data-dependent op, yet {summary}")]
    if must_break and not own:
        return [Failure("graphs", f"a top-level data-dependent op, yet {summary}")]
    return []


def compare_outcomes(got: Outcome, want: Outcome, where: str) -> list[Failure]:
    if want.error is not None or got.error is not None:
        if got.error is None:
            return [Failure("exception", f"{where}: eager raised {want.error!r}, kiln returned")]
        if want.error is None:
            return [Failure("exception" if not _is_kiln_error(got.error) else "crash",
                            f"{where}: kiln raised {_describe(got.error)}, eager returned")]
        if type(got.error) is not type(want.error):
            return [Failure("exception", f"{where}: kiln raised {_describe(got.error)}, "
                                         f"eager raised {want.error!r}")]
    else:
        found = differences(got.result, want.result, "result")
        if found:
            return [Failure("output", f"{where}: {found[0]}")]
    found = differences(got.args, want.args, "args")
    if found:
        return [Failure("mutation", f"{where}: {found[0]}")]
    for kind, relation in (("identity", _is_relation), ("alias", _storage_relation)):
        a = relation(got.args, got.result)
        b = relation(want.args, want.result)
        if a != b:
            diff = sorted(set(a.items()) ^ set(b.items()))
            return [Failure(kind, f"{where}: kiln {sorted(set(a.items()) - set(b.items()))} "
                                  f"eager {sorted(set(b.items()) - set(a.items()))} ({len(diff)} differ)")]
    return []


def _is_kiln_error(error: BaseException) -> bool:
    return type(error).__module__.startswith("kiln")


def _describe(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    inner = next((f for f in reversed(frames) if "/packages/" in f.filename), None)
    at = f" at {inner.filename.split('/packages/')[-1]}:{inner.lineno}" if inner else ""
    return f"{error!r}{at}"


def differences(actual: Any, expected: Any, path: str) -> list[str]:
    """Where two values differ: types, structure, tensor values (NaNs equal), attributes."""
    if type(actual) is not type(expected):
        return [f"{path}: {type(actual).__name__} != {type(expected).__name__}"]
    if isinstance(expected, torch.Tensor):
        if actual.shape != expected.shape or actual.dtype != expected.dtype:
            return [f"{path}: {actual.dtype}{list(actual.shape)} != {expected.dtype}{list(expected.shape)}"]
        if actual.requires_grad != expected.requires_grad:
            return [f"{path}: requires_grad {actual.requires_grad} != {expected.requires_grad}"]
        try:
            torch.testing.assert_close(actual, expected, equal_nan=True)
        except AssertionError as e:
            return [f"{path}: {str(e).splitlines()[0]} kiln={actual.tolist()} eager={expected.tolist()}"]
        return []
    if isinstance(expected, (tuple, list)):
        if len(actual) != len(expected):
            return [f"{path}: length {len(actual)} != {len(expected)}"]
        return [m for i, (a, e) in enumerate(zip(actual, expected, strict=True))
                for m in differences(a, e, f"{path}[{i}]")]
    if isinstance(expected, (dict, types.MappingProxyType)):
        if list(actual) != list(expected):
            return [f"{path}: keys {list(actual)} != {list(expected)}"]
        return [m for key in expected for m in differences(actual[key], expected[key], f"{path}[{key!r}]")]
    if isinstance(expected, (set, frozenset)):
        return [] if actual == expected else [f"{path}: {actual!r} != {expected!r}"]
    if isinstance(expected, nn.Module):
        return differences(_module_state(actual), _module_state(expected), path)
    if isinstance(expected, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
        same = getattr(actual, "__qualname__", None) == getattr(expected, "__qualname__", None)
        return [] if same else [f"{path}: {actual!r} != {expected!r}"]
    if isinstance(expected, Obj):
        return differences(vars(actual), vars(expected), f"{path}.__dict__")
    if isinstance(expected, float) and math.isnan(expected):
        return [] if isinstance(actual, float) and math.isnan(actual) else [f"{path}: {actual!r} != nan"]
    if isinstance(expected, type(iter(()))) or type(expected).__name__.endswith("iterator"):
        return []
    try:
        equal = actual == expected
        if isinstance(equal, bool) and equal:
            return []
    except Exception:
        pass
    return [f"{path}: {actual!r} != {expected!r}"]


def _module_state(m: nn.Module) -> dict[str, Any]:
    state = {k: v for k, v in vars(m).items() if not k.startswith("_")}
    state["_parameters"] = dict(m._parameters)
    state["_modules"] = dict(m._modules)
    return state


_IMMUTABLE = (int, float, bool, str, bytes, type(None), tuple, frozenset, complex)


def _leaves(args: tuple, result: Any) -> list[tuple[str, Any]]:
    """(path, value) for the arguments, the result and what they hold, two levels deep."""
    out: list[tuple[str, Any]] = []

    def walk(value: Any, path: str, depth: int) -> None:
        if not isinstance(value, _IMMUTABLE):
            out.append((path, value))
        if depth >= 2:
            return
        if isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]", depth + 1)
        elif isinstance(value, dict):
            for key, v in value.items():
                walk(v, f"{path}[{key!r}]", depth + 1)
        elif isinstance(value, Obj):
            for key, v in vars(value).items():
                walk(v, f"{path}.{key}", depth + 1)

    for name, value in zip(ARG_NAMES, args, strict=True):
        walk(value, name, 0)
    if result is not None:
        walk(result, "result", 0)
    return out


def _is_relation(args: tuple, result: Any) -> dict[str, str]:
    """For every mutable value reachable from arguments and result: the first path to it."""
    first: dict[int, str] = {}
    return {path: first.setdefault(id(value), path) for path, value in _leaves(args, result)}


def _storage_relation(args: tuple, result: Any) -> dict[str, str]:
    """For every tensor: the first path to a tensor sharing its storage."""
    first: dict[int, str] = {}
    relation = {}
    for path, value in _leaves(args, result):
        if isinstance(value, torch.Tensor) and value.untyped_storage().nbytes():
            relation[path] = first.setdefault(value.untyped_storage().data_ptr(), path)
    return relation


# --- minimising ------------------------------------------------------------------------------


def signature(failure: Failure) -> str:
    """What two failures must share to count as the same bug: the kind and the exception types
    named in the detail, in order (kiln's, then eager's)."""
    names = re.findall(r"\b(\w+(?:Error|Exception|Unsupported|Iteration))\(", failure.detail)
    where = re.findall(r" at (\S+:\d+)", failure.detail)[:1]
    reason = [r[:48] for r in re.findall(r"reasons=\[['\"](.*)", failure.detail)[:1]]
    reason = [re.sub(r"'[^']*'|\"[^\"]*\"|\d+|L\[\S*", "_", r) for r in reason]
    return ":".join([failure.kind, *names, *where, *reason])


def _statements(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) line ranges of every statement of f's body (nested ones too), longest first."""
    spans = []
    for i, line in enumerate(lines):
        if not line.startswith("    ") or line.lstrip().startswith(("return", "global")) or i < 2:
            continue
        indent = len(line) - len(line.lstrip())
        end = i + 1
        while end < len(lines) and len(lines[end]) - len(lines[end].lstrip()) > indent \
                and not lines[end].startswith("    return"):
            end += 1
        spans.append((i, end))
    return sorted(spans, key=lambda s: s[0] - s[1])


def _candidates(source: str) -> list[str]:
    """Smaller programs: one statement (with its block) dropped or replaced by its body, one
    returned value dropped, the plain input variant."""
    lines = source.splitlines()
    out = []
    for start, end in _statements(lines):
        indent = " " * (len(lines[start]) - len(lines[start].lstrip()))
        out.append(lines[:start] + lines[end:])
        out.append([*lines[:start], indent + "pass", *lines[end:]])
        if end - start > 1 and lines[start].lstrip().startswith(("if ", "for ", "while ")):
            body = [line[4:] for line in lines[start + 1:end] if line.strip() != "else:"]
            out.append(lines[:start] + body + lines[end:])
    for i, line in enumerate(lines):
        if line.lstrip().startswith("nonlocal ") and "," in line:
            head, names = line.split("nonlocal ")
            names = names.split(", ")
            out += [[*lines[:i], f"{head}nonlocal {', '.join(names[:j] + names[j + 1:])}", *lines[i + 1:]]
                    for j in range(len(names))]
    ret = next((i for i, line in enumerate(lines) if line.startswith("    return (")), None)
    if ret is not None:
        items = _split_items(lines[ret][len("    return ("):-2])
        for i in range(len(items)):
            if len(items) > 1:
                rest = items[:i] + items[i + 1:]
                out.append([*lines[:ret], f"    return ({', '.join(rest)},)", *lines[ret + 1:]])
    if not lines[0].endswith("plain"):
        out.append(["# inputs: plain", *lines[1:]])
    texts = []
    for candidate in out:
        text = "\n".join(candidate) + "\n"
        try:
            compile(text, "<candidate>", "exec")
        except SyntaxError:
            continue
        texts.append(text)
    return texts


def _split_items(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += ch
    return items + ([current.strip()] if current.strip() else [])


def minimise(source: str, failure: Failure, check: Callable[[str], list[Failure]] = check_program,
             budget: int = 400) -> str:
    """The smallest program found (greedily, within ``budget`` checks) that still fails with
    ``failure``'s signature."""
    want = signature(failure)
    checks = 0
    progress = True
    while progress and checks < budget:
        progress = False
        for candidate in _candidates(source):
            checks += 1
            if any(signature(f) == want for f in check(candidate)):
                source, progress = candidate, True
                break
            if checks >= budget:
                break
    shorter = _drop_passes(source)
    return shorter if any(signature(f) == want for f in check(shorter)) else source


def _drop_passes(source: str) -> str:
    """``source`` without the ``pass`` lines it can do without."""
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "pass":
            rest = lines[:i] + lines[i + 1:]
            try:
                compile("\n".join(rest), "<candidate>", "exec")
            except SyntaxError:
                i += 1
                continue
            lines = rest
        else:
            i += 1
    return "\n".join(lines) + "\n"
