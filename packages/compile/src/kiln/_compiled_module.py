"""What ``kiln.compile`` returns: a function's compiled wrapper and ``CompiledModule``.

Calling either sets kiln's frame callback for the duration of the call. ``CompiledModule``
behaves like torch's ``OptimizedModule``: the original module is its only child
(``_orig_mod``), every other attribute is the original's (reads, writes, deletes,
``training``), ``state_dict`` keys start with ``_orig_mod.``, ``dir()`` lists the
original's names, ``len()`` is the original's and the truth value is the original's.
Pickling (``torch.save`` too) stores the original module and the ``kiln.compile``
arguments; loading compiles the loaded module again, with those arguments, as torch
rebuilds an OptimizedModule around the loaded original. ``copy.deepcopy`` does the same
with copies (the backend object included, as torch copies its compile context), so the
copy shares no parameter with the original.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

import kiln.frameeval as fe
from kiln.symexec import Unsupported

from ._policy import FrameCompiler
from ._session import _CURRENT

__all__ = ["CompiledModule", "wrap_call"]


def wrap_call(fn: Callable[..., Any], callback: FrameCompiler) -> Callable[..., Any]:
    """``fn`` with ``callback`` set as kiln's frame callback for the duration of each call."""
    set_callback = fe.set_callback
    entry = callback.entry if callback.fullgraph else None
    current = _CURRENT  # the slot of the current Session (kiln.session() without a call)

    @functools.wraps(fn)
    def compiled(*args: Any, **kwargs: Any) -> Any:
        if entry is not None:
            # An earlier compile without fullgraph gave up on this code or broke its graph
            # (its cache entries would be used); fullgraph promises an error instead.
            stats = current.session.stats
            why = stats.eager_codes.get(entry) or stats.broken_codes.get(entry)
            if why is not None:
                raise Unsupported(f"{entry.co_qualname} cannot be compiled in one graph: {why}")
        previous = set_callback(callback)
        try:
            return fn(*args, **kwargs)
        finally:
            set_callback(previous)

    compiled._kiln_compiled = fn  # type: ignore[attr-defined]
    return compiled


def _remake(recompile: Callable[[torch.nn.Module], CompiledModule], module: torch.nn.Module) -> CompiledModule:
    """Unpickling and ``copy.deepcopy``: compile the (loaded or copied) original again."""
    return recompile(module)


class CompiledModule(torch.nn.Module):
    """The module ``kiln.compile(module)`` returns: calls go through kiln, state is shared.

    ``_orig_mod`` is the original module, registered as this module's only child (so its
    parameters are this module's, and ``state_dict`` keys start with ``_orig_mod.``, as
    torch's OptimizedModule's do). Everything else is the original's, as under
    torch.compile: attribute reads fall through to it, and ``setattr``/``delattr`` of any
    name this class does not define (plain attributes, parameters, buffers, submodules) go
    to it; ``training`` is the original's (``train()``/``eval()`` switch it), so the guards
    of compiled code see every change. ``recompile`` is ``kiln.compile`` bound to the
    arguments that made this module (a ``functools.partial``): pickling and deep copies
    apply it to the loaded or copied original.
    """

    # Names that belong to the wrapper itself; any other attribute is the original module's.
    _OWN_ATTRIBUTES = frozenset({"_orig_mod", "_kiln_call", "_kiln_callback", "_kiln_ready",
                                 "_kiln_recompile", "__dict__"})

    def __init__(self, module: torch.nn.Module, callback: FrameCompiler,
                 recompile: Callable[[torch.nn.Module], CompiledModule]) -> None:
        # Before nn.Module.__init__: attribute access on self reaches _orig_mod from then on,
        # and ``training`` (set by nn.Module.__init__) must not reach the original yet.
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_kiln_ready", False)
        super().__init__()
        self._kiln_ready = True
        self._orig_mod = module  # registers it as the child module
        self._kiln_callback = callback
        self._kiln_recompile = recompile
        self._kiln_call = wrap_call(module.__call__, callback)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._kiln_call(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        # The compile arguments travel as an argument of _remake, so copy.deepcopy copies
        # them (a backend object included) with the original, as torch copies dynamo_ctx.
        return (_remake, (self._kiln_recompile, self._orig_mod))

    @property  # type: ignore[override]
    def training(self) -> bool:
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        if self.__dict__.get("_kiln_ready"):
            self._orig_mod.training = value

    def __len__(self) -> int:
        return len(self._orig_mod)  # a TypeError where the original has no len(), as torch's

    def __bool__(self) -> bool:
        # The original's truth value (a container module is false when empty). torch 2.13's
        # OptimizedModule takes it from __len__ alone, so bool() raises TypeError for a
        # module without len(); pytorch/pytorch#196292 makes it the original's, as here.
        return bool(self._orig_mod)

    def __getattr__(self, name: str) -> Any:
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._modules["_orig_mod"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in CompiledModule._OWN_ATTRIBUTES or hasattr(type(self), name):
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if name in CompiledModule._OWN_ATTRIBUTES or hasattr(type(self), name):
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)

    def __dir__(self) -> list[str]:
        own = self._orig_mod.__dir__()
        return own + [name for name in super().__dir__() if name not in own]
