"""NNModuleVariable: a torch.nn.Module read from the frame.

A module is traced through, never called as a black box. Everything about it follows the
real Python protocol, with torch's own nn.Module functions answered by the tracker instead of
having their code inlined:

* ``module.name`` is Python's lookup (``VariableBuilder.read_attribute``): a Python
  ``__getattribute__`` of the class, data descriptors (properties, slots), the instance
  ``__dict__``, class attributes, and only then ``__getattr__``; ``nn.Module.__getattr__``
  is modelled here (``_parameters``, ``_buffers``, ``_modules`` in that order). Parameters,
  buffers and submodules are reached through the dict that holds them
  (``L['self']._modules['fc']._parameters['weight']``), so one graph serves every instance
  with the same structure.
* ``module(*args)`` is ``type(module).__call__``: a class's own ``__call__`` is inlined;
  ``nn.Module.__call__``/``_call_impl`` are modelled: global then module forward pre-hooks,
  ``module.forward`` (looked up like any attribute: an instance attribute or a reassigned
  method answers), global then module forward hooks, as eager orders them. Backward hooks
  are Unsupported (the call is a graph break and runs eagerly).
* Special methods (``len``, ``in``, indexing, iteration, truth) are looked up on the class;
  the implementations of ``Sequential``, ``ModuleList``, ``ModuleDict`` and
  ``ParameterList`` are modelled, a subclass's overrides are inlined.

Invariants: every answer is guarded. The module's structure guard (type, ``training``,
member names in order) is installed when it is first wrapped; each instance-dict fact the
lookup relied on is a KeyAbsent guard; the module's hook tables a call consulted are
guarded empty (NoModuleHooks) or by their keys, the global ones by their keys when in use
(their sizes are part of the global torch state guard of every trace).
"""

from __future__ import annotations

import functools
import types
from typing import TYPE_CHECKING, Any

from .._unsupported import MissingAttribute, Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable
from ._containers import DictVariable
from ._objects import MISSING, bind_class_attribute, is_data_descriptor, lookup_class_attribute

if TYPE_CHECKING:
    from collections.abc import Callable

    from kiln.guards import Source

    from .._translator import Translator

__all__ = ["NNModuleVariable", "is_modelled_function"]

# Where torch keeps the hooks of ``register_module_forward_hook`` and friends.
_HOOKS_MODULE = "torch.nn.modules.module"
_GLOBAL_HOOKS = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_pre_hooks",
                 "_global_backward_hooks")
_LOCAL_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
_MEMBER_SLOTS = ("_parameters", "_buffers", "_modules")


def _hooks_module() -> Any:
    import sys

    import torch.nn.modules.module  # noqa: F401  (loaded with torch; named for sys.modules)

    return sys.modules[_HOOKS_MODULE]


def _is_none(v: VariableTracker) -> bool:
    return v.is_constant() and v.as_constant() is None


@functools.cache
def _modelled() -> dict[Any, Callable[..., VariableTracker | None]]:
    """torch's own functions the tracker answers itself, each mapped to the tracker's method
    doing it (called as ``method(tracker, tx, args, kwargs)``; None: inline the real code).
    The function found on a module's class (or through ``super()``) is dispatched by
    identity, so a subclass that overrides one gets its override inlined instead."""
    from torch import nn

    v = NNModuleVariable
    table: dict[Any, Callable[..., VariableTracker | None]] = {
        nn.Module.__dict__["__call__"]: v._call_impl, nn.Module._call_impl: v._call_impl,
        nn.Module.__getattr__: v._member, nn.Module.__setattr__: v._setattr,
        nn.ModuleDict.__iter__: v._iter_keys, nn.ModuleDict.__len__: v._len,
        nn.ModuleDict.__getitem__: v._key, nn.ModuleDict.__contains__: v._contains,
        nn.ModuleDict.keys: v._keys, nn.ModuleDict.values: v._values, nn.ModuleDict.items: v._items,
        nn.ParameterList.__iter__: v._iter_parameters,
    }
    for cls in (nn.Sequential, nn.ModuleList):
        table.update({cls.__iter__: v._iter_values, cls.__len__: v._len, cls.__getitem__: v._index})
    for walk in _WALKS:
        table[getattr(nn.Module, walk)] = functools.partial(_walk, walk=walk)
    return table


