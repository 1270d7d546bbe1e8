"""The functional variant of an ATen op that writes one of its arguments.

torch's naming conventions, used in this order:
- tagged ``inplace_view`` (``t_``, ``squeeze_``, ``as_strided_``): only the tensor's sizes and
  strides change; the variant is the view op without the ``_`` (``t``);
- ``foo_`` (``add_``, ``copy_``, ``index_put_``, ``bernoulli_``) and ``__ifoo__``: ``foo`` and
  ``__foo__`` with the same arguments, returning the new value of ``self``;
- an ``out=`` overload (``add.out``): the overload of the same op taking the other
  arguments, whose results are the values written to the ``out`` tensors, in order;
- any other op with written arguments (``_batch_norm_with_update`` writes the running
  statistics): ``foo_functional``, returning ``foo``'s results followed by the new value of
  each written argument in schema order.
An overload is matched by its argument names. ``set_``/``resize_`` and ops without a variant
raise ``AotUnsupported`` naming the op.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["AotUnsupported", "FunctionalVariant", "functional_variant"]

_REFUSED = frozenset({"set_", "resize_", "resize_as_", "_resize_output_", "resize_as_sparse_"})


class AotUnsupported(NotImplementedError):
    """Something kiln.aotgrad cannot trace or functionalize (the message names it)."""


@dataclass(frozen=True, slots=True)
class FunctionalVariant:
    op: Any  # the functional OpOverload
    argument_names: frozenset[str]  # the original call's arguments it takes (by name)
    num_returns: int
    written_results: tuple[int, ...]  # per written argument (schema order): its result index
    returned_results: tuple[int | None, ...]  # per original return: the result index
    inplace_view: bool = False


def _packet(name: str) -> Any:
    return getattr(torch.ops.aten, name, None)


def _names(schema: Any, *, skip_written: bool = False) -> tuple[tuple[str, str], ...]:
    """The arguments' names and types (``pow.Scalar`` and ``pow.Tensor_Tensor`` share names)."""
    return tuple((a.name, str(a.type)) for a in schema.arguments
                 if not (skip_written and a.alias_info is not None and a.alias_info.is_write and a.kwarg_only))


def _overload_matching(packet: Any, names: tuple[tuple[str, str], ...], preferred: str) -> Any:
    if packet is None:
        return None
    candidates = [preferred] + [o for o in packet.overloads() if o != preferred]
    for name in candidates:
        if name not in packet.overloads():
            continue
        op = getattr(packet, name)
        if _names(op._schema) == names:
            return op
    return None


@functools.cache
def functional_variant(func: Any) -> FunctionalVariant:
    """The variant of ``func`` (see the module docstring)."""
    schema = func._schema
    name = func.overloadpacket.__name__
    if name in _REFUSED:
        raise AotUnsupported(f"{func} resizes or re-points a tensor in place")
    written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    if any("[]" in str(a.type) or "List" in str(a.type) for a in written):
        raise AotUnsupported(f"{func} writes a list of tensors")
    overload = schema.overload_name or "default"
    if torch.Tag.inplace_view in func.tags:
        op = _overload_matching(_packet(name.rstrip("_")), _names(schema), overload)
        if op is None:
            raise AotUnsupported(f"{func} has no view op without '_'")
        return FunctionalVariant(op, _arg_names(schema), 1, (0,), (0,), inplace_view=True)
    plain = name[:-1] if name.endswith("_") and not name.endswith("__") else None
    if name.startswith("__i") and name.endswith("__"):
        plain = "__" + name[3:]  # __ilshift__ -> __lshift__
    if plain is not None and not any(a.kwarg_only for a in written):
        op = _overload_matching(_packet(plain), _names(schema), overload)
        if op is not None and len(op._schema.returns) == 1 and len(written) == 1:
            return FunctionalVariant(op, _arg_names(schema), 1, (0,), (0,) * len(schema.returns))
    if written and all(a.kwarg_only for a in written):
        names = _names(schema, skip_written=True)
        packet = _packet(name)
        op = next((getattr(packet, o) for o in packet.overloads() if _names(getattr(packet, o)._schema) == names), None)
        if op is not None and len(op._schema.returns) == len(written):
            written_results = tuple(range(len(written)))
            returned = tuple(_written_index(r, written) for r in schema.returns)
            return FunctionalVariant(op, frozenset(n for n, _ in names), len(written), written_results, returned)
    op = _overload_matching(_packet(name + "_functional"), _names(schema), overload)
    if op is not None:
        n = len(schema.returns)
        if len(op._schema.returns) == n + len(written):
            return FunctionalVariant(op, _arg_names(schema), n + len(written),
                                     tuple(range(n, n + len(written))), tuple(range(n)))
    raise AotUnsupported(f"{func} writes its arguments and has no functional variant kiln knows")


def _arg_names(schema: Any) -> frozenset[str]:
    return frozenset(a.name for a in schema.arguments)


def _written_index(ret: Any, written: list[Any]) -> int | None:
    if ret.alias_info is None:
        return None
    for i, a in enumerate(written):
        if set(a.alias_info.before_set) & set(ret.alias_info.before_set):
            return i
    return None
