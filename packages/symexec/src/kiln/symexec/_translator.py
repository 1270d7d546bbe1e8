"""Translator: the symbolic interpreter of one function's bytecode.

A Translator walks a decoded function (``kiln.symexec.bytecode``) one instruction at a time
with trackers instead of values: a value stack, the locals, and cells for closure variables.
Each opcode has a rule in ``opcode_rules`` (see ``_opcodes``). Calls to Python functions are
inlined by a child Translator sharing the same OutputGraph, so one graph holds the whole
call tree. Tracing stops at the function's return; anything the rules cannot model raises
``Unsupported``, which the Translator annotates with the instruction and the user's line.

Invariants: tracing never runs the user's tensor code and never mutates real objects; global
torch state changed while tracing (grad mode) is restored when tracing ends, on every path.
"""

from __future__ import annotations

import functools
import inspect
import types
import weakref
from collections.abc import Callable
from typing import Any

from kiln.symshapes import GuardOnDataDependentError

from ._builder import VariableBuilder
from ._output_graph import OutputGraph
from ._unsupported import SourceLocation, TracedException, Unsupported
from .bytecode import Bytecode, Instr, Label, decode
from .variables._base import VariableTracker
from .variables._containers import DictVariable, TupleVariable
from .variables._functions import NestedFunctionVariable
from .variables._iterators import GeneratorVariable

__all__ = ["MAX_INLINE_DEPTH", "NULL", "CellVariable", "LazyVariable", "StopTracing", "Translator", "lazy_local",
           "opcode_rules"]

MAX_INLINE_DEPTH = 64

Rule = Callable[["Translator", Instr], None]
opcode_rules: dict[str, Rule] = {}


class _Null(VariableTracker):
    """The NULL CPython pushes below a callable (``PUSH_NULL``, LOAD_GLOBAL's flag)."""

    __slots__ = ()

    def describe(self) -> str:
        return "NULL"


NULL = _Null()


class CellVariable(VariableTracker):
    """A closure cell while tracing: holds the tracker of its contents (None: empty).

    Where the real cell is: ``made`` -- the trace made it (MAKE_CELL of a traced frame), so
    only functions made while tracing can reach it and its last contents are all there is to
    it; ``free_name`` -- it is the compiled frame's own free variable of that name (the
    replacement runs with the very same cell); neither -- a cell of a function read from
    outside, which the trace may read but never write nor rebuild."""

    __slots__ = ("contents", "free_name", "made")

    def __init__(self, contents: VariableTracker | None = None, *, made: bool = False,
                 free_name: str | None = None) -> None:
        super().__init__(None)
        self.contents = contents
        self.made = made
        self.free_name = free_name

    def describe(self) -> str:
        return "a closure cell"


class LazyVariable(VariableTracker):
    """A frame argument not looked at yet: wrapped (and guarded) on first use only."""

    __slots__ = ("value",)

    def __init__(self, value: Any, source: Any) -> None:
        super().__init__(source)
        self.value = value

    def realize(self, tx: Translator) -> VariableTracker:
        return tx.builder.wrap(self.value, self.source)


def lazy_local(value: Any, source: Any) -> LazyVariable:
    """A frame value to wrap when the code first reads it."""
    return LazyVariable(value, source)


class StopTracing(Exception):
    """Raised by a root translator at its ``stop_at`` instruction: the graph breaks there."""


class _Return(Exception):
    """Raised by RETURN_* to end the walk with a value."""

    def __init__(self, value: VariableTracker) -> None:
        self.value = value


def _decoded(code: types.CodeType, cache: dict[types.CodeType, tuple[list[Instr], dict[int, int]]],
             shared: weakref.WeakKeyDictionary[types.CodeType, tuple[list[Instr], dict[int, int]]]):
    """``code``'s instructions and its labels' indices: from this trace's ``cache``, else
    from ``shared`` (``SymexecCaches.decoded``: decoding is a pure function of the code, and
    the same functions, nn.Linear.forward or a model's layers, are traced again by every
    capture and recompile), else decoded now and kept in both."""
    found = cache.get(code)
    if found is None:
        found = shared.get(code)
        if found is not None:
            cache[code] = found
            return found
        bc: Bytecode = decode(code)
        instrs: list[Instr] = []
        labels: dict[int, int] = {}
        for item in bc.instrs:
            if isinstance(item, Label):
                labels[id(item)] = len(instrs)
            else:
                instrs.append(item)
        found = cache[code] = shared[code] = (instrs, labels)
    return found


