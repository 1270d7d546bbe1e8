"""FakeTensor: a tensor with metadata and no data.

A FakeTensor reports a device (any: ``cuda`` works without a GPU), a dtype, sizes and strides
(plain ints or ``torch.SymInt`` over kiln symbols), a storage offset and requires_grad, and
holds a ``meta`` tensor with the same sizes/strides on which torch's meta kernels run. Every
ATen op on it goes to its ``FakeTensorMode`` (``fake_mode``), which runs the op on the meta
tensors and wraps the results.

Invariants:
- ``fake.meta`` has exactly ``fake``'s sizes, strides, storage offset and dtype. It is made
  when first asked for (``FakeTensor.of_metadata``): an op answered from the dispatch cache
  never needs it, and a tensor with symbolic sizes costs torch a symbolic TensorImpl each.
- Views of one base share one ``FakeStorage`` object (``fake.fake_storage``): aliasing is
  storage identity, as for real tensors.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from itertools import count
from typing import TYPE_CHECKING

import torch

from kiln.symshapes.bridge._torch_internals import disabled_torch_function, make_wrapper_subclass

if TYPE_CHECKING:
    from kiln.symshapes.bridge._fake_mode import FakeTensorMode

__all__ = ["FakeStorage", "FakeTensor", "empty_meta"]

_storage_ids = count()


@dataclass(slots=True, eq=False)
class FakeStorage:
    """The identity of a (fake) storage; tensors that alias share the same object."""

    device: torch.device
    id: int = field(default_factory=lambda: next(_storage_ids))


class FakeTensor(torch.Tensor):
    """Metadata-only tensor; see the module docstring."""

    _meta: torch.Tensor | None
    fake_mode: FakeTensorMode
    fake_storage: FakeStorage
    real_ref: weakref.ref | None

    __torch_function__ = disabled_torch_function

    @staticmethod
    def __new__(cls, mode: FakeTensorMode, meta: torch.Tensor, device: torch.device, storage: FakeStorage | None = None, requires_grad: bool = False):
        self = make_wrapper_subclass(
            cls, meta.size(), meta.stride(), meta.storage_offset(), meta.dtype, device, requires_grad, meta.layout
        )
        return self._own(meta, mode, device, storage)

    @classmethod
    def of_metadata(cls, mode: FakeTensorMode, size, stride, offset, dtype: torch.dtype, device: torch.device,
                    storage: FakeStorage | None = None) -> FakeTensor:
        """A strided fake with these sizes, strides and storage offset (ints or SymInts);
        its meta tensor is made when first needed."""
        return make_wrapper_subclass(cls, size, stride, offset, dtype, device, False)._own(None, mode, device, storage)

    def _own(self, meta: torch.Tensor | None, mode: FakeTensorMode, device: torch.device,
             storage: FakeStorage | None) -> FakeTensor:
        self._meta = meta
        self.fake_mode = mode
        self.fake_storage = storage if storage is not None else FakeStorage(device)
        self.real_ref = None
        return self

    @property
    def meta(self) -> torch.Tensor:
        """The meta tensor torch's meta kernels run on (see the module docstring)."""
        meta = self._meta
        if meta is None:
            meta = self._meta = empty_meta(self.size(), self.stride(), self.storage_offset(), self.dtype)
        return meta

    @meta.setter
    def meta(self, meta: torch.Tensor) -> None:
        self._meta = meta

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__()

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        mode = next(a.fake_mode for a in _fakes_in(args, kwargs))
        return mode.dispatch(func, args, kwargs or {})

    def __deepcopy__(self, memo: dict) -> FakeTensor:
        """A fake with the same metadata on a new storage (what deepcopy does to data)."""
        if id(self) in memo:
            return memo[id(self)]
        meta = empty_meta(self.meta.size(), self.meta.stride(), self.meta.storage_offset(), self.dtype)
        result = FakeTensor(self.fake_mode, meta, self.device, None, self.requires_grad)
        memo[id(self)] = result
        return result

    def __repr__(self) -> str:
        return f"FakeTensor(size={tuple(self.shape)}, dtype={self.dtype}, device={self.device})"

    __str__ = __repr__


def empty_meta(size, stride, offset, dtype: torch.dtype) -> torch.Tensor:
    """A meta tensor with exactly these sizes, strides and storage offset (ints or SymInts)."""
    meta = torch.empty_strided(size, stride, dtype=dtype, device="meta")
    if type(offset) is not int or offset != 0:
        meta = meta.as_strided(size, stride, offset)
    return meta


def _fakes_in(args, kwargs):
    stack = [args, tuple((kwargs or {}).values())]
    while stack:
        item = stack.pop()
        if isinstance(item, FakeTensor):
            yield item
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
