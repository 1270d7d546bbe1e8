"""The guard protocol shared by every guard kind, and the code context guards emit into.

A guard states one fact about the values of one or more sources. Each kind implements two
views of the same fact, and they must agree on every input:

* ``emit(ctx, *exprs)`` returns Python boolean expressions (all must hold) over the
  expressions ``exprs`` that hold its sources' values; the guard compiler pastes them into
  the one generated checker function. Constants the code needs are bound through
  ``ctx.const``, never written as reprs unless they are plain literals.
* ``explain(*values)`` evaluates the fact on already fetched values and returns None when it
  holds, or one line saying what was expected and what was found.

Either view may raise on hostile values; the callers (the generated checker and
``kiln.guards.evaluate``) turn any exception into a failure. Guards are frozen, slotted
dataclasses: equal guards are duplicates, which is how a GuardSet deduplicates.

Class attributes steer the compiler: ``cost`` (cheaper guards run first),
``establishes_type`` (the guard pins its source's type or identity, so guards that touch
the source's attributes or call its methods must come after it), and ``batch_key`` (guards
sharing a key may be checked together by one ``emit_batch`` call).
"""

from __future__ import annotations

from typing import Any, ClassVar

from kiln.guards._sources import Source

__all__ = ["CodeContext", "Guard", "safe_repr", "type_name"]


class CodeContext:
    """Where generated code binds its constants: a namespace of named values.

    ``native`` says whether guards may emit calls into torch's native guard helpers
    (``_torch_internals``); with False every guard emits plain Python of the same meaning.
    """

    __slots__ = ("_ids", "_temps", "namespace", "native", "provided")

    def __init__(self, native: bool = True) -> None:
        self.native = native
        self.namespace: dict[str, Any] = {}
        # sources whose values a passed guard already holds, as cheaper expressions
        self.provided: dict[Source, str] = {}
        self._ids: dict[int, str] = {}
        self._temps = 0

    def const(self, value: Any, hint: str = "c") -> str:
        """Bind ``value`` (by identity) to a fresh global name of the checker; return it."""
        name = self._ids.get(id(value))
        if name is None:
            name = f"_{hint}{len(self.namespace)}"
            self.namespace[name] = value
            self._ids[id(value)] = name
        return name

    def provide(self, source: Source, expr: str) -> None:
        """Say that, once the conditions just emitted hold, ``expr`` evaluates to the value of
        ``source``; the compiler then fetches ``source`` that way (for example a module's
        ``_parameters`` from the instance dict the guard already read)."""
        self.provided.setdefault(source, expr)

    def temp(self) -> str:
        """A fresh local variable name for assignment expressions inside a condition."""
        self._temps += 1
        return f"_t{self._temps}"


class Guard:
    """One fact about the values of some sources; see the module docstring."""

    __slots__ = ()
    cost: ClassVar[int] = 10
    establishes_type: ClassVar[bool] = False
    batch_key: ClassVar[str | None] = None

    @property
    def sources(self) -> tuple[Source, ...]:
        """The sources whose values this guard reads, in the order ``emit``/``explain`` take."""
        return (self.source,)  # type: ignore[attr-defined]

    def describe(self) -> str:
        """The fact as one line of text (shown in generated code and logs)."""
        raise NotImplementedError

    def emit(self, ctx: CodeContext, *exprs: str) -> list[str]:
        """Boolean expressions over ``exprs`` that all hold exactly when the guard passes."""
        raise NotImplementedError

    def explain(self, *values: Any) -> str | None:
        """None when the guard holds on ``values``, else what was expected and found."""
        raise NotImplementedError

    @classmethod
    def emit_batch(
        cls, ctx: CodeContext, guards: list[Guard], exprs: list[tuple[str, ...]]
    ) -> list[str] | None:
        """Conditions checking several guards of this kind at once, or None to emit each."""
        return None

    def __str__(self) -> str:
        return self.describe()


def type_name(tp: type) -> str:
    """A type's qualified name, module-prefixed unless it is a builtin."""
    try:
        module = tp.__module__
        qual = tp.__qualname__
    except Exception:
        return "<unnamed type>"
    return qual if module == "builtins" else f"{module}.{qual}"


def safe_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters; never raises."""
    try:
        text = repr(value)
        if type(text) is not str:
            raise TypeError
    except Exception:
        text = f"<{getattr(type(value), '__name__', '?')} object at {id(value):#x}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