class Translator:
    """Symbolic execution of one code object; see the module docstring."""

    def __init__(
        self,
        code: types.CodeType,
        f_globals: dict[str, Any],
        output: OutputGraph,
        symbolic_locals: dict[str, VariableTracker],
        cells: dict[str, CellVariable],
        *,
        parent: Translator | None = None,
        decode_cache: dict | None = None,
    ) -> None:
        self.code = code
        self.f_globals = f_globals
        self.output = output
        self.builder = VariableBuilder(output) if parent is None else parent.builder
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.decode_cache = decode_cache if decode_cache is not None else {}
        output.traced_codes[code] = None
        self.instructions, self._labels = _decoded(code, self.decode_cache, output.caches.decoded)
        self.locals = symbolic_locals
        self.cells = cells
        self.stack: list[VariableTracker] = []
        self.ip = 0
        self.kw_names: tuple[str, ...] = ()
        self.current: Instr | None = None
        # A traced generator collects what it yields here (None: not a generator).
        self.yields: list[VariableTracker] | None = None
        # The exception an ``except`` block of this frame is handling (None: none).
        self.exc_info: VariableTracker | None = None
        # The frame's ``locals()`` dict once the code asked for it (refreshed at each call).
        self.locals_dict: DictVariable | None = None
        # Root frame only: times each instruction was reached, and where to stop (a break).
        self.visit_counts: list[int] | None = [0] * len(self.instructions) if parent is None else None
        self.stop_at: tuple[int, int] | None = None

    # -- the walk ----------------------------------------------------------------------------

    def run(self) -> VariableTracker:
        """Trace to the function's return; the tracker of the returned value.

        A root translator with ``stop_at = (index, visit)`` stops before running instruction
        ``index`` for the ``visit``-th time, raising ``StopTracing`` (a graph break there).
        """
        instructions = self.instructions
        counts = self.visit_counts
        stop_index, stop_visit = self.stop_at or (-1, 0)
        self.output.active = self  # the innermost frame being traced (see _handlers)
        try:
            while True:
                if self.ip >= len(instructions):
                    raise Unsupported("reached the end of the code without a return")
                if counts is not None:
                    counts[self.ip] += 1
                    if self.ip == stop_index and counts[self.ip] == stop_visit:
                        raise StopTracing()
                instr = instructions[self.ip]
                self.current = instr
                self.ip += 1
                rule = opcode_rules.get(instr.name)
                if rule is None:
                    raise Unsupported(f"instruction {instr.name} is not supported")
                try:
                    rule(self, instr)
                except TracedException as e:
                    if instr.handler is None:
                        raise
                    self._enter_handler(instr, e)
        except _Return as done:
            return done.value
        except GuardOnDataDependentError as err:
            # a decision on a size or number that depends on tensor data: not traceable,
            # so a graph break (or eager) there, like any other unsupported instruction
            self._unsupported(Unsupported(f"{err} (a data-dependent size or number)"), counts)
        except Unsupported as e:
            self._unsupported(e, counts)
        finally:
            self.output.active = self.parent

    def _unsupported(self, e: Unsupported, counts: Any) -> None:
        """Raise ``e`` located at the current instruction (and, in the root frame, with the
        position a retrace can stop at for a graph break)."""
        if counts is not None and e.root_position is None and self.current is not None:
            # Where the root frame was when tracing failed (the instruction and how many
            # times it had been reached): a retrace can stop there for a graph break.
            e.root_position = (self.ip - 1, counts[self.ip - 1])
        raise e.locate(self.current, self.location()) from None

    def _enter_handler(self, instr: Instr, e: TracedException) -> None:
        """Unwind to the handler covering ``instr``, as CPython does: the stack cut to the
        handler's depth, the raising offset pushed if it wants it, then the exception."""
        from .variables._constant import ConstantVariable
        from .variables._objects import ExceptionVariable

        handler = instr.handler
        if e.exc is None:
            e.exc = ExceptionVariable(e.exc_type, [ConstantVariable(e.reason)])
        e.location, e.stack = None, []  # caught: where it came from no longer matters
        del self.stack[handler.depth:]
        if handler.lasti:
            self.push(ConstantVariable(instr.offset))
        self.push(e.exc)
        self.jump(handler.target)

    def location(self) -> SourceLocation:
        """Where the current instruction is in the user's source."""
        instr = self.current
        return SourceLocation(self.code.co_filename, instr.lineno if instr else None,
                              self.code.co_qualname)

    def jump(self, label: Label) -> None:
        """Continue at ``label``."""
        self.ip = self._labels[id(label)]

    def label_index(self, label: Label) -> int:
        """The index of the instruction a label marks."""
        return self._labels[id(label)]

    def instruction_at(self, label: Label) -> Instr | None:
        """The instruction a label marks (None past the end)."""
        i = self._labels[id(label)]
        return self.instructions[i] if i < len(self.instructions) else None

    def push(self, v: VariableTracker) -> None:
        self.stack.append(v)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def do_return(self, value: VariableTracker) -> None:
        raise _Return(value)

    # -- names -------------------------------------------------------------------------------

    def load_global(self, name: str) -> VariableTracker:
        """The global ``name`` as the code sees it (its module's globals, then builtins)."""
        from kiln.guards import GlobalSource

        if self.f_globals is self.root().f_globals and name in self.output.global_writes:
            return self.output.global_writes[name]
        if name in self.f_globals:
            if self.f_globals is self.root().f_globals:
                return self.builder.wrap(self.f_globals[name], GlobalSource(name))
            return self._foreign_global(name)
        builtins_ = self.f_globals.get("__builtins__", __builtins__)
        table = builtins_ if isinstance(builtins_, dict) else vars(builtins_)
        if name in table:
            return self.builder.wrap(table[name], None)
        raise Unsupported(f"name {name!r} is not defined")

    def _foreign_global(self, name: str) -> VariableTracker:
        # A global of another module (an inlined function defined elsewhere). Globals of
        # trusted libraries (torch.nn's ``F``) are fixed; others are reached by the module's
        # name, ``M['pkg.mod'].name``, and guarded like the frame's own globals.
        import sys

        from kiln.guards import AttrSource, ModuleSource

        from .variables._objects import is_trusted_module

        where = self.f_globals.get("__name__")
        module = sys.modules.get(where) if isinstance(where, str) else None
        spec = self.f_globals.get("__spec__")
        if (module is None or vars(module) is not self.f_globals) and getattr(spec, "name", None) in sys.modules:
            # a module that names itself after its public alias (_collections_abc is
            # "collections.abc"): reached by the name it was imported under
            where = spec.name
            module = sys.modules[where]
        if module is None or vars(module) is not self.f_globals:
            raise Unsupported(f"reading global {name!r} of code whose module {where!r} is not "
                              "imported under that name")
        if is_trusted_module(module):
            return self.builder.wrap(self.f_globals[name], None)
        return self.builder.wrap(self.f_globals[name], AttrSource(ModuleSource(where), name))

    def realize(self, v: VariableTracker) -> VariableTracker:
        """The tracker itself, or a frame argument wrapped now if it was still lazy."""
        return v.realize(self) if isinstance(v, LazyVariable) else v

    def root(self) -> Translator:
        tx = self
        while tx.parent is not None:
            tx = tx.parent
        return tx

    # -- calls -------------------------------------------------------------------------------

    def call(self, fn: VariableTracker, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``fn(*args, **kwargs)`` on trackers."""
        return fn.call(self, args, kwargs)

    def inline_function(self, fn: types.FunctionType, args: list[VariableTracker],
                        kwargs: dict[str, VariableTracker], fn_source: Any = None,
                        class_source: Any = None) -> VariableTracker:
        """Trace a call of the Python function ``fn`` into the current graph.

        ``fn_source``: where ``fn`` came from in the frame (its defaults and closure are
        guarded through it). ``class_source``: where a method found on a guarded class can
        be reached (``type(L['self']).forward``); its defaults and closure cells are
        wrapped without guards where that is enough, through it where an object needs one.
        """
        from kiln.guards import ClosureCellSource, DefaultsSource

        def part(value: Any, step: Any, key: Any) -> VariableTracker:
            if fn_source is not None:
                return self.builder.wrap(value, step(fn_source, key))
            try:
                return self.builder.wrap(value, None)
            except Unsupported:
                if class_source is None:
                    raise
                return self.builder.wrap(value, step(class_source, key))

        if getattr(fn, "_kiln_disabled", False):  # refused at the call: a graph break there
            raise Unsupported(f"{fn.__qualname__} is marked kiln.disable and cannot be traced")
        code = fn.__code__
        _check_inlinable(code, fn.__qualname__)
        defaults = [part(v, DefaultsSource, i) for i, v in enumerate(fn.__defaults__ or ())]
        kwdefaults = {k: part(v, DefaultsSource, k) for k, v in (fn.__kwdefaults__ or {}).items()}
        cells: dict[str, CellVariable] = {}
        for i, (name, cell) in enumerate(zip(code.co_freevars, fn.__closure__ or (), strict=True)):
            try:
                value = cell.cell_contents
            except ValueError:
                cells[name] = CellVariable(None)
                continue
            cells[name] = CellVariable(part(value, ClosureCellSource, i))
        bound = bind_arguments(code, fn.__qualname__, args, kwargs, defaults, kwdefaults)
        return self._inline(code, fn.__globals__, bound, cells)

    def inline_nested(self, fn: NestedFunctionVariable, args: list[VariableTracker],
                      kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """Trace a call of a function created while tracing."""
        code = fn.code
        _check_inlinable(code, fn.qualname)
        cells = dict(zip(code.co_freevars, fn.closure, strict=True))
        bound = bind_arguments(code, fn.qualname, args, kwargs, list(fn.defaults), fn.kwdefaults)
        return self._inline(code, fn.fn_globals, bound, cells)

    def _inline(self, code: types.CodeType, f_globals: dict[str, Any],
                bound: dict[str, VariableTracker], cells: dict[str, CellVariable]) -> VariableTracker:
        if self.depth >= MAX_INLINE_DEPTH:
            raise Unsupported(f"calls nested deeper than {MAX_INLINE_DEPTH} levels")
        child = Translator(code, f_globals, self.output, bound, cells, parent=self,
                           decode_cache=self.decode_cache)
        if code.co_flags & inspect.CO_GENERATOR:
            # Run the generator to its end at once; the caller iterates over its yields.
            child.yields = []
            value = child.run()
            return GeneratorVariable(child.yields, value)
        return child.run()

    def construct(self, cls: type, args: list[VariableTracker],
                  kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``cls(*args, **kwargs)`` for a class read from the frame or a module."""
        import torch

        if issubclass(cls, tuple) and hasattr(cls, "_fields"):
            return TupleVariable(_namedtuple_items(cls, args, kwargs), tuple_type=cls)
        if cls in (torch.Size,) and len(args) == 1:
            return TupleVariable(args[0].iterate(self), tuple_type=torch.Size)
        from .variables._objects import ExceptionVariable, NewObjectVariable, can_construct

        if issubclass(cls, BaseException) and not kwargs:
            return ExceptionVariable(cls, args)
        from .variables._containers import is_itertools_class, run_itertools

        if is_itertools_class(cls):
            return run_itertools(self, cls, args, kwargs)
        if cls is functools.partial and args:
            from .variables._functools import make_partial

            return make_partial(args[0], args[1:], kwargs)
        from .variables._defaultdict import construct_dict

        made = construct_dict(self, cls, args, kwargs)  # defaultdict, OrderedDict
        if made is not None:
            return made
        if can_construct(cls):
            obj = NewObjectVariable(cls)
            init = next(k.__dict__["__init__"] for k in cls.__mro__ if "__init__" in k.__dict__)
            if isinstance(init, types.FunctionType):
                self.inline_function(init, [obj, *args], kwargs)
            elif init is dict.__init__:
                from .variables._objects import BaseMethodVariable

                BaseMethodVariable(init, obj).call(self, args, kwargs)
            elif args or kwargs:
                raise Unsupported(f"{cls.__qualname__}() takes no arguments")
            return obj
        if issubclass(cls, torch.nn.Module):
            return self._construct_module(cls, args, kwargs)
        raise Unsupported(f"creating a {cls.__qualname__} object inside a compiled region")

    def _construct_module(self, cls: type, args: list[VariableTracker],
                          kwargs: dict[str, VariableTracker]) -> VariableTracker:
        # ``CrossEntropyLoss()`` in a forward: a module without parameters or buffers, built
        # from constants, is built for real now (the same object every call would build)
        # and its forward inlined. Anything with state of its own is not traced.
        import torch

        from .variables._modules import NNModuleVariable

        if not all(v.is_constant() for v in [*args, *kwargs.values()]):
            raise Unsupported(f"creating a {cls.__qualname__} module from values unknown at trace time")
        rng = torch.random.get_rng_state()
        try:
            module = cls(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as e:
            raise Unsupported(f"creating a {cls.__qualname__} module raised {type(e).__name__}: {e}") from e
        finally:
            torch.random.set_rng_state(rng)  # its __init__ must not move the user's RNG
        if any(True for _ in module.parameters()) or any(True for _ in module.buffers()):
            raise Unsupported(f"creating a {cls.__qualname__} module, which has parameters or buffers, "
                              "inside a compiled region")
        return NNModuleVariable(module, None)


def _check_inlinable(code: types.CodeType, qualname: str) -> None:
    if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE):
        raise Unsupported(f"calling the coroutine function {qualname}")


def bind_arguments(code: types.CodeType, qualname: str, args: list[VariableTracker],
                   kwargs: dict[str, VariableTracker], defaults: list[VariableTracker],
                   kwdefaults: dict[str, VariableTracker]) -> dict[str, VariableTracker]:
    """Python's argument binding for ``code``, on trackers; errors are Unsupported."""
    nargs, nkw = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    positional = list(names[:nargs])
    kwonly = list(names[nargs:nargs + nkw])
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    bound: dict[str, VariableTracker] = {}
    if len(args) > nargs and not has_varargs:
        raise Unsupported(f"{qualname}() takes {nargs} positional arguments but {len(args)} were given")
    for name, value in zip(positional, args, strict=False):
        bound[name] = value
    extra_kw: dict[str, VariableTracker] = {}
    posonly = set(positional[:code.co_posonlyargcount])
    for key, value in kwargs.items():
        if key in bound and key not in posonly:
            raise Unsupported(f"{qualname}() got multiple values for argument {key!r}")
        if (key in positional and key not in posonly) or key in kwonly:
            bound[key] = value
        elif has_varkw:
            extra_kw[key] = value
        else:
            raise Unsupported(f"{qualname}() got an unexpected keyword argument {key!r}")
    first_default = nargs - len(defaults)
    for i, name in enumerate(positional):
        if name not in bound:
            if i >= first_default:
                bound[name] = defaults[i - first_default]
            else:
                raise Unsupported(f"{qualname}() missing required argument {name!r}")
    for name in kwonly:
        if name not in bound:
            if name in kwdefaults:
                bound[name] = kwdefaults[name]
            else:
                raise Unsupported(f"{qualname}() missing keyword-only argument {name!r}")
    index = nargs + nkw
    if has_varargs:
        bound[names[index]] = TupleVariable(list(args[nargs:]))
        index += 1
    if has_varkw:
        bound[names[index]] = DictVariable(extra_kw)
    return bound


def _namedtuple_items(cls: type, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> list[VariableTracker]:
    """The items of namedtuple class ``cls`` called with ``args``/``kwargs``, bound as its
    generated ``__new__`` binds them (fields in order, then ``_field_defaults``). A class
    with a ``__new__`` or ``__init__`` of its own, or a call eager would refuse, is
    Unsupported (eager then runs it, and raises its own error)."""
    from .variables._constant import ConstantVariable, is_constant_value

    new = cls.__new__
    if getattr(new, "__globals__", {}).get("_tuple_new") is not tuple.__new__:
        raise Unsupported(f"{cls.__qualname__} has a __new__ of its own")
    if any("__init__" in k.__dict__ for k in cls.__mro__[:cls.__mro__.index(tuple)]):
        raise Unsupported(f"{cls.__qualname__} has an __init__ of its own")
    fields = cls._fields
    if len(args) > len(fields):
        raise Unsupported(f"{cls.__qualname__}() with {len(args)} positional arguments (it has {len(fields)} fields)")
    values = dict(zip(fields, args, strict=False))
    for name, value in kwargs.items():
        if name not in fields or name in values:
            raise Unsupported(f"{cls.__qualname__}() with an unexpected or repeated argument {name!r}")
        values[name] = value
    defaults = getattr(cls, "_field_defaults", {})
    for name in fields:
        if name not in values:
            if name not in defaults or not is_constant_value(defaults[name]):
                raise Unsupported(f"{cls.__qualname__}() without a value for {name!r}")
            values[name] = ConstantVariable(defaults[name])
    return [values[name] for name in fields]
