"""Library-style code that cases call into, the way model code calls into transformers.

Its functions are inlined from another module than the case's own, so what they read from
their globals is reached as ``M['library_code'].name``; they import inside functions, ask
``torch.compiler.is_compiling()``, keep registries in dict subclasses, build dataclass
outputs that are dicts (like ``ModelOutput``), and inspect signatures.
"""

import dataclasses
import inspect
from collections import OrderedDict

import torch

SCALE = 3.0
ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh}


def scaled(x):
    return x * SCALE


def activation(name):
    return ACTIVATIONS[name]


def with_local_imports(x):
    import math

    from torch.nn import functional as F

    return F.gelu(x) * math.pi


def compile_friendly(x):
    if torch.compiler.is_compiling():
        return x + 1
    return x - 1


class Registry(dict):
    """Keys are class names, like transformers' ``_CanRecordRegistry``."""

    def __setitem__(self, cls, value):
        super().__setitem__(cls.__name__, value)

    def get(self, obj):
        return super().get(type(obj).__name__) or {}


REGISTRY = Registry()


class Interface:
    """A mapping whose membership and items are Python methods (``GeneralInterface``)."""

    _global = {"double": lambda x: x * 2, "square": lambda x: x * x}

    def __init__(self):
        self._local = {}

    def __getitem__(self, key):
        if key in self._local:
            return self._local[key]
        return self._global[key]

    def __contains__(self, key):
        return key in self._local or key in self._global

    def __iter__(self):
        return iter({**self._global, **self._local})

    def __len__(self):
        return len(self._global.keys() | self._local.keys())


INTERFACE = Interface()


class Output(OrderedDict):
    """A dataclass output that is also a dict of its non-None fields (like ``ModelOutput``)."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = self.__dict__.get(f.name)
            if v is not None:
                self[f.name] = v

    def __setattr__(self, name, value):
        names = {f.name for f in dataclasses.fields(self)}
        if name in names and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class LayerOutput(Output):
    hidden: torch.Tensor = None
    attention: torch.Tensor = None
    extra: torch.Tensor = None


def arity(fn):
    return len(inspect.signature(fn).parameters)


class Config:
    """Attribute names mapped through a Python ``__getattribute__`` (like transformers'
    ``PretrainedConfig.attribute_map``) and a ``__getattr__`` fallback."""

    attribute_map = {"hidden_size": "width"}

    def __init__(self, width):
        self.width = width

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def __getattr__(self, key):
        if key.startswith("use_"):
            return False
        raise AttributeError(key)


class Layers:
    """A Sequence by the ABC's mixins only: iteration indexes until IndexError."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError("layer index out of range")
        return i + 1


import collections.abc  # noqa: E402

collections.abc.Sequence.register(Layers)
Layers.__iter__ = collections.abc.Sequence.__iter__


def env_flag(x):
    import os

    if os.environ.get("KILN_TEST_FLAG", "0") == "1":
        return x * 10
    return x + ("KILN_TEST_OTHER" in os.environ)


class MappedSettings:
    """Writes renamed through a Python ``__setattr__`` (like ``PretrainedConfig``'s)."""

    attribute_map = {"hidden_size": "width"}

    def __init__(self):
        self.width = 4
        self.calls = 0

    def __setattr__(self, key, value):
        key = type(self).attribute_map.get(key, key)
        super().__setattr__(key, value)
