"""Python modules, classes and other user objects read from the frame.

Attribute reads on these go back to the real object and wrap what they find with a source
one step longer (``AttrSource``), so every value the trace relies on is guarded. Modules of
trusted libraries (torch, math, operator, ...) are the exception: their attributes are
treated as fixed, which keeps guards on ``torch.relu`` and friends off the hot path.
"""

from __future__ import annotations

import collections
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._unsupported import MissingAttribute, Unsupported
from ._base import VariableTracker

if TYPE_CHECKING:
    from kiln.guards import Source

    from .._translator import Translator

__all__ = [
    "BaseMethodVariable",
    "ExceptionVariable",
    "NewObjectVariable",
    "PythonModuleVariable",
    "SuperVariable",
    "UserDefinedClassVariable",
    "UserDefinedObjectVariable",
    "is_trusted_module",
]

_TRUSTED_ROOTS = frozenset({"torch", "math", "operator", "builtins", "functools", "itertools",
                            "collections", "typing", "numbers", "enum", "dataclasses"})


def is_trusted_module(module: types.ModuleType) -> bool:
    """Whether ``module``'s attributes are treated as fixed (no guards on them)."""
    return module.__name__.split(".")[0] in _TRUSTED_ROOTS


def lookup_class_attribute(cls: type, name: str, start: int = 0) -> Any:
    """``name`` in the ``__dict__`` of ``cls.__mro__[start:]`` (first found), or MISSING."""
    for klass in cls.__mro__[start:]:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return MISSING


MISSING: Any = object()


def bind_class_attribute(tx: Translator, owner: VariableTracker, attr: Any,
                         source: Any = None) -> VariableTracker:
    """What ``owner.name`` gives when the class attribute ``attr`` answers it: a bound
    method, a property's value (its getter inlined), a static or class method, or the
    attribute itself (wrapped through ``source`` when there is one); any other descriptor
    is Unsupported (its ``__get__`` would decide)."""
    from kiln.guards import AttrSource, TypeSource

    from ._functions import UserMethodVariable
    from ._modules import NNModuleVariable

    if isinstance(attr, types.FunctionType):
        class_source = None
        if owner.source is not None and isinstance(source, AttrSource):
            class_source = AttrSource(TypeSource(owner.source), source.attr)
        return UserMethodVariable(attr, owner, class_source=class_source)
    if is_base_method(attr) and isinstance(owner, (UserDefinedObjectVariable, NewObjectVariable,
                                                    NNModuleVariable)):
        return BaseMethodVariable(attr, owner)
    if isinstance(attr, property) and isinstance(attr.fget, types.FunctionType):
        return tx.inline_function(attr.fget, [owner], {})
    if isinstance(attr, staticmethod):
        return tx.builder.wrap(attr.__func__, None)
    if isinstance(attr, classmethod):
        return UserMethodVariable(attr.__func__, UserDefinedClassVariable(owner.python_type()))
    get = lookup_class_attribute(type(attr), "__get__")
    if isinstance(get, types.FunctionType) and isinstance(owner, (UserDefinedObjectVariable, NewObjectVariable)):
        # a descriptor written in Python (torch.distributions' lazy_property): its __get__
        # inlined, with the descriptor as read from the class
        descriptor = tx.builder.wrap(attr, source) if source is not None else UserDefinedObjectVariable(attr)
        return UserMethodVariable(get, descriptor).call(
            tx, [owner, UserDefinedClassVariable(owner.python_type())], {})
    if hasattr(type(attr), "__get__"):
        # another descriptor (functools.cached_property, partialmethod, a method of a builtin
        # base class): Python would call its __get__, which is not modelled
        raise Unsupported(f"the class attribute {type(attr).__name__} of {owner.describe()} "
                          "is a descriptor kiln does not model")
    return tx.builder.wrap(attr, source)


def is_base_method(attr: Any) -> bool:
    """Whether ``attr`` is a method of ``object`` or ``dict`` that BaseMethodVariable models."""
    return (isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType))
            and attr.__objclass__ in (object, dict, collections.OrderedDict))


def _missing(what: str, name: str) -> Unsupported:
    return MissingAttribute(f"{what} has no attribute {name!r}")


