"""NNModuleVariable: a torch.nn.Module read from the frame.

A module is traced through, never called as a black box: parameters and buffers become graph
inputs reached through their source (``L['self'].layers[0].weight``), so one graph serves
every instance with the same structure; submodules are module trackers; other attributes
are wrapped (and guarded) like any object's. Calling a module inlines its forward pre-hooks, ``forward`` and forward hooks in the order
``Module.__call__`` runs them; a module called without hooks gets a guard that it still has
none (backward hooks and global module hooks are not modelled: Unsupported).
``Sequential``, ``ModuleList`` and ``ModuleDict`` iterate and index at trace time.
The structure guard (type, ``training``, names of submodules, parameters and buffers) is
installed when the module is first read.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["NNModuleVariable"]


def _has_global_hooks() -> bool:
    from torch.nn.modules import module as module_impl

    names = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
             "_global_backward_pre_hooks")
    return any(getattr(module_impl, n, None) for n in names)


def _is_none(v: VariableTracker) -> bool:
    return v.is_constant() and v.as_constant() is None


class NNModuleVariable(VariableTracker):
    """A module tracker; see the module docstring."""

    __slots__ = ("module",)

    def __init__(self, module: Any, source: Source | None) -> None:
        super().__init__(source)
        self.module = module

    def python_type(self) -> type:
        return type(self.module)

    def describe(self) -> str:
        what = type(self.module).__name__
        return f"module {self.source} ({what})" if self.source is not None else f"a {what} module"

    def _child_source(self, name: str, slot: str = "_modules") -> Source | None:
        # Parameters, buffers and submodules are reached through the dict that holds them
        # (``L['self']._modules['fc']._parameters['weight']``, as nn.Module finds them): the
        # guards and the generated code then read dicts instead of calling
        # ``Module.__getattr__`` in Python.
        from kiln.guards import AttrSource, ItemSource

        if self.source is None:
            return None
        return ItemSource(AttrSource(self.source, slot), name)

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        m = self.module
        for slot in ("_parameters", "_buffers", "_modules"):
            table = m.__dict__.get(slot, {})
            if name in table:
                value = table[name]
                if value is None:
                    return ConstantVariable(None)
                return tx.builder.wrap(value, self._child_source(name, slot))
        return tx.builder.read_attribute(tx, self, m, name)

    def store_attr(self, tx: Translator, name: str, value: VariableTracker) -> None:
        m = self.module
        if name in m._parameters or name in m._buffers or name in m._modules:
            raise Unsupported(f"replacing parameter, buffer or submodule {name!r} of {self.describe()}")
        import torch

        if isinstance(value, NNModuleVariable) or issubclass(_type_of(value), torch.nn.Parameter):
            raise Unsupported(f"assigning a parameter or module to {self.describe()}.{name} "
                              "(it would register a parameter or submodule)")
        tx.output.store_attribute(self, name, value)

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``module(*args, **kwargs)``: its forward hooks and ``forward``, as ``Module.__call__``."""
        from kiln.guards import NoModuleHooks

        m = self.module
        if _has_global_hooks():
            raise Unsupported("calling modules while global module hooks are registered")
        if m._backward_hooks or getattr(m, "_backward_pre_hooks", None):
            raise Unsupported(f"{self.describe()} has backward hooks (not supported yet)")
        forward = type(m).forward
        if not isinstance(forward, types.FunctionType):
            raise Unsupported(f"{self.describe()} has a forward kiln cannot inline")
        if not (m._forward_hooks or m._forward_pre_hooks):
            if self.source is not None:
                tx.output.guards.add(NoModuleHooks(self.source))
            return tx.inline_function(forward, [self, *args], kwargs, class_source=self._forward_source())
        return self._call_with_hooks(tx, forward, args, kwargs)

    def _forward_source(self) -> Any:
        # ``type(module).forward``: the type is guarded by the module's structure guard
        from kiln.guards import AttrSource, TypeSource

        return AttrSource(TypeSource(self.source), "forward") if self.source is not None else None

    def _call_with_hooks(self, tx: Translator, forward: types.FunctionType,
                         args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
        from kiln.guards import AttrSource

        from ._containers import DictVariable, TupleVariable

        m = self.module

        def hooks(name: str) -> DictVariable:
            source = AttrSource(self.source, name) if self.source is not None else None
            table = tx.builder.wrap(getattr(m, name), source)
            assert isinstance(table, DictVariable)
            return table

        args_v: VariableTracker = TupleVariable(list(args))
        kwargs_v = DictVariable(dict(kwargs))
        for hook_id, hook in hooks("_forward_pre_hooks").items.items():
            if hook_id in m._forward_pre_hooks_with_kwargs:
                result = hook.call(tx, [self, args_v, kwargs_v], {})
                if not _is_none(result):
                    args_v, kwargs_v = result.iterate(tx)
            else:
                result = hook.call(tx, [self, args_v], {})
                if not _is_none(result):
                    args_v = result if isinstance(result, TupleVariable) else TupleVariable([result])
        if not isinstance(kwargs_v, DictVariable):
            raise Unsupported(f"a forward pre-hook of {self.describe()} returned non-dict kwargs")
        out = tx.inline_function(forward, [self, *args_v.iterate(tx)], dict(kwargs_v.items),
                                 class_source=self._forward_source())
        for hook_id, hook in hooks("_forward_hooks").items.items():
            if hook_id in m._forward_hooks_with_kwargs:
                result = hook.call(tx, [self, args_v, kwargs_v, out], {})
            else:
                result = hook.call(tx, [self, args_v, out], {})
            if not _is_none(result):
                out = result
        return out

    # -- containers --------------------------------------------------------------------------

    def _children(self) -> list[tuple[str, Any]]:
        return [(k, v) for k, v in self.module._modules.items() if v is not None]

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        import torch

        if isinstance(self.module, torch.nn.ModuleDict):
            return [ConstantVariable(k) for k, _ in self._children()]
        if isinstance(self.module, (torch.nn.Sequential, torch.nn.ModuleList)):
            return [tx.builder.wrap(v, self._child_source(k)) for k, v in self._children()]
        if isinstance(self.module, torch.nn.ParameterList):
            return [self.get_attr(tx, k) for k in self.module._parameters]
        return super().iterate(tx)

    def truth(self, tx: Translator) -> bool:
        return True

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        import torch

        m = self.module
        container = isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict))
        if name == "__len__" and container:
            return ConstantVariable(len(self._children()))
        if name == "__getitem__" and container and len(args) == 1:
            key = args[0].as_constant()
            if isinstance(m, torch.nn.ModuleDict):
                if key not in m._modules:
                    raise Unsupported(f"{self.describe()} has no key {key!r}")
                return self.get_attr(tx, key)
            if isinstance(key, slice):
                if not isinstance(m, torch.nn.ModuleList):
                    raise Unsupported(f"slicing {self.describe()}")
                # a new ModuleList of the same children: read-only use (iterate, index, len)
                from ._containers import TupleVariable

                return TupleVariable([self.get_attr(tx, k) for k, _ in self._children()[key]])
            names = [k for k, _ in self._children()]
            try:
                return self.get_attr(tx, names[key])
            except IndexError:
                raise Unsupported(f"index {key} out of range for {self.describe()}") from None
        if name in ("keys", "values", "items") and isinstance(m, torch.nn.ModuleDict) and not args:
            from ._containers import TupleVariable

            keys = [k for k, _ in self._children()]
            if name == "keys":
                return TupleVariable([ConstantVariable(k) for k in keys])
            values = [self.get_attr(tx, k) for k in keys]
            if name == "values":
                return TupleVariable(values)
            return TupleVariable([TupleVariable([ConstantVariable(k), v])
                                  for k, v in zip(keys, values, strict=True)])
        if name == "__contains__" and isinstance(m, torch.nn.ModuleDict):
            return ConstantVariable(args[0].as_constant() in m._modules)
        if name in _WALKS and not args and not kwargs:
            return self._walk(tx, name)
        return super().call_method(tx, name, args, kwargs)

    def _walk(self, tx: Translator, name: str) -> VariableTracker:
        """``modules()``, ``named_parameters()``, ...: the real walk, each item with its source."""
        from ._containers import TupleVariable

        named = name if name.startswith("named_") else f"named_{name}"
        slot = {"parameters": "_parameters", "buffers": "_buffers"}.get(named[6:], "_modules")
        items = []
        for path, value in getattr(self.module, named)():
            owner: NNModuleVariable = self
            parts = path.split(".") if path else []
            for part in parts[:-1]:
                owner = tx.builder.wrap(owner.module._modules[part], owner._child_source(part))
            if parts:
                tracker = tx.builder.wrap(value, owner._child_source(parts[-1], slot))
            else:
                tracker = self
            items.append(TupleVariable([ConstantVariable(path), tracker]) if name.startswith("named_")
                         else tracker)
        return TupleVariable(items)


# Module walks modelled at trace time: for the unnamed ones the real call runs the named one.
_WALKS = frozenset({"modules", "named_modules", "children", "named_children", "parameters",
                    "named_parameters", "buffers", "named_buffers"})


def _type_of(v: VariableTracker) -> type:
    try:
        return v.python_type()
    except Exception:
        return object
