"""``collections.deque`` made in the trace: a sequence tracker with a ``maxlen``.

``append``/``appendleft``/``pop``/``popleft``/``extend``/``extendleft``/``rotate``/``clear``,
``maxlen``, indexing, ``len``, ``in``, iteration, truth. Adding to a full deque drops items
from the other end, as CPython's does. One returned (or passed on at a graph break) is
rebuilt as a real deque of its items and ``maxlen`` (``rebuild_text``). Deques passed in are
not modelled (Unsupported, as before).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._builtins import rule
from ._constant import ConstantVariable
from ._containers import ListVariable, constant_args
from ._errors import traced_error

if TYPE_CHECKING:
    from .._translator import Translator

__all__ = ["DequeVariable"]


class DequeVariable(ListVariable):
    """A deque made in the trace (``items`` left to right; ``maxlen`` None or an int)."""

    __slots__ = ("maxlen",)

    def __init__(self, items: list[VariableTracker], maxlen: int | None = None) -> None:
        super().__init__([], None)
        self.maxlen = maxlen
        self._extend(items, left=False)

    def python_type(self) -> type:
        return collections.deque

    def _extend(self, items: list[VariableTracker], *, left: bool) -> None:
        for item in items:
            if left:
                self.items.insert(0, item)
                if self.maxlen is not None and len(self.items) > self.maxlen:
                    self.items.pop()
            else:
                self.items.append(item)
                if self.maxlen is not None and len(self.items) > self.maxlen:
                    self.items.pop(0)

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        from ._containers import container_attr

        return container_attr(self, collections.deque, name)

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if kwargs:
            raise Unsupported(f"deque.{name}() with keywords")
        if name in ("append", "appendleft") and len(args) == 1:
            self._extend(args, left=name == "appendleft")
        elif name in ("extend", "extendleft") and len(args) == 1:
            self._extend(list(args[0].iterate(tx)), left=name == "extendleft")
        elif name in ("pop", "popleft") and not args:
            if not self.items:
                raise traced_error(IndexError(f"{name} from an empty deque"))
            return self.items.pop() if name == "pop" else self.items.pop(0)
        elif name == "rotate" and len(args) <= 1:
            (n,) = constant_args("deque.rotate()", args) or [1]
            if self.items:
                n %= len(self.items)
                self.items[:] = self.items[-n:] + self.items[:-n] if n else self.items
        elif name == "clear" and not args:
            self.items.clear()
        elif name in ("__len__", "__getitem__", "__iter__", "index", "count", "__contains__"):
            if name == "__contains__":
                from ._builtins import values_equal

                return ConstantVariable(any(values_equal(tx, i, args[0]) for i in self.items))
            return ListVariable.call_method(self, tx, name, args, kwargs)
        elif name == "copy" and not args:
            return DequeVariable(list(self.items), self.maxlen)
        else:
            raise Unsupported(f"method {name!r} of a deque is not supported")
        return ConstantVariable(None)

    def getitem(self, tx: Translator, key: VariableTracker) -> VariableTracker:
        if key.is_constant() and isinstance(key.as_constant(), slice):
            raise traced_error(TypeError("sequence index must be integer, not 'slice'"))
        return super().getitem(tx, key)

    def rebuild_text(self, expr: Callable[[VariableTracker], str], ref: Callable[..., str]) -> str:
        """Replacement code building the real deque."""
        items = ", ".join(expr(i) for i in self.items)
        return f"{ref(collections.deque, 'type')}([{items}], {self.maxlen!r})"


@rule(collections.deque)
def _deque(tx, args, kwargs):
    iterable = args[0] if args else kwargs.get("iterable")
    maxlen = args[1] if len(args) > 1 else kwargs.get("maxlen", ConstantVariable(None))
    (limit,) = constant_args("deque(maxlen=)", [maxlen])
    if limit is not None and (type(limit) is not int or limit < 0):
        raise traced_error(ValueError("maxlen must be non-negative"))
    return DequeVariable(list(iterable.iterate(tx)) if iterable is not None else [], limit)