class PythonModuleVariable(VariableTracker):
    """A Python module (``torch``, ``F``, a user module)."""

    __slots__ = ("module",)

    def __init__(self, module: types.ModuleType, source: Source | None = None) -> None:
        super().__init__(source)
        self.module = module

    def python_type(self) -> type:
        return types.ModuleType

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.module

    def describe(self) -> str:
        return f"module {self.module.__name__}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        try:
            value = getattr(self.module, name)
        except AttributeError:
            raise _missing(self.describe(), name) from None
        from kiln.guards import AttrSource

        trusted = is_trusted_module(self.module) or self.source is None
        source = None if trusted else AttrSource(self.source, name)
        return tx.builder.wrap(value, source)


class UserDefinedClassVariable(VariableTracker):
    """A class (``MyConfig``, ``torch.Tensor``)."""

    __slots__ = ("cls",)

    def __init__(self, cls: type, source: Source | None = None) -> None:
        super().__init__(source)
        self.cls = cls

    def python_type(self) -> type:
        return type(self.cls)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.cls

    def describe(self) -> str:
        return f"class {self.cls.__qualname__}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        try:
            value = getattr(self.cls, name)
        except AttributeError:
            raise _missing(self.describe(), name) from None
        if name in ("__name__", "__qualname__", "__module__"):
            from ._constant import ConstantVariable

            return ConstantVariable(value)  # part of the class, whose identity is guarded
        from kiln.guards import AttrSource

        from ._modules import is_modelled_function

        source = AttrSource(self.source, name) if self.source is not None else None
        if is_modelled_function(value):  # ``nn.Module.__call__(m, x)``: the tracker answers
            from ._functions import UserFunctionVariable

            return UserFunctionVariable(value)
        if is_base_method(value):  # ``object.__getattribute__(self, name)`` and the like
            return UnboundBaseMethodVariable(value, source)
        return tx.builder.wrap(value, source)

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return tx.construct(self.cls, args, kwargs)


class UserDefinedObjectVariable(VariableTracker):
    """An instance of a user class; attribute reads are guarded through its source."""

    __slots__ = ("contents", "obj")

    def __init__(self, obj: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.obj = obj
        self.contents: VariableTracker | None = None

    def dict_contents(self, tx: Translator) -> VariableTracker:
        """The items of an instance of a dict subclass, as a read-only dict tracker (its
        keys guarded, each value wrapped through its item source)."""
        from kiln.guards import DictKeysMatch, is_item_key

        from ._containers import FrameDictVariable

        obj = self.obj
        if self.contents is None and self.source is not None and type(obj).__getitem__ is not dict.__getitem__:
            from ._stored_dict import stored_items

            self.contents = stored_items(tx, obj, self.source, self.describe())  # read without __getitem__
        if self.contents is None:
            if self.source is None:
                raise Unsupported(f"reading the items of {self.describe()}")
            keys = tuple(dict.keys(obj))
            if not all(is_item_key(k) for k in keys):
                raise Unsupported(f"{self.describe()} has keys kiln cannot guard on")
            tx.output.guards.add(DictKeysMatch(self.source, keys))
            self.contents = FrameDictVariable(obj, self.source, tx.builder)  # values read lazily
        return self.contents

    def python_type(self) -> type:
        return type(self.obj)

    def describe(self) -> str:
        what = f"{type(self.obj).__qualname__} object"
        return f"{what} {self.source}" if self.source is not None else f"a {what}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        return tx.builder.read_attribute(tx, self, self.obj, name)

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        if isinstance(self.obj, dict) and lookup_class_attribute(type(self.obj), "__iter__") in (
                dict.__iter__, collections.OrderedDict.__iter__):
            return self.dict_contents(tx).iterate(tx)  # a dict subclass iterates over its keys
        return _iterate_object(tx, self)

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        import logging

        if name in _LOG_METHODS and isinstance(self.obj, (logging.Logger, logging.LoggerAdapter)):
            # A log call is replayed by the compiled code after the graph has run, with the
            # message made at trace time (the logger decides then whether to emit it).
            from ._constant import ConstantVariable

            if self.source is None:
                raise Unsupported(f"logging through {self.describe()}, reached without a source")
            tx.output.replay_call((self, name), list(args), dict(kwargs))
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def store_attr(self, tx: Translator, name: str, value: VariableTracker, *, raw: bool = False) -> None:
        """``obj.name = value``: through the class's Python ``__setattr__`` when it has one
        (inlined), else a plain store (``raw``: ``object.__setattr__`` itself)."""
        if not raw and store_through_hook(tx, self, type(self.obj), name, value):
            return
        if is_data_descriptor(lookup_class_attribute(type(self.obj), name)):
            raise Unsupported(f"assigning {name!r} of {self.describe()} runs a descriptor (property)")
        tx.output.store_attribute(self, name, value)

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        result = _call_method(tx, self, type(self.obj), args, kwargs)
        return result if result is not None else super().call(tx, args, kwargs)


_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log",
                          "warning_once", "info_once"})

