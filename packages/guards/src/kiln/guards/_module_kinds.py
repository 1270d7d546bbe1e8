"""The nn.Module structure guard.

``ModuleStructureMatch`` pins what a trace of a module's ``forward`` depends on besides its
tensors: the exact module class, the ``training`` flag, and the names of its direct
submodules, parameters and buffers (the key sets of ``_modules``, ``_parameters`` and
``_buffers``), which decide how ``module.name`` resolves. Their order is a separate fact,
needed only where the trace iterates (``for layer in self.layers``): a tracer states it
with ``ordered=True`` (names compared as lists), or a DictKeysMatch on that dict, e.g.
``L['self']._modules['layers']._modules``. It reads all of them from the instance ``__dict__`` (one attribute
lookup, then dict items), never through ``nn.Module.__getattr__``: faster, and free of user
code. Once it holds, it lends those dicts to the compiler (``CodeContext.provide``), so
sources such as ``L['self']._parameters`` are fetched from the dict already in hand. It does not import torch: any object laid out like an
nn.Module can be checked, which keeps it usable (and testable) without torch installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kiln.guards._base import CodeContext, Guard, safe_repr, type_name
from kiln.guards._sources import AttrSource, Source

__all__ = ["ModuleStructureMatch", "NoModuleHooks"]

_PARTS = ("_modules", "_parameters", "_buffers")


def _plain_instance_attribute(tp: type, name: str) -> bool:
    """Whether ``obj.name`` is ``obj.__dict__[name]`` for every instance of exactly ``tp``
    that has the key: no class attribute of that name, no custom ``__getattribute__``."""
    try:
        mro = tp.__mro__
        return tp.__getattribute__ is object.__getattribute__ and not any(
            name in vars(k) for k in mro
        )
    except Exception:
        return False


@dataclass(frozen=True, slots=True)
class ModuleStructureMatch(Guard):
    """``source`` is a module of exactly ``module_type`` in the traced training mode whose
    submodule, parameter and buffer names are the traced ones (as sets; as sequences when
    ``ordered``)."""

    source: Source
    module_type: type
    training: bool
    modules: tuple[str, ...]
    parameters: tuple[str, ...]
    buffers: tuple[str, ...]
    ordered: bool = False
    cost = 6
    establishes_type = True

    def __post_init__(self) -> None:
        # names and the flag are rendered into generated code: plain str / bool only
        if type(self.training) is not bool or type(self.ordered) is not bool:
            raise TypeError("training and ordered must be bools")
        for names in (self.modules, self.parameters, self.buffers):
            if type(names) is not tuple or any(type(n) is not str for n in names):
                raise TypeError("module, parameter and buffer names must be tuples of str")

    @classmethod
    def from_module(cls, source: Source, module: Any, *, ordered: bool = False
                    ) -> ModuleStructureMatch:
        """The guard that ``module`` (an nn.Module) satisfies now; ``ordered`` also pins the
        order of the names (for a trace that iterates the module's children)."""
        return cls(source, type(module), bool(module.training), tuple(module._modules),
                   tuple(module._parameters), tuple(module._buffers), ordered)

    def describe(self) -> str:
        order = ", in order" if self.ordered else ""
        return (f"{self.source} is a {type_name(self.module_type)} "
                f"(training={self.training}) with modules {list(self.modules)}, "
                f"parameters {list(self.parameters)}, buffers {list(self.buffers)}{order}")

    def emit(self, ctx: CodeContext, expr: str) -> list[str]:
        d = ctx.temp()
        conds = [f"type({expr}) is {ctx.const(self.module_type, 'type')}",
                 f"({d} := {expr}.__dict__)['training'] is {self.training}"]
        ctx.provide(AttrSource(self.source, "__dict__"), d)  # what NoModuleHooks reads
        for part, names in zip(_PARTS, (self.modules, self.parameters, self.buffers),
                               strict=True):
            # the cheapest exact tests of a dict's key set: `not p`, or its length plus
            # membership of each name (no list is built, no order compared)
            value = f"{d}[{part!r}]"
            if names and self.ordered:
                # the traced key objects: equal keys are then usually identical
                p = ctx.temp()
                conds.append(f"[*({p} := {value})] == {ctx.const(list(names), 'names')}")
                value = p
            elif names:
                p = ctx.temp()
                has = " and ".join(f"{name!r} in {p}" for name in names)
                conds.append(f"len({p} := {value}) == {len(names)} and {has}")
                value = p
            else:
                conds.append(f"not {value}")
            if _plain_instance_attribute(self.module_type, part):
                ctx.provide(AttrSource(self.source, part), value)
        return conds

    def explain(self, module: Any) -> str | None:
        src = self.source
        if type(module) is not self.module_type:
            return (f"module {src} type: expected {type_name(self.module_type)}, "
                    f"got {type_name(type(module))}")
        state = module.__dict__
        if state["training"] is not self.training:
            return (f"module {src} training: expected {self.training}, "
                    f"got {safe_repr(state['training'])}")
        for part, names in zip(_PARTS, (self.modules, self.parameters, self.buffers),
                               strict=True):
            found = state[part]
            if self.ordered and names:
                differs = [*found] != list(names)
            elif names:
                differs = len(found) != len(names) or any(name not in found for name in names)
            else:
                differs = bool(found)
            if differs:
                return (f"module {src} {part.lstrip('_')} names: expected {list(names)}, "
                        f"got {safe_repr([*found])}")
        return None


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")


@dataclass(frozen=True, slots=True)
class NoModuleHooks(Guard):
    """``source`` is an nn.Module with no forward or backward hooks of its own.

    A trace that modelled the module's call without hooks ran only its ``forward``; a hook
    added later must make the trace invalid (global module hooks are part of the global
    torch state guard). Needs the module's type established first (it reads
    the instance dict)."""

    source: Source
    cost = 3

    @property
    def sources(self) -> tuple[Source, ...]:
        # the instance dict, which the module's structure guard has usually fetched already
        return (AttrSource(self.source, "__dict__"),)

    def describe(self) -> str:
        return f"{self.source} has no module hooks"

    def emit(self, ctx: CodeContext, state: str) -> list[str]:
        # nn.Module.__init__ puts all four dicts in the instance dict: plain subscripts (a
        # module without them fails the check, which is safe)
        return [f"not ({' or '.join(f'{state}[{name!r}]' for name in _HOOK_DICTS)})"]

    def explain(self, state: Any) -> str | None:
        found = [name for name in _HOOK_DICTS if state.get(name)]
        if not found:
            return None
        return f"{self.source} hooks: expected none, got {', '.join(found)}"
