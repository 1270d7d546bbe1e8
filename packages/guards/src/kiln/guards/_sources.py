"""Sources: how to reach a value from a frame.

A source is a path from one of three roots — the frame's locals ``L`` (a dict of names to
values), its globals ``G``, or an imported module ``M['name']`` (``M`` is ``sys.modules``,
for globals of modules whose functions the trace inlined) — through attribute, item, closure-cell, function-default,
type-of and tensor-property steps. Every source can

* render itself as the Python expression that reaches it (``str(source)``), for example
  ``L['self'].layers[0].weight``; this text is what guards and failure explanations show;
* ``fetch(L, G)`` the value it denotes, raising whatever the access raises;
* ``access(base_expr)`` give the code of its last step applied to an expression that holds
  its base's value, which is how the guard compiler fetches shared prefixes once.

Invariants: sources are frozen, slotted and hashable, and two sources are equal exactly when
they render to the same expression, so a source is its own deduplication key. Item keys are
literals whose ``repr`` evaluates back to an equal value (None, bool, int, str, bytes, and
tuples of those), and indices and dims are ints, which keeps the rendered text valid
generated code that can never be made to do anything but the access it names.
"""

from __future__ import annotations

import inspect
import keyword
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AttrSource",
    "ClosureCellSource",
    "DefaultsSource",
    "DictItemSource",
    "GenericAttrSource",
    "GlobalSource",
    "ItemSource",
    "LocalSource",
    "MappingGetSource",
    "ModuleSource",
    "Source",
    "TensorSizeSource",
    "TensorStorageOffsetSource",
    "TensorStrideSource",
    "TypeSource",
    "importable_path",
    "is_item_key",
    "is_module_tensor",
]


class Source:
    """A path from the frame's locals or globals to a value; see the module docstring."""

    __slots__ = ()
    # Every source has ``base``: the source it steps from, or None for a root (a local or
    # a global). It is a dataclass field in steps and a class attribute in roots.
    base: Source | None

    def access(self, base_expr: str) -> str:
        """Code of this source's last step applied to ``base_expr`` (the base's value)."""
        raise NotImplementedError

    def fetch(self, L: dict[str, Any], G: dict[str, Any] | None) -> Any:
        """The value this source denotes in a frame with locals ``L`` and globals ``G``."""
        raise NotImplementedError

    def chain(self) -> tuple[Source, ...]:
        """This source's ancestors from the root down, then the source itself."""
        out: list[Source] = []
        node: Source | None = self
        while node is not None:
            out.append(node)
            node = node.base
        return tuple(reversed(out))

    def uses_globals(self) -> bool:
        """Whether this source starts at the frame's globals."""
        return isinstance(self.chain()[0], GlobalSource)

    def __str__(self) -> str:
        text = self._text
        if not text:
            base = self.base
            text = self.access("" if base is None else str(base))
            object.__setattr__(self, "_text", text)
        return text

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


def _cached_hash(self: Source) -> int:
    # Equal sources render to the same text: the hash of the text, computed once. (The
    # generated dataclass hash would recurse through every base on every dict lookup.)
    h = self._hash
    if not h:
        h = hash((type(self).__name__, str(self))) or 1
        object.__setattr__(self, "_hash", h)
    return h


def _source(cls: type) -> type:
    """A source class: a frozen, slotted dataclass whose hash is computed once."""
    # the text (``str``) and hash, each computed once: sources are immutable
    cls.__annotations__ = {**inspect.get_annotations(cls), "_hash": "int", "_text": "str"}
    cls._hash = field(default=0, init=False, repr=False, compare=False)
    cls._text = field(default="", init=False, repr=False, compare=False)
    cls = dataclass(frozen=True, slots=True, repr=False)(cls)
    cls.__hash__ = _cached_hash
    return cls


def _is_literal(key: object) -> bool:
    if key is None or type(key) in (bool, int, str, bytes):
        return True
    return type(key) is tuple and all(_is_literal(k) for k in key)


def is_module_tensor(source: Source) -> bool:
    """Whether ``source`` reads a module's parameter or buffer (``m._parameters['w']``)."""
    base = getattr(source, "base", None)
    return isinstance(base, AttrSource) and base.attr in ("_parameters", "_buffers")