_DICT_READS = frozenset({"get", "keys", "values", "items", "__getitem__", "__contains__", "__len__",
                         "__iter__", "copy"})


class BaseMethodVariable(VariableTracker):
    """A method of ``object`` or ``dict`` reached on a user object whose class inherits it
    (``super().__setattr__(k, v)``, ``super().get(k)``, ``dict.__setitem__`` of a dict
    subclass), or on a module: ``object.__setattr__`` stores the attribute,
    ``object.__getattribute__`` reads it without the class's hooks; dict methods act on the
    object's items (those of an object from the frame are read-only)."""

    __slots__ = ("method", "owner")

    def __init__(self, method: Any, owner: VariableTracker) -> None:
        super().__init__(None)
        self.method = method
        self.owner = owner

    def describe(self) -> str:
        return f"{self.method.__objclass__.__name__}.{self.method.__name__} of {self.owner.describe()}"

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        from ._constant import ConstantVariable
        from ._modules import NNModuleVariable

        name, owner = self.method.__name__, self.owner
        if self.method.__objclass__ is object:
            if name == "__setattr__" and len(args) == 2 and not kwargs and args[0].is_constant():
                if isinstance(owner, NewObjectVariable):
                    owner.store_attr(tx, args[0].as_constant(), args[1], force=True)
                else:
                    owner.store_attr(tx, args[0].as_constant(), args[1], raw=True)
                return ConstantVariable(None)
            if name == "__init__" and not args and not kwargs:
                return ConstantVariable(None)
            if name == "__getattribute__" and len(args) == 1 and not kwargs and args[0].is_constant():
                if isinstance(owner, UserDefinedObjectVariable):
                    return tx.builder.read_attribute(tx, owner, owner.obj, args[0].as_constant(), plain=True)
                if isinstance(owner, NewObjectVariable):
                    return owner.get_attr(tx, args[0].as_constant(), plain=True)
                if isinstance(owner, NNModuleVariable):
                    return tx.builder.read_attribute(tx, owner, owner.module, args[0].as_constant(), plain=True)
            raise Unsupported(f"calling {self.describe()}")
        if isinstance(owner, NewObjectVariable) and owner.items is not None:
            if name == "__init__":
                if args:
                    owner.items.call_method(tx, "update", args, {})
                if kwargs:
                    owner.items.call_method(tx, "update", [], kwargs)
                return ConstantVariable(None)
            return owner.items.call_method(tx, name, args, kwargs)
        if isinstance(owner, UserDefinedObjectVariable) and isinstance(owner.obj, dict) and name in _DICT_READS:
            return owner.dict_contents(tx).call_method(tx, name, args, kwargs)
        raise Unsupported(f"calling {self.describe()}")


class UnboundBaseMethodVariable(VariableTracker):
    """``object.__setattr__`` / ``object.__getattribute__`` / a dict method read off the
    class itself: called with an object kiln models attribute by attribute first, it is that
    object's BaseMethodVariable; called with anything else, the builtin as before."""

    __slots__ = ("method",)

    def __init__(self, method: Any, source: Source | None) -> None:
        super().__init__(source)
        self.method = method

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.method

    def describe(self) -> str:
        return f"{self.method.__objclass__.__name__}.{self.method.__name__}"

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        from ._modules import NNModuleVariable

        if args and isinstance(args[0], (UserDefinedObjectVariable, NewObjectVariable, NNModuleVariable)):
            return BaseMethodVariable(self.method, args[0]).call(tx, args[1:], kwargs)
        return tx.builder.wrap(self.method, self.source).call(tx, args, kwargs)


