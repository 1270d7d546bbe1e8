"""VariableBuilder: real values from the frame become trackers, with the guards they need.

``wrap(value, source)`` picks the tracker for a real value reached through ``source`` and
installs, in the same step, the guards that make the trace valid for it: a tensor gets a
tensor-match guard and becomes a graph input; a constant gets an equality guard; a list a
type and length guard (its items are wrapped with item sources); a function its code,
defaults and closure; a module its structure. Values reached without a source (attributes
of trusted library modules, values made at trace time) get no guards.

Invariant: one tracker per source (cached), so aliasing and container mutations are seen
consistently, and each guard is installed once.
"""

from __future__ import annotations

import _thread
import collections
import enum
import functools
import os
import types
from typing import TYPE_CHECKING, Any

from kiln.guards import (
    AttrSource,
    DictKeysMatch,
    EqualsMatch,
    FunctionMatch,
    GenericAttrSource,
    IdMatch,
    IsNone,
    ItemSource,
    KeyAbsent,
    LengthMatch,
    ModuleStructureMatch,
    NoHasAttr,
    ObjectAliasing,
    Source,
    TensorMatch,
    TypeMatch,
    TypeSource,
    is_item_key,
)

from ._unsupported import MissingAttribute, Unsupported
from .variables._backend_flags import FlagHolderVariable, flag_holder_source
from .variables._base import VariableTracker
from .variables._builtins import BuiltinVariable, is_builtin_function
from .variables._constant import (
    ConstantVariable,
    FrozenObjectVariable,
    frozen_types,
    is_constant_value,
)
from .variables._containers import (
    DictVariable,
    FrameDictVariable,
    ListVariable,
    RangeVariable,
    TupleVariable,
)
from .variables._dict_views import instance_dict
from .variables._environ import EnvironVariable
from .variables._functions import UserFunctionVariable, UserMethodVariable
from .variables._functools import LruCacheVariable, PartialVariable
from .variables._modules import NNModuleVariable
from .variables._numpy import wrap_numpy_value
from .variables._objects import (
    MISSING,
    PythonModuleVariable,
    UserDefinedClassVariable,
    UserDefinedObjectVariable,
    bind_class_attribute,
    is_data_descriptor,
    lookup_class_attribute,
    read_through_hooks,
)
from .variables._operator_getters import GETTER_TYPES, GetterVariable
from .variables._torch import (
    ExitVariable,
    GradModeExit,
    GradModeVariable,
    TorchFunctionVariable,
    grad_mode_instance,
    is_context_manager_class,
    is_torch_function,
)

if TYPE_CHECKING:
    from ._output_graph import OutputGraph
    from ._translator import Translator

__all__ = ["VariableBuilder"]


# Trackers of mutable objects read from the frame: one per object, however it is reached.
_SHARED_BY_IDENTITY = (NNModuleVariable, UserDefinedObjectVariable, DictVariable, ListVariable)


def _equals_guardable(value: Any) -> bool:
    if value is None or type(value) in (bool, int, float, str, bytes):
        return True
    if type(value) is tuple:
        return all(_equals_guardable(v) for v in value)
    if isinstance(value, enum.Enum):
        return True
    tp = type(value)
    return tp.__module__ == "torch" and tp.__name__ in ("dtype", "device")