def is_item_key(key: object) -> bool:
    """Whether ``ItemSource`` accepts ``key``: a literal, or a class or function reachable by
    its import path."""
    return _is_literal(key) or (type(key) is not tuple and importable_path(key) is not None)


def importable_path(obj: object) -> str | None:
    """``M['pkg.mod'].Qual.Name`` when that expression gives ``obj`` itself (a class or
    function defined at a module's top level, or nested in such a class), else None."""
    import sys

    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if type(module) is not str or type(qualname) is not str or "<" in qualname:
        return None
    parts = qualname.split(".")
    if not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        return None
    value = sys.modules.get(module)
    for part in parts:
        value = getattr(value, part, None)
    return f"M[{module!r}].{qualname}" if value is obj else None


def _check_name(name: object, what: str) -> None:
    if type(name) is not str:
        raise TypeError(f"{what} must be a str, got {type(name).__name__}")


def _check_int(value: object, what: str) -> None:
    # rendered into generated code as is, so only a real int is accepted
    if type(value) is not int:
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")


@_source
class LocalSource(Source):
    """A local variable of the frame: ``L['name']``."""

    name: str
    base = None

    def __post_init__(self) -> None:
        _check_name(self.name, "local name")

    def access(self, base_expr: str) -> str:
        return f"L[{self.name!r}]"

    def fetch(self, L, G):
        return L[self.name]


@_source
class GlobalSource(Source):
    """A global variable of the frame: ``G['name']``."""

    name: str
    base = None

    def __post_init__(self) -> None:
        _check_name(self.name, "global name")

    def access(self, base_expr: str) -> str:
        return f"G[{self.name!r}]"

    def fetch(self, L, G):
        if G is None:
            raise KeyError(self.name)
        return G[self.name]


@_source
class ModuleSource(Source):
    """An imported module by name: ``M['name']``, where ``M`` is ``sys.modules``.

    The root of a global read by code of another module than the frame's
    (``M['transformers.activations'].ACT2FN``): such a module is not reachable from the
    frame's own locals or globals, only by its name."""

    name: str
    base = None

    def __post_init__(self) -> None:
        _check_name(self.name, "module name")

    def access(self, base_expr: str) -> str:
        return f"M[{self.name!r}]"

    def fetch(self, L, G):
        import sys

        return sys.modules[self.name]


@_source
class AttrSource(Source):
    """An attribute: ``base.attr`` (``getattr(base, 'attr')`` when not an identifier)."""

    base: Source
    attr: str

    def __post_init__(self) -> None:
        _check_name(self.attr, "attribute name")

    def access(self, base_expr: str) -> str:
        if self.attr.isidentifier() and not keyword.iskeyword(self.attr):
            return f"{base_expr}.{self.attr}"
        return f"getattr({base_expr}, {self.attr!r})"

    def fetch(self, L, G):
        return getattr(self.base.fetch(L, G), self.attr)


@_source
class GenericAttrSource(Source):
    """An attribute as ``object.__getattribute__`` finds it, bypassing a ``__getattribute__``
    or ``__getattr__`` the class defines in Python (what ``super().__getattribute__(name)``
    inside such a hook reads; reading it with ``base.attr`` would run the hook again)."""

    base: Source
    attr: str

    def __post_init__(self) -> None:
        _check_name(self.attr, "attribute name")

    def access(self, base_expr: str) -> str:
        return f"object.__getattribute__({base_expr}, {self.attr!r})"

    def fetch(self, L, G):
        return object.__getattribute__(self.base.fetch(L, G), self.attr)


@_source
class ItemSource(Source):
    """An item by index or key: ``base[key]``; the key is a literal (see module docstring)
    or a class or function reachable by its import path (``base[M['typing'].Union]``:
    registries keyed by type)."""

    base: Source
    key: Any
    # repr of the key, so that keys equal across types (1, 1.0 and True) stay distinct
    key_text: str = field(init=False, compare=True)

    def __post_init__(self) -> None:
        if _is_literal(self.key):
            text = repr(self.key)
        else:
            text = importable_path(self.key)
            if text is None:
                raise TypeError(f"item key must be a literal or importable, got {type(self.key).__name__}")
        object.__setattr__(self, "key_text", text)

    @property
    def literal(self) -> bool:
        """Whether the key is a literal (else it is named by its import path)."""
        return _is_literal(self.key)

    def access(self, base_expr: str) -> str:
        return f"{base_expr}[{self.key_text}]"

    def fetch(self, L, G):
        return self.base.fetch(L, G)[self.key]