def is_data_descriptor(attr: Any) -> bool:
    """Whether a class attribute takes precedence over the instance dict (property, slot)."""
    tp = type(attr)
    return hasattr(tp, "__set__") or hasattr(tp, "__delete__")


def read_through_hooks(tx: Translator, owner: VariableTracker, cls: type, name: str,
                       generic: Callable[[], VariableTracker]) -> VariableTracker:
    """``obj.name`` the way Python's attribute slot does it: the class's own Python
    ``__getattribute__`` when it defines one (inlined), else ``generic()`` (the lookup of
    ``object.__getattribute__``); when that raises AttributeError, the class's Python
    ``__getattr__`` (nn.Module's own is answered by the module tracker: see
    ``NNModuleVariable.call_torch_function``)."""
    from ._constant import ConstantVariable
    from ._functions import UserMethodVariable

    hook = lookup_class_attribute(cls, "__getattribute__")
    fallback = lookup_class_attribute(cls, "__getattr__")
    try:
        if isinstance(hook, types.FunctionType):
            return UserMethodVariable(hook, owner).call(tx, [ConstantVariable(name)], {})
        return generic()
    except MissingAttribute:
        if not isinstance(fallback, types.FunctionType):
            raise
    return UserMethodVariable(fallback, owner).call(tx, [ConstantVariable(name)], {})


def store_through_hook(tx: Translator, owner: VariableTracker, cls: type, name: str,
                       value: VariableTracker) -> bool:
    """``obj.name = value`` through the class's Python ``__setattr__`` (inlined); False when
    the class has none, and the store is a plain one."""
    setter = lookup_class_attribute(cls, "__setattr__")
    if not isinstance(setter, types.FunctionType):
        return False
    from ._constant import ConstantVariable
    from ._functions import UserMethodVariable

    UserMethodVariable(setter, owner).call(tx, [ConstantVariable(name), value], {})
    return True


def user_special_method(v: VariableTracker, name: str) -> Any:
    """The Python function defining the special method ``name`` for ``v``'s class, when
    ``v`` is an object kiln models attribute by attribute, or a module (torch's container
    methods among them, which the module tracker answers when called); None otherwise."""
    from ._modules import NNModuleVariable

    if not isinstance(v, (UserDefinedObjectVariable, NewObjectVariable, NNModuleVariable)):
        return None
    attr = lookup_class_attribute(v.python_type(), name)
    return attr if isinstance(attr, types.FunctionType) else None


def call_special_method(tx: Translator, v: VariableTracker, name: str,
                        args: list[VariableTracker]) -> VariableTracker | None:
    """``type(v).name(v, *args)`` inlined, when the class defines it in Python; else None."""
    fn = user_special_method(v, name)
    if fn is None:
        return None
    from ._functions import UserMethodVariable

    result = UserMethodVariable(fn, v).call(tx, args, {})
    if name == "__iter__":
        return _as_iterator(result)
    return result


def _as_iterator(it: VariableTracker) -> VariableTracker:
    """What ``__iter__`` returned, as an iterator tracker when its class defines ``__next__``
    in Python (advanced by inlining ``__next__``); otherwise unchanged."""
    from ._containers import IteratorVariable

    next_fn = None if isinstance(it, IteratorVariable) else user_special_method(it, "__next__")
    if next_fn is None:
        return it
    from ._functions import UserMethodVariable
    from ._iterators import UserIteratorVariable

    return UserIteratorVariable(it, UserMethodVariable(next_fn, it))


def _iterate_object(tx: Translator, v: VariableTracker) -> list[VariableTracker]:
    it = call_special_method(tx, v, "__iter__", [])
    if it is None:
        return VariableTracker.iterate(v, tx)
    return it.iterate(tx)