class VariableBuilder:
    """Wraps frame values for one trace; see the module docstring."""

    def __init__(self, output: OutputGraph) -> None:
        self.output = output

    def _guard(self, guard: Any) -> None:
        self.output.guards.add(guard)

    def wrap(self, value: Any, source: Source | None) -> VariableTracker:
        """The tracker for ``value``, reached through ``source`` (None: no guards)."""
        if isinstance(value, VariableTracker):
            return value
        if source is not None:
            cached = self.output.trackers.get(source)
            if cached is not None:
                return cached
            known = self.output.objects.get(id(value))
            if known is not None:
                # The same object by another path: guarded as the same object, so reads and
                # writes through either path meet in one tracker.
                self._guard(ObjectAliasing(known.source, source))
                self.output.trackers[source] = known
                return known
        tracker = self._wrap(value, source)
        if source is not None:
            self.output.trackers[source] = tracker
            if isinstance(tracker, _SHARED_BY_IDENTITY):
                self.output.objects[id(value)] = tracker
        return tracker

    def _wrap(self, value: Any, source: Source | None) -> VariableTracker:
        import torch

        g = source is not None
        if isinstance(value, torch.Tensor):
            if not g:
                raise Unsupported("a tensor reached without a source (a library global)")
            with self.output.entry_state():
                first = id(value) not in self.output.tensor_inputs
                tracker = self.output.add_tensor_input(source, value)
                if first:
                    # A tensor reached a second way (tied weights) is guarded by aliasing.
                    # Sizes and strides that are symbols are left to the shape guards.
                    fake = tracker.fake
                    self._guard(TensorMatch.from_tensor(
                        source, value,
                        dynamic_sizes=[d for d, v in enumerate(fake.shape) if type(v) is not int],
                        dynamic_strides=[d for d, v in enumerate(fake.stride()) if type(v) is not int]))
                return tracker
        numpy_tracker = wrap_numpy_value(self, value, source)  # ndarrays, numpy functions, dtypes
        if numpy_tracker is not None:
            return numpy_tracker
        if value is os.environ:
            return EnvironVariable()  # each variable read is guarded on its own
        if type(value) is GradModeExit:  # a resume function inside a grad-mode block
            if g:
                self._guard(TypeMatch(source, GradModeExit))
                self._guard(EqualsMatch(AttrSource(source, "previous"), value.previous))
            self.output.enter_outer_grad_block(value.previous)
            return ExitVariable(GradModeVariable.entered(torch.is_grad_enabled(), value.previous))
        manager = grad_mode_instance(value)
        if manager is not None:
            if g:
                self._guard(TypeMatch(source, type(value)))
            return manager
        if isinstance(value, torch.nn.Module):
            if g:
                self._guard(ModuleStructureMatch.from_module(source, value, ordered=True))
            return NNModuleVariable(value, source)
        if g and type(value) in (int, float) and source in self.output.dynamic_numbers:
            self._guard(TypeMatch(source, type(value)))
            return self.output.add_number_input(source, value)
        if g and type(value) in (set, frozenset) and all(v is None or type(v) in (int, str, bytes) for v in value):
            from .variables._sets import wrap_frame_set

            return wrap_frame_set(self, value, source)  # its items, in their order, guarded
        if is_constant_value(value) and not isinstance(value, tuple):
            if g:
                if value is None:
                    self._guard(IsNone(source))
                elif _equals_guardable(value):
                    self._guard(EqualsMatch(source, value))
                else:
                    self._guard(IdMatch(source, value))  # torch.layout, memory_format, ...
            return ConstantVariable(value, source)
        holder = flag_holder_source(value)
        if holder is not None:  # torch.backends.cudnn, torch.backends.cuda.matmul: switches read by value
            if g:
                self._guard(IdMatch(source, value))
            return FlagHolderVariable(value, holder)
        if isinstance(value, types.ModuleType):
            if g:
                self._guard(IdMatch(source, value))
            return PythonModuleVariable(value, source)
        if type(value) in GETTER_TYPES:  # operator.itemgetter / attrgetter: immutable
            if g:
                self._guard(IdMatch(source, value))
            return GetterVariable(value, source)
        if is_builtin_function(value):
            if g:
                self._guard(IdMatch(source, value))
            return BuiltinVariable(value, source)
        inline = getattr(value, "_torchdynamo_inline", None) if isinstance(value, torch.jit.ScriptFunction) else None
        if isinstance(inline, types.FunctionType) and g:
            # a torch.jit.script function: its Python original is traced (as torch.compile
            # does), so symbolic sizes flow through it (TorchScript would read them as ints)
            self._guard(IdMatch(source, value))
            return self.wrap(inline, AttrSource(source, "_torchdynamo_inline"))
        if is_torch_function(value) or is_context_manager_class(value):
            if g and isinstance(value, types.MethodType):
                # ``Fn.apply`` of an autograd.Function: a new bound method at every read, so
                # what it binds is guarded, not the bound object
                self._guard(IdMatch(AttrSource(source, "__func__"), value.__func__))
                self._guard(IdMatch(AttrSource(source, "__self__"), value.__self__))
            elif g:
                self._guard(IdMatch(source, value))
            return TorchFunctionVariable(value)
        if type(value) is functools.partial:
            if not g:
                raise Unsupported("a functools.partial reached without a source")
            self._guard(TypeMatch(source, functools.partial))
            func = self.wrap(value.func, AttrSource(source, "func"))
            args = self.wrap(value.args, AttrSource(source, "args"))
            keywords = self.wrap(value.keywords, AttrSource(source, "keywords"))
            return PartialVariable(func, args.iterate(None), {k: keywords.getitem(None, ConstantVariable(k))
                                                              for k in value.keywords}, source, real=value)
        if type(value) is functools._lru_cache_wrapper:  # the wrapped function is inlined
            if g:
                self._guard(IdMatch(source, value))
            return LruCacheVariable(self.wrap(value.__wrapped__, AttrSource(source, "__wrapped__") if g else None),
                                    value, source)
        if value is torch.finfo or value is torch.iinfo:
            return TorchFunctionVariable(value)  # evaluated at trace time
        if isinstance(value, types.FunctionType):
            if g:
                self._guard(FunctionMatch.from_function(source, value))
            return UserFunctionVariable(value, source)
        if isinstance(value, types.MethodType):
            self_source = AttrSource(source, "__self__") if g else None
            func_source = AttrSource(source, "__func__") if g else None
            owner = self.wrap(value.__self__, self_source)
            func = value.__func__
            if not isinstance(func, types.FunctionType):
                raise Unsupported(f"bound method {value!r} is not a Python function")
            if g:
                self._guard(FunctionMatch.from_function(func_source, func))
            return UserMethodVariable(func, owner)
        if isinstance(value, type):
            if g:
                self._guard(IdMatch(source, value))
            return UserDefinedClassVariable(value, source)
        return self._wrap_container_or_object(value, source)

    def _wrap_container_or_object(self, value: Any, source: Source | None) -> VariableTracker:
        g = source is not None
        tp = type(value)
        if tp is list or isinstance(value, tuple):
            if g:
                self._guard(TypeMatch(source, tp))
                self._guard(LengthMatch(source, len(value)))
            items = [self.wrap(v, ItemSource(source, i) if g else None) for i, v in enumerate(value)]
            if tp is list:
                return ListVariable(items, source)
            return TupleVariable(items, source, tuple_type=tp)
        if tp is collections.defaultdict and g:
            from .variables._defaultdict import wrap_frame_defaultdict

            return wrap_frame_defaultdict(self, value, source)
        if tp is dict or tp is collections.OrderedDict or (tp is types.MappingProxyType and g):
            # (a mappingproxy stays read-only: its tracker answers mutations with eager's errors)
            if not all(is_item_key(k) for k in value):
                raise Unsupported(f"dict {source} has keys kiln cannot guard on")
            if g:
                self._guard(TypeMatch(source, tp))
                self._guard(DictKeysMatch(source, tuple(value)))
                return FrameDictVariable(value, source, self)  # values wrapped when read
            return DictVariable({k: self.wrap(v, None) for k, v in value.items()})
        if tp is range:
            if g:
                self._guard(TypeMatch(source, range))
                for attr in ("start", "stop", "step"):
                    self._guard(EqualsMatch(AttrSource(source, attr), getattr(value, attr)))
            return RangeVariable(value)
        if not g:
            if isinstance(value, frozen_types()):
                return FrozenObjectVariable(value)  # dataclass fields and the like: read-only
            raise Unsupported(f"a {tp.__name__} object reached without a source")
        self._guard(TypeMatch(source, tp))
        return UserDefinedObjectVariable(value, source)

    # -- attributes --------------------------------------------------------------------------

    def read_attribute(self, tx: Translator, owner: VariableTracker, obj: Any,
                       name: str, *, plain: bool = False) -> VariableTracker:
        """``obj.name`` as Python looks it up, for the tracker ``owner`` of ``obj``: the
        class's own ``__getattribute__`` when it defines one in Python (inlined), else
        ``object.__getattribute__`` (data descriptors, the instance dict, class
        attributes); when that finds nothing, the class's ``__getattr__`` (inlined).
        ``plain``: ``object.__getattribute__`` alone, as ``super().__getattribute__(name)``
        inside such a hook calls it."""
        if plain:
            return self._generic_attribute(tx, owner, obj, name, GenericAttrSource)
        return read_through_hooks(tx, owner, type(obj), name,
                                  lambda: self._generic_attribute(tx, owner, obj, name, AttrSource))

    def _guard_unset(self, owner: VariableTracker, cls: type, name: str) -> None:
        # ``not hasattr`` says "unset" only where no __getattr__/__getattribute__ of the
        # class could answer instead (a module's __getattr__ would)
        hooks = (lookup_class_attribute(cls, "__getattr__"), lookup_class_attribute(cls, "__getattribute__"))
        if hooks[0] is not MISSING or hooks[1] is not object.__getattribute__:
            raise Unsupported(f"the unset slot {name!r} of {owner.describe()} (its class has attribute hooks)")
        self._guard(NoHasAttr(owner.source, name))

    def _generic_attribute(self, tx: Translator, owner: VariableTracker, obj: Any, name: str,
                           step: type) -> VariableTracker:
        # object.__getattribute__'s order. Under a Python __getattribute__ the source is a
        # GenericAttrSource: reading it must not run the hook again (the hook may be the
        # very frame being replaced).
        written = self.output.written_attribute(owner, name)
        if written is not None:
            return written
        if (name == "__dict__" and owner.source is not None
                and isinstance(owner, (UserDefinedObjectVariable, NNModuleVariable))
                and (view := instance_dict(tx, owner, obj)) is not None):
            return view  # live: sees the trace's stores to the object
        if name == "__class__" and owner.source is not None:
            # type(obj): the type guard the object already has covers it
            cls_source = TypeSource(owner.source)
            cls_tracker = self.output.trackers.get(cls_source)
            if cls_tracker is None:
                self._guard(TypeMatch(owner.source, type(obj)))
                cls_tracker = self.output.trackers[cls_source] = UserDefinedClassVariable(type(obj), cls_source)
            return cls_tracker
        source = step(owner.source, name) if owner.source is not None else None
        cls_attr = lookup_class_attribute(type(obj), name)
        if cls_attr is not MISSING and is_data_descriptor(cls_attr):
            if isinstance(cls_attr, property) and isinstance(cls_attr.fget, types.FunctionType):
                return bind_class_attribute(tx, owner, cls_attr)
            try:
                value = object.__getattribute__(obj, name)
            except AttributeError:
                if owner.source is not None:  # an unset slot: guard that it stays unset
                    self._guard_unset(owner, type(obj), name)
                raise MissingAttribute(f"{owner.describe()} has no attribute {name!r}") from None
            return self.wrap(value, source)
        try:
            inst = object.__getattribute__(obj, "__dict__")
        except AttributeError:
            # a threading.local: its instance dict is the calling thread's (its ``__dict__``);
            # the guards read it through the same attributes, in the thread that calls
            inst = obj.__dict__ if isinstance(obj, _thread._local) else None
        inst = inst if isinstance(inst, dict) else None
        if inst is not None and name in inst:
            return self.wrap(inst[name], source)
        if cls_attr is not MISSING:
            if owner.source is not None and inst is not None:
                # an instance attribute of that name set later (``m.forward = ...``) answers
                self._guard(KeyAbsent(step(owner.source, "__dict__"), name))
            return bind_class_attribute(tx, owner, cls_attr, source)
        if owner.source is not None and inst is not None:
            # the answer "missing" holds while the instance dict has no such key
            self._guard(KeyAbsent(step(owner.source, "__dict__"), name))
        raise MissingAttribute(f"{owner.describe()} has no attribute {name!r}")