def is_modelled_function(value: Any) -> bool:
    """Whether ``value`` is one of torch's nn.Module functions the module tracker answers
    (read off a class, ``nn.Module.__call__`` is then a function to call, not a torch op)."""
    return isinstance(value, types.FunctionType) and value in _modelled()


# Module walks modelled at trace time (without arguments): the real walk, items with sources.
_WALKS = ("modules", "named_modules", "children", "named_children", "parameters",
          "named_parameters", "buffers", "named_buffers")


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

    # -- attributes ----------------------------------------------------------------------------

    def _step(self) -> type:
        # How the guards read an attribute: plainly, unless the class's own Python
        # __getattribute__ would run (user code inside the guard check).
        from kiln.guards import AttrSource, GenericAttrSource

        hook = lookup_class_attribute(type(self.module), "__getattribute__")
        return GenericAttrSource if isinstance(hook, types.FunctionType) else AttrSource

    def _child_source(self, name: str, slot: str = "_modules") -> Source | None:
        # Parameters, buffers and submodules are reached through the dict that holds them,
        # as nn.Module.__getattr__ finds them: the guards and the generated code then read
        # dicts instead of calling ``Module.__getattr__`` in Python.
        from kiln.guards import ItemSource

        if self.source is None:
            return None
        return ItemSource(self._step()(self.source, slot), name)

    def _member_value(self, tx: Translator, slot: str, name: str) -> VariableTracker:
        if self.source is not None:
            # a member the trace replaced (``self.steps = self.steps + 1`` on a buffer)
            written = tx.output.trackers.get(self._step()(self.source, slot))
            if isinstance(written, DictVariable) and written.mutated:
                return written.value_of(tx, name)
        return tx.builder.wrap(self.module.__dict__[slot][name], self._child_source(name, slot))

    def _replace_buffer(self, tx: Translator, name: str, value: VariableTracker) -> VariableTracker:
        """``module.name = tensor`` for a registered buffer ``name``: ``Module.__setattr__``
        calls ``register_buffer``, which stores the tensor in ``_buffers`` (its persistence
        unchanged) after the global buffer registration hooks (guarded to stay none). The
        store is a change of the frame's ``_buffers`` dict, replayed after the graph."""
        import torch

        from kiln.guards import AttrSource, KeyAbsent, ModuleSource

        from ._tensor import TensorVariable

        if self.source is None:
            raise Unsupported(f"replacing buffer {name!r} of {self.describe()}, made while tracing")
        m = self.module
        if lookup_class_attribute(type(m), "register_buffer") is not torch.nn.Module.register_buffer \
                or isinstance(m, torch.jit.ScriptModule):
            raise Unsupported(f"replacing buffer {name!r} of {self.describe()}: its class has its own register_buffer")
        if not (_is_none(value) or (isinstance(value, TensorVariable)
                                    and not issubclass(value.python_type(), torch.nn.Parameter))):
            raise Unsupported(f"assigning {value.describe()} to buffer {name!r} of {self.describe()}")
        if "register_buffer" in m.__dict__:
            raise Unsupported(f"replacing buffer {name!r} of {self.describe()}: an instance register_buffer")
        tx.output.guards.add(KeyAbsent(self._step()(self.source, "__dict__"), "register_buffer"))
        hooks_source = AttrSource(ModuleSource(_HOOKS_MODULE), "_global_buffer_registration_hooks")
        hooks = tx.builder.wrap(getattr(_hooks_module(), "_global_buffer_registration_hooks", None), hooks_source)
        if not isinstance(hooks, DictVariable) or hooks.key_count():
            raise Unsupported(f"replacing buffer {name!r} of {self.describe()} would run buffer registration hooks")
        buffers = tx.builder.wrap(m.__dict__["_buffers"], self._step()(self.source, "_buffers"))
        buffers.call_method(tx, "__setitem__", [ConstantVariable(name), value], {})
        return ConstantVariable(None)

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        return tx.builder.read_attribute(tx, self, self.module, name)

    def _member(self, tx: Translator, args: list[VariableTracker],
                kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
        """``nn.Module.__getattr__(name)``: a parameter, buffer or submodule, or missing. The
        key sets it searched are pinned by the structure guard."""
        if kwargs or len(args) != 1 or not args[0].is_constant():
            return None
        name = args[0].as_constant()
        for slot in _MEMBER_SLOTS:
            if name in self.module.__dict__.get(slot, ()):
                return self._member_value(tx, slot, name)
        raise MissingAttribute(f"{self.describe()} has no attribute {name!r}")

    def store_attr(self, tx: Translator, name: str, value: VariableTracker, *, raw: bool = False) -> None:
        """``module.name = value``: through the class's ``__setattr__`` (nn.Module's own is
        modelled by ``_setattr``); ``raw``: ``object.__setattr__``."""
        if raw:
            self._plain_store(tx, name, value)
            return
        setter = lookup_class_attribute(type(self.module), "__setattr__")
        if not isinstance(setter, types.FunctionType):
            raise Unsupported(f"assigning {name!r} of {self.describe()}: its class's __setattr__ is not Python")
        bind_class_attribute(tx, self, setter).call(tx, [ConstantVariable(name), value], {})

    def _setattr(self, tx: Translator, args: list[VariableTracker],
                 kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
        """``nn.Module.__setattr__``: plain attributes only (registering members is not traced)."""
        import torch

        if kwargs or len(args) != 2 or not args[0].is_constant():
            return None
        name, value = args[0].as_constant(), args[1]
        m = self.module
        if name in m.__dict__.get("_buffers", ()) and name not in m.__dict__.get("_parameters", ()) \
                and name not in m.__dict__.get("_modules", ()):
            return self._replace_buffer(tx, name, value)
        if any(name in m.__dict__.get(slot, ()) for slot in _MEMBER_SLOTS):
            raise Unsupported(f"replacing parameter, buffer or submodule {name!r} of {self.describe()}")
        if isinstance(value, NNModuleVariable) or issubclass(_type_of(value), torch.nn.Parameter):
            raise Unsupported(f"assigning a parameter or module to {self.describe()}.{name} "
                              "(it would register a parameter or submodule)")
        self._plain_store(tx, name, value)
        return ConstantVariable(None)

    def _plain_store(self, tx: Translator, name: str, value: VariableTracker) -> None:
        if is_data_descriptor(lookup_class_attribute(type(self.module), name)):
            raise Unsupported(f"assigning {name!r} of {self.describe()} runs a descriptor (property)")
        tx.output.store_attribute(self, name, value)

    # -- torch's functions, modelled -------------------------------------------------------------

    def call_torch_function(self, tx: Translator, fn: Any, args: list[VariableTracker],
                            kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
        """``fn(module, *args, **kwargs)`` answered by the tracker when ``fn`` is one of torch's
        nn.Module functions it models; None when it is not (the caller inlines ``fn``)."""
        try:
            model = _modelled().get(fn)
        except TypeError:  # an unhashable callable
            return None
        return None if model is None else model(self, tx, args, kwargs)

    def _special(self, tx: Translator, name: str) -> VariableTracker | None:
        """``type(module).name`` bound to the module (special methods skip the instance)."""
        from kiln.guards import AttrSource

        attr = lookup_class_attribute(type(self.module), name)
        if attr is MISSING:
            return None
        # the source lets a method's defaults and closure be reached through its class
        return bind_class_attribute(tx, self, attr, AttrSource(self.source, name) if self.source else None)

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``module(*args, **kwargs)``: ``type(module).__call__``, see the module docstring."""
        call = self._special(tx, "__call__")
        if call is None:
            raise Unsupported(f"{self.describe()} is not callable")
        return call.call(tx, args, kwargs)

    def _call_impl(self, tx: Translator, args: list[VariableTracker],
                   kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``Module.__call__`` / ``Module._call_impl``: hooks and ``self.forward`` in eager order.

        (``Module.compile()`` makes ``__call__`` run a torch.compile'd ``_call_impl``: the
        same function, so the same model.)"""
        if "_initialize_hook" in self.module.__dict__:  # a lazy module's first call
            from ._lazy_modules import initialize_lazy

            initialize_lazy(tx, self, args, kwargs)
        pre, post = self._forward_hooks(tx)
        forward = self.get_attr(tx, "forward")
        if not (pre or post):
            return forward.call(tx, args, kwargs)
        return self._call_with_hooks(tx, forward, pre, post, args, kwargs)

    def _forward_hooks(self, tx: Translator) -> tuple[list[tuple[VariableTracker, bool]],
                                                      list[tuple[VariableTracker, bool]]]:
        """The forward pre-hooks and forward hooks a call runs, global ones first, each as
        (hook tracker, takes kwargs). The module's own tables are guarded (NoModuleHooks, or
        each by its keys); the global ones by their keys when not empty (how many each holds
        is part of the global torch state every trace guards)."""
        from kiln.guards import AttrSource, ModuleSource, NoModuleHooks

        m, g = self.module, _hooks_module()
        if any(getattr(g, n, None) for n in _GLOBAL_HOOKS[2:]) or any(getattr(m, n, None) for n in _LOCAL_HOOKS[2:]):
            raise Unsupported(f"calling {self.describe()} would set up backward hooks (not traced)")
        local_hooks = any(getattr(m, n, None) for n in _LOCAL_HOOKS)
        if not local_hooks and self.source is not None:
            tx.output.guards.add(NoModuleHooks(self.source))
        tables = []
        for owner, names, base in ((g, _GLOBAL_HOOKS[:2], ModuleSource(_HOOKS_MODULE)),
                                   (m, _LOCAL_HOOKS if local_hooks else (), self.source)):
            for n in names:
                table = getattr(owner, n, None)
                if not table and owner is g:
                    continue
                wrapped = tx.builder.wrap(table, AttrSource(base, n) if base is not None else None)
                if not isinstance(wrapped, DictVariable):
                    raise Unsupported(f"the hooks {n} of {self.describe()} cannot be read while tracing")
                tables.append((n, wrapped))
        post_kwargs = {**getattr(g, "_global_forward_hooks_with_kwargs", {}), **m._forward_hooks_with_kwargs}
        pre, post = [], []
        for n, table in tables:
            if n.endswith("_backward_pre_hooks") or n.endswith("_backward_hooks"):
                continue  # wrapped for their guard: empty (checked above)
            if n.endswith("_pre_hooks"):
                pre += [(hook, k in m._forward_pre_hooks_with_kwargs) for k, hook in table.items.items()]
            else:
                post += [(hook, k in post_kwargs) for k, hook in table.items.items()]
        return pre, post

    def _call_with_hooks(self, tx: Translator, forward: VariableTracker, pre: list[tuple[VariableTracker, bool]],
                         post: list[tuple[VariableTracker, bool]],
                         args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
        from ._containers import TupleVariable

        args_v: VariableTracker = TupleVariable(list(args))
        kwargs_v: VariableTracker = DictVariable(dict(kwargs))
        for hook, with_kwargs in pre:
            if with_kwargs:
                result = hook.call(tx, [self, args_v, kwargs_v], {})
                if not _is_none(result):
                    parts = result.iterate(tx) if isinstance(result, TupleVariable) else ()
                    if len(parts) != 2:
                        raise Unsupported(f"a forward pre-hook of {self.describe()} returned "
                                          "something other than (args, kwargs)")
                    args_v, kwargs_v = parts
            else:
                result = hook.call(tx, [self, args_v], {})
                if not _is_none(result):
                    args_v = result if isinstance(result, TupleVariable) else TupleVariable([result])
        if not isinstance(kwargs_v, DictVariable):
            raise Unsupported(f"a forward pre-hook of {self.describe()} returned non-dict kwargs")
        out = forward.call(tx, list(args_v.iterate(tx)), dict(kwargs_v.items))
        for hook, with_kwargs in post:
            hook_args = [self, args_v, kwargs_v, out] if with_kwargs else [self, args_v, out]
            result = hook.call(tx, hook_args, {})
            if not _is_none(result):
                out = result
        return out

    # -- special methods and containers --------------------------------------------------------

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name.startswith("__") and name.endswith("__"):
            method = self._special(tx, name)  # as the interpreter looks special methods up
            if method is None:
                raise Unsupported(f"{self.describe()} has no {name}")
            return method.call(tx, args, kwargs)
        return self.get_attr(tx, name).call(tx, args, kwargs)

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        it = self._special(tx, "__iter__")
        if it is None:
            raise Unsupported(f"iterating over {self.describe()}, which has no __iter__")
        return it.call(tx, [], {}).iterate(tx)

    def truth(self, tx: Translator) -> bool:
        for name in ("__bool__", "__len__"):
            method = self._special(tx, name)
            if method is not None:
                return method.call(tx, [], {}).truth(tx)
        return True

    def _entries(self) -> list[tuple[str, Any]]:
        return list(self.module.__dict__["_modules"].items())

    def _iter_values(self, tx: Translator, args: list[Any], kwargs: dict[str, Any]) -> VariableTracker:
        return _iterator([self._member_value(tx, "_modules", k) for k, _ in self._entries()])

    def _iter_keys(self, tx: Translator, args: list[Any], kwargs: dict[str, Any]) -> VariableTracker:
        return _iterator([ConstantVariable(k) for k, _ in self._entries()])

    def _iter_parameters(self, tx: Translator, args: list[Any], kwargs: dict[str, Any]) -> VariableTracker:
        # ParameterList.__iter__: ``self[i] for i in range(len(self))`` by attribute name
        size = self.get_attr(tx, "_size").as_constant()
        return _iterator([self.get_attr(tx, str(i)) for i in range(size)])

    def _len(self, tx: Translator, args: list[Any], kwargs: dict[str, Any]) -> VariableTracker:
        return ConstantVariable(len(self._entries()))

    def _index(self, tx: Translator, args: list[VariableTracker],
               kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``Sequential[i]`` / ``ModuleList[i]`` (an int, negative counted from the end), or a
        slice (a new container of the same children: see ModuleSliceVariable)."""
        import torch

        key = args[0].as_constant() if len(args) == 1 and not kwargs else None
        names = [k for k, _ in self._entries()]
        if isinstance(key, slice):
            if type(self.module) not in (torch.nn.ModuleList, torch.nn.Sequential):
                raise Unsupported(f"slicing {self.describe()} (its class builds the slice)")
            return ModuleSliceVariable(type(self.module),
                                       [self._member_value(tx, "_modules", k) for k in names[key]])
        if not isinstance(key, int) or isinstance(key, bool):
            raise Unsupported(f"indexing {self.describe()} with {args[0].describe() if args else 'nothing'}")
        if not -len(names) <= key < len(names):
            raise Unsupported(f"index {key} out of range for {self.describe()}")
        return self._member_value(tx, "_modules", names[key])

    def _key(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        key = args[0].as_constant()
        if key not in self.module.__dict__["_modules"]:
            raise Unsupported(f"{self.describe()} has no key {key!r}")
        return self._member_value(tx, "_modules", key)

    def _contains(self, tx: Translator, args: list[VariableTracker],
                  kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return ConstantVariable(args[0].as_constant() in self.module.__dict__["_modules"])

    def _keys(self, tx: Translator, args: list[Any], kwargs: dict[str, Any]) -> VariableTracker:
        from ._containers import TupleVariable

        return TupleVariable([ConstantVariable(k) for k, _ in self._entries()])

    def _values(self, tx: Translator, args: list[Any], kwargs: dict[str, Any]) -> VariableTracker:
        from ._containers import TupleVariable

        return TupleVariable([self._member_value(tx, "_modules", k) for k, _ in self._entries()])

    def _items(self, tx: Translator, args: list[Any], kwargs: dict[str, Any]) -> VariableTracker:
        from ._containers import TupleVariable

        return TupleVariable([TupleVariable([ConstantVariable(k), self._member_value(tx, "_modules", k)])
                              for k, _ in self._entries()])

class ModuleSliceVariable(VariableTracker):
    """``layers[a:b]`` of a ModuleList or Sequential: eager builds a new container of the
    same children. Modelled for what code does with it at once: iterate, index, ``len``,
    truth, ``isinstance``, and calling a Sequential slice (its children in turn, as
    ``Sequential.forward``; the new container has no hooks). Anything else (returning it,
    attributes, mutation) is Unsupported rather than answered by a stand-in."""

    __slots__ = ("children", "cls")

    def __init__(self, cls: type, children: list[VariableTracker]) -> None:
        super().__init__(None)
        self.cls = cls
        self.children = children

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"a slice of a {self.cls.__name__}"

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        return list(self.children)

    def truth(self, tx: Translator) -> bool:
        return bool(self.children)

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.children))
        if name == "__getitem__" and len(args) == 1 and not kwargs and args[0].is_constant():
            key = args[0].as_constant()
            if isinstance(key, slice):
                return ModuleSliceVariable(self.cls, self.children[key])
            if isinstance(key, int) and not isinstance(key, bool) and -len(self.children) <= key < len(self.children):
                return self.children[key]
        return super().call_method(tx, name, args, kwargs)

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        import torch

        if self.cls is not torch.nn.Sequential or len(args) != 1 or kwargs:
            return super().call(tx, args, kwargs)
        out = args[0]
        for child in self.children:
            out = child.call(tx, [out], {})
        return out


def _walk(module: NNModuleVariable, tx: Translator, args: list[Any], kwargs: dict[str, Any], *,
          walk: str) -> VariableTracker | None:
    """``modules()``, ``named_parameters()``, ...: torch's walk done at trace time, each item
    wrapped through its path of member sources. Every path is wrapped, the ones the walk
    skips as duplicates too, so the structure guards of the modules on the way and the
    aliasing guards of shared members pin what it found (untying weights recompiles)."""
    from torch import nn

    from ._containers import TupleVariable

    named = walk if walk.startswith("named_") else f"named_{walk}"
    helpers = (named, "named_modules", "_named_members")
    if args or kwargs or any(lookup_class_attribute(type(module.module), h) is not getattr(nn.Module, h)
                             for h in helpers):
        return None  # recurse=, prefix=, an override of the walk: the real code is inlined
    slot = {"parameters": "_parameters", "buffers": "_buffers"}.get(named[6:], "_modules")

    def tracker(path: str) -> VariableTracker:
        owner, parts = module, path.split(".") if path else []
        for part in parts[:-1]:
            owner = owner._member_value(tx, "_modules", part)
        return owner._member_value(tx, slot, parts[-1]) if parts else module

    real = getattr(module.module, named)
    if named == "named_children":
        every = [(k, v) for k, v in module.module._modules.items() if v is not None]
    else:
        every = list(real(remove_duplicate=False))
    for path, _ in every:
        tracker(path)
    items = [TupleVariable([ConstantVariable(path), tracker(path)]) if walk.startswith("named_")
             else tracker(path) for path, _ in real()]
    return _iterator(items)


def _iterator(items: list[VariableTracker]) -> VariableTracker:
    from ._containers import IteratorVariable

    return IteratorVariable(items)


def _type_of(v: VariableTracker) -> type:
    try:
        return v.python_type()
    except Exception:
        return object