def _call_method(tx: Translator, owner: VariableTracker, cls: type, args: list[VariableTracker],
                 kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    call = lookup_class_attribute(cls, "__call__")
    if isinstance(call, types.FunctionType):
        from ._functions import UserMethodVariable

        return UserMethodVariable(call, owner).call(tx, args, kwargs)
    return None


class NewObjectVariable(VariableTracker):
    """An instance of a plain Python class created while tracing (``Point(x, y)``), or of a
    subclass of dict (a dataclass output like transformers' ``ModelOutput``).

    Its attributes (and, for a dict subclass, its items) live here as trackers; if the
    object outlives the trace (returned, or stored into a frame object), the replacement
    code builds it: ``cls.__new__(cls)``, its items, then its final ``__dict__``.
    """

    __slots__ = ("attrs", "cls", "items")

    def __init__(self, cls: type) -> None:
        from ._containers import DictVariable

        super().__init__(None)
        self.cls = cls
        self.attrs: dict[str, VariableTracker] = {}
        self.items = DictVariable({}) if issubclass(cls, dict) else None

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"a new {self.cls.__qualname__} object"

    def get_attr(self, tx: Translator, name: str, *, plain: bool = False) -> VariableTracker:
        """``obj.name``: through the class's Python ``__getattribute__`` when it has one (and
        its ``__getattr__`` when the lookup fails); ``plain``: ``object.__getattribute__``."""
        if plain:
            return self._generic_attr(tx, name)
        return read_through_hooks(tx, self, self.cls, name, lambda: self._generic_attr(tx, name))

    def _generic_attr(self, tx: Translator, name: str) -> VariableTracker:
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return UserDefinedClassVariable(self.cls)
        if name == "__dict__":
            from ._containers import DictVariable

            view = DictVariable({})
            view.items = self.attrs  # the same dict: writes through the view are attributes
            return view
        attr = lookup_class_attribute(self.cls, name)
        if attr is MISSING:
            raise _missing(self.describe(), name)
        return bind_class_attribute(tx, self, attr, class_dict_source(self.cls, name))

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        if self.items is not None and user_special_method(self, "__iter__") is None:
            return self.items.iterate(tx)
        return _iterate_object(tx, self)

    def truth(self, tx: Translator) -> bool:
        result = call_special_method(tx, self, "__bool__", []) or call_special_method(tx, self, "__len__", [])
        if result is not None:
            return result.truth(tx)
        return self.items.truth(tx) if self.items is not None else True

    def store_attr(self, tx: Translator, name: str, value: VariableTracker, *, force: bool = False) -> None:
        if not force:
            if store_through_hook(tx, self, self.cls, name, value):
                return
            if lookup_class_attribute(self.cls, "__setattr__") is not object.__setattr__:
                raise Unsupported(f"assigning {name!r} of {self.describe()}, whose class defines __setattr__")
        if is_data_descriptor(lookup_class_attribute(self.cls, name)):
            raise Unsupported(f"assigning {name!r} of {self.describe()} runs a descriptor")
        self.attrs[name] = value

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        result = _call_method(tx, self, self.cls, args, kwargs)
        return result if result is not None else super().call(tx, args, kwargs)


def class_dict_source(cls: type, name: str) -> Source | None:
    """Where the class attribute ``name`` of ``cls`` is read from by import path: the
    ``__dict__`` entry of the class in the MRO that defines it
    (``M['torch.distributions.normal'].Normal.__dict__['arg_constraints']``), so what it holds
    is guarded like a frame value; None when that class is not importable."""
    from kiln.guards import AttrSource, ItemSource, ModuleSource, importable_path

    klass = next((k for k in cls.__mro__ if name in k.__dict__), None)
    if klass is None or importable_path(klass) is None:
        return None
    source: Source = ModuleSource(klass.__module__)
    for part in klass.__qualname__.split("."):
        source = AttrSource(source, part)
    return ItemSource(AttrSource(source, "__dict__"), name)


def new_object(cls: type, attrs: dict[str, Any], items: dict[Any, Any] | None = None) -> Any:
    """Build an object the way a traced constructor left it (used by replacement code)."""
    if items is None:
        obj = object.__new__(cls)
    else:
        obj = dict.__new__(cls)
        base = collections.OrderedDict if issubclass(cls, collections.OrderedDict) else dict
        for k, v in items.items():
            base.__setitem__(obj, k, v)  # the builtin's own store, not the class's override
    obj.__dict__.update(attrs)
    return obj


def plain_copyable(cls: type) -> bool:
    """Whether ``copy.copy``/``copy.deepcopy`` of an instance is ``cls.__new__(cls)`` plus
    its ``__dict__`` copied (no copy hooks of its own, no slots)."""
    hooks = ("__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__")
    return can_construct(cls) and not issubclass(cls, dict) and all(
        lookup_class_attribute(cls, h) in (MISSING, getattr(object, h, MISSING)) for h in hooks)


def can_construct(cls: type) -> bool:
    """Whether ``cls(...)`` can be traced: a plain Python class built by ``object.__new__``
    (or ``dict.__new__`` for a dict subclass), whose metaclass does not change calls."""
    import torch

    meta = type(cls)
    if not (meta is type or (issubclass(meta, type) and meta.__call__ is type.__call__)):
        return False
    plain = cls.__new__ is object.__new__ or (issubclass(cls, dict) and cls.__new__ is dict.__new__)
    return (plain and "__slots__" not in cls.__dict__
            and not issubclass(cls, (BaseException, torch.nn.Module, torch.Tensor)))


class ExceptionVariable(VariableTracker):
    """An exception object made while tracing, to be raised (``AttributeError(...)``)."""

    __slots__ = ("args", "cls")

    def __init__(self, cls: type, args: list[VariableTracker]) -> None:
        super().__init__(None)
        self.cls = cls
        self.args = args

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        message = ""
        if self.args and self.args[0].is_constant():
            message = f": {self.args[0].as_constant()}"
        return f"{self.cls.__name__}{message}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        if name == "args":
            from ._containers import TupleVariable

            return TupleVariable(list(self.args))
        if name == "value" and issubclass(self.cls, StopIteration) and self.args:
            return self.args[0]  # without arguments it may be a generator's (``next()`` drops it)
        return super().get_attr(tx, name)


class SuperVariable(VariableTracker):
    """``super()`` / ``super(cls, obj)``: attribute lookup starting after ``cls`` in the MRO."""

    __slots__ = ("cls", "obj")

    def __init__(self, cls: type, obj: VariableTracker) -> None:
        super().__init__(None)
        self.cls = cls
        self.obj = obj

    def describe(self) -> str:
        return f"super({self.cls.__qualname__}, {self.obj.describe()})"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        if isinstance(self.obj, UserDefinedClassVariable) and isinstance(self.obj.cls, type) \
                and issubclass(self.obj.cls, self.cls):
            return self._class_attr(tx, name)
        mro = self.obj.python_type().__mro__
        start = mro.index(self.cls) + 1 if self.cls in mro else len(mro)
        attr = lookup_class_attribute(self.obj.python_type(), name, start)
        if attr is MISSING:
            raise _missing(self.describe(), name)
        bound = bind_class_attribute(tx, self.obj, attr)
        if isinstance(attr, types.WrapperDescriptorType) and not isinstance(bound, BaseMethodVariable):
            raise Unsupported(f"calling {name} of a builtin base class through super()")
        return bound

    def _class_attr(self, tx: Translator, name: str) -> VariableTracker:
        """``super(cls, klass).name`` (``super()`` in a classmethod): the lookup in
        ``klass.__mro__`` after ``cls``; a classmethod binds to ``klass``, a plain function
        stays unbound, a staticmethod is its function."""
        klass = self.obj.cls
        mro = klass.__mro__
        attr = lookup_class_attribute(klass, name, mro.index(self.cls) + 1)
        if attr is MISSING:
            raise _missing(self.describe(), name)
        if isinstance(attr, classmethod) and isinstance(attr.__func__, types.FunctionType):
            from ._functions import UserMethodVariable

            return UserMethodVariable(attr.__func__, self.obj)
        if isinstance(attr, staticmethod):
            attr = attr.__func__
        if isinstance(attr, (types.FunctionType, type)) or not hasattr(type(attr), "__get__"):
            return tx.builder.wrap(attr, None)
        raise Unsupported(f"super() of class {klass.__qualname__}: {name} is a descriptor kiln does not model")