@_source
class DictItemSource(Source):
    """The value a dict (or dict subclass) stores under a key: ``dict.__getitem__(base, key)``,
    bypassing a ``__getitem__`` the subclass defines in Python (transformers' ``ModelOutput``
    builds a dict on every ``out['key']``); the key is a literal."""

    base: Source
    key: Any
    key_text: str = field(init=False, compare=True)

    def __post_init__(self) -> None:
        if not _is_literal(self.key):
            raise TypeError(f"dict item key must be a literal, got {type(self.key).__name__}")
        object.__setattr__(self, "key_text", repr(self.key))

    def access(self, base_expr: str) -> str:
        return f"dict.__getitem__({base_expr}, {self.key_text})"

    def fetch(self, L, G):
        return dict.__getitem__(self.base.fetch(L, G), self.key)


@_source
class MappingGetSource(Source):
    """A mapping's value for a key, None when the key is missing: ``base.get(key)`` (for
    mappings whose ``get`` only reads, like ``os.environ``); the key is a literal."""

    base: Source
    key: Any
    key_text: str = field(init=False, compare=True)

    def __post_init__(self) -> None:
        if not _is_literal(self.key):
            raise TypeError(f"mapping key must be a literal, got {type(self.key).__name__}")
        object.__setattr__(self, "key_text", repr(self.key))

    def access(self, base_expr: str) -> str:
        return f"{base_expr}.get({self.key!r})"

    def fetch(self, L, G):
        return self.base.fetch(L, G).get(self.key)


@_source
class ClosureCellSource(Source):
    """The contents of a function's closure cell: ``fn.__closure__[i].cell_contents``."""

    base: Source
    index: int

    def __post_init__(self) -> None:
        _check_int(self.index, "closure index")

    def access(self, base_expr: str) -> str:
        return f"{base_expr}.__closure__[{self.index}].cell_contents"

    def fetch(self, L, G):
        return self.base.fetch(L, G).__closure__[self.index].cell_contents


@_source
class DefaultsSource(Source):
    """A function default: positional by index (``fn.__defaults__[i]``) or keyword-only by
    name (``fn.__kwdefaults__['k']``)."""

    base: Source
    key: int | str

    def __post_init__(self) -> None:
        if type(self.key) is not str:
            _check_int(self.key, "defaults key")

    def access(self, base_expr: str) -> str:
        if type(self.key) is int:
            return f"{base_expr}.__defaults__[{self.key}]"
        return f"{base_expr}.__kwdefaults__[{self.key!r}]"

    def fetch(self, L, G):
        fn = self.base.fetch(L, G)
        if type(self.key) is int:
            return fn.__defaults__[self.key]
        return fn.__kwdefaults__[self.key]


@_source
class TypeSource(Source):
    """The exact type of a value: ``type(base)``."""

    base: Source

    def access(self, base_expr: str) -> str:
        return f"type({base_expr})"

    def fetch(self, L, G):
        return type(self.base.fetch(L, G))


@_source
class TensorSizeSource(Source):
    """A tensor's size along one dimension: ``base.size(dim)``."""

    base: Source
    dim: int

    def __post_init__(self) -> None:
        _check_int(self.dim, "dim")

    def access(self, base_expr: str) -> str:
        return f"{base_expr}.size({self.dim})"

    def fetch(self, L, G):
        return self.base.fetch(L, G).size(self.dim)


@_source
class TensorStrideSource(Source):
    """A tensor's stride along one dimension: ``base.stride(dim)``."""

    base: Source
    dim: int

    def __post_init__(self) -> None:
        _check_int(self.dim, "dim")

    def access(self, base_expr: str) -> str:
        return f"{base_expr}.stride({self.dim})"

    def fetch(self, L, G):
        return self.base.fetch(L, G).stride(self.dim)


@_source
class TensorStorageOffsetSource(Source):
    """A tensor's storage offset: ``base.storage_offset()``."""

    base: Source

    def access(self, base_expr: str) -> str:
        return f"{base_expr}.storage_offset()"

    def fetch(self, L, G):
        return self.base.fetch(L, G).storage_offset()
