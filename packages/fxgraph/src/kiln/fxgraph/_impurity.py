"""Impurity: which nodes have effects beyond their result, so passes must keep them.

A node is impure when running it changes something other than its own value: printing,
mutating an argument (``operator.setitem``, in-place methods such as ``x.add_()``),
advancing a random generator, asserting. Dead-code elimination keeps impure nodes, and
common-subexpression elimination never merges them. The registry is open: a package that
owns a target registers it with one line next to its definition
(``register_impure(my_fn)``), or a predicate for a family of targets. Targets defined by
torch are covered by rules that load with ``kiln.fxgraph.torch_fx`` the first time a call is
asked about after torch was imported, so the core never imports torch itself.
"""

from __future__ import annotations

import builtins
import operator
import sys
from collections.abc import Callable
from typing import Any

from ._node import Node

__all__ = ["is_impure", "register_impure", "register_impure_method", "register_impure_rule"]

_impure_targets: set[int] = set()
_keep_alive: list[Any] = []
_impure_methods: set[str] = {
    # containers mutated in place; ``add`` is left out because ``Tensor.add`` is pure
    "append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
    "popitem", "sort", "reverse", "discard",
}
_rules: list[Callable[[Node], bool]] = []
_torch_rules_loaded = False


def register_impure(target: Any) -> Any:
    """Mark a call_function target as impure; returns it (usable as a decorator)."""
    _impure_targets.add(id(target))
    _keep_alive.append(target)
    return target


def register_impure_method(name: str) -> None:
    """Mark every call_method node calling ``name`` as impure."""
    _impure_methods.add(name)


def register_impure_rule(rule: Callable[[Node], bool]) -> Callable[[Node], bool]:
    """Add a predicate; a node is impure when any rule returns True for it."""
    _rules.append(rule)
    return rule


def is_impure(node: Node) -> bool:
    """Whether passes must keep ``node`` even when nothing uses its value."""
    op = node.op
    if op in ("placeholder", "output"):
        return True
    if "out" in node.kwargs and op in ("call_function", "call_method"):
        return True  # writes its result into a given tensor (``torch.mm(a, b, out=view)``)
    if op == "call_method":
        name = node.target
        if name in _impure_methods or (name.endswith("_") and not name.endswith("__")):
            return True
    elif op == "call_function":
        if not _torch_rules_loaded:
            _load_torch_rules()
        target = node.target
        if id(target) in _impure_targets or getattr(target, "_kiln_impure", False):
            return True
    return any(rule(node) for rule in _rules)


def _load_torch_rules() -> None:
    # Once torch is imported, any target may be torch's (C functions often report no
    # module), so its rules load the first time a call is asked about.
    global _torch_rules_loaded
    if _torch_rules_loaded or sys.modules.get("torch") is None:
        return
    _torch_rules_loaded = True
    from . import torch_fx  # noqa: F401  (registers torch's impure targets)


for _fn in (builtins.print, builtins.input, builtins.setattr, builtins.delattr, builtins.exec,
            builtins.eval, builtins.next, operator.setitem, operator.delitem, operator.iadd,
            operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
            operator.ipow, operator.imatmul, operator.iand, operator.ior, operator.ixor,
            operator.ilshift, operator.irshift, operator.iconcat):
    register_impure(_fn)
