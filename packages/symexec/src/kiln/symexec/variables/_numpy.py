"""numpy in traced code: ndarrays over graph tensors, numpy functions, dtypes and constants.

An ndarray the trace reads from the frame is a graph input (the tensor ``torch.from_numpy``
gives over its memory, guarded like a tensor, plus its exact type, dtype object and
writeability); ``x.numpy()`` of a traced tensor is an ndarray over that very tensor, and
``torch.from_numpy(a)`` / ``torch.as_tensor(a)`` a tensor over the array's. Calls of numpy
functions (``np.sin``, ``np.sum``, ``np.ones_like``), methods (``a.sum(axis=0)``,
``a.astype(np.float32)``), operators and indexing on such arrays become torch operations of the
graph through ``_numpy_trace.call_numpy``, which checks each result against numpy's own
(dtype, shape, scalar or array, views). Arrays and numpy scalars the compiled code gives back,
or passes on at a graph break, are rebuilt from the graph's tensors (``NumpyArrayVariable``).

Known at trace time: dtypes (``np.float32``, ``a.dtype``), ``np.finfo``/``np.iinfo``, numpy
scalars computed from constants, ``a.shape``/``ndim``/``size``. Never traced: ``np.random``
(the call runs eagerly, so its numbers are eager's, at a graph break), and anything that needs
an array's values in Python (``float(s)``, ``a.tolist()``, ``if a.any():``).
"""

from __future__ import annotations

import functools
import math
import operator
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kiln.guards import AttrSource, EqualsMatch, IdMatch, Source, TypeMatch

from .._unsupported import MissingAttribute, Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable, FrozenObjectVariable, is_constant_value
from ._numpy_trace import NumpyArrayVariable, call_numpy, numpy_dtype_of, tnp
from ._tensor import TensorVariable

if TYPE_CHECKING:
    from .._builder import VariableBuilder
    from .._translator import Translator

__all__ = ["NumpyArrayVariable", "NumpyFunctionVariable", "NumpyTensorSource", "numpy_operator",
           "tensor_to_numpy", "torch_call_on_arrays", "wrap_numpy_value"]


# -- the graph input over an ndarray's memory ------------------------------------------------------

def _source_hash(self: Source) -> int:
    h = self._hash
    if not h:
        h = hash((type(self).__name__, str(self))) or 1
        object.__setattr__(self, "_hash", h)
    return h


@dataclass(frozen=True, slots=True, repr=False)
class NumpyTensorSource(Source):
    """The tensor over a frame ndarray's memory (``torch.from_numpy(base)``), or over a numpy
    scalar's value (``torch.as_tensor(base)``): what the graph takes for it."""

    base: Source
    convert: str = "from_numpy"  # or "as_tensor"
    _hash: int = field(default=0, init=False, repr=False, compare=False)
    _text: str = field(default="", init=False, repr=False, compare=False)

    def access(self, base_expr: str) -> str:
        return f"__import__('torch').{self.convert}({base_expr})"

    def fetch(self, L: dict[str, Any], G: dict[str, Any] | None) -> Any:
        import torch

        return getattr(torch, self.convert)(self.base.fetch(L, G))

    __hash__ = _source_hash


# -- frame values ---------------------------------------------------------------------------------

def _numpy_module_of(value: Any) -> bool:
    module = getattr(value, "__module__", None)
    return type(module) is str and (module == "numpy" or module.startswith("numpy."))


def wrap_numpy_value(builder: VariableBuilder, value: Any, source: Source | None) -> VariableTracker | None:
    """The tracker for a numpy value of the frame (with its guards), or None when ``value``
    is not one this module models."""
    np = sys.modules.get("numpy")
    if np is None:
        return None
    tp = type(value)
    if tp is np.ndarray or isinstance(value, (np.number, np.bool_)):
        return _wrap_array(builder, value, source)
    guard = (lambda: builder.output.guards.add(IdMatch(source, value))) if source is not None else (lambda: None)
    if isinstance(value, np.dtype):
        guard()
        return ConstantVariable(value, source)
    if isinstance(value, (np.finfo, np.iinfo)):
        guard()
        return FrozenObjectVariable(value)
    if isinstance(value, type):
        if issubclass(value, np.generic) or value in (np.finfo, np.iinfo, np.dtype):
            guard()
            return NumpyFunctionVariable(value, source)
        return None
    if callable(value) and _numpy_module_of(value):
        guard()
        return NumpyFunctionVariable(value, source)
    return None


def _wrap_array(builder: VariableBuilder, value: Any, source: Source | None) -> VariableTracker:
    import numpy as np
    import torch

    if source is None:
        raise Unsupported(f"a numpy {type(value).__name__} reached without a source")
    scalar = type(value) is not np.ndarray
    torch_dtype = _torch_dtype(value.dtype)
    if torch_dtype is None or numpy_dtype_of(torch_dtype) != value.dtype:
        raise Unsupported(f"{source} has numpy dtype {value.dtype}, which has no torch counterpart")
    if scalar:
        real = torch.as_tensor(value)
    else:
        if not value.flags.writeable:
            raise Unsupported(f"{source} is a read-only ndarray")
        try:
            real = torch.from_numpy(value)
        except (TypeError, ValueError, RuntimeError) as e:  # negative strides, byte order, ...
            raise Unsupported(f"{source}: torch.from_numpy refuses it ({e})") from None
    guards = builder.output.guards
    guards.add(TypeMatch(source, type(value)))
    if not scalar:
        guards.add(IdMatch(AttrSource(source, "dtype"), value.dtype))  # the byte order and type too
        guards.add(EqualsMatch(AttrSource(AttrSource(source, "flags"), "writeable"), True))
    output = builder.output
    # static sizes: numpy code is traced for the shapes it runs on (a new shape recompiles)
    dynamic = output.dynamic_shapes, output.dynamic_dims
    output.dynamic_shapes, output.dynamic_dims = False, {}
    try:
        tensor = builder.wrap(real, NumpyTensorSource(source, "as_tensor" if scalar else "from_numpy"))
    finally:
        output.dynamic_shapes, output.dynamic_dims = dynamic
    tracker = NumpyArrayVariable(tensor, value.dtype, scalar=scalar, source=source)
    if not scalar:
        builder.output.objects[id(value)] = tracker  # the same array by another path: one tracker
    return tracker


def _torch_dtype(dtype: Any) -> Any:
    import torch

    found = getattr(torch, dtype.name, None) if dtype.isnative else None
    return found if isinstance(found, torch.dtype) else None


# -- tensors and arrays ---------------------------------------------------------------------------

def tensor_to_numpy(tx: Translator, tensor: TensorVariable, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``t.numpy()``: an ndarray over the tensor itself (no copy, as in eager)."""
    import torch

    fake = tensor.fake
    if args or any(k != "force" or v.as_constant() for k, v in kwargs.items()):
        raise Unsupported(f"{tensor.describe()}.numpy() with arguments")
    why = ("it requires grad" if fake.requires_grad else "it is not on the CPU" if fake.device.type != "cpu"
           else "it is a tensor subclass" if tensor.pytype is not torch.Tensor
           else "its conjugate or negative bit is set" if fake.is_conj() or fake.is_neg()
           else f"numpy has no {fake.dtype}" if numpy_dtype_of(fake.dtype) is None else None)
    if why is not None:
        raise Unsupported(f"{tensor.describe()}.numpy(): eager raises, {why}")
    return NumpyArrayVariable(tensor, numpy_dtype_of(fake.dtype))


def torch_call_on_arrays(tx: Translator, fn: Any, args: list[VariableTracker],
                         kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """A torch function called with an ndarray: ``torch.from_numpy``, ``torch.as_tensor``,
    ``torch.asarray`` (the array's memory) and ``torch.tensor`` (a copy); others stop tracing."""
    import torch

    if not args or not isinstance(args[0], NumpyArrayVariable) or any(
            isinstance(a, NumpyArrayVariable) for a in [*args[1:], *kwargs.values()]):
        raise Unsupported(f"{getattr(fn, '__name__', fn)} with an ndarray argument")
    array = args[0]
    if fn is torch.from_numpy and len(args) == 1 and not kwargs:
        if array.scalar:
            raise Unsupported(f"torch.from_numpy({array.describe()}): eager raises TypeError")
        return tx.output.call_method("detach", [array.tensor], {})  # a new tensor over the same memory
    if fn in (torch.as_tensor, torch.asarray):
        alias = tx.output.call_method("clone" if array.scalar else "detach", [array.tensor], {})
        if len(args) == 1 and not kwargs:
            return alias
        return tx.output.call_function(fn, [alias, *args[1:]], kwargs)
    if fn is torch.tensor and len(args) == 1 and set(kwargs) <= {"dtype"}:
        copy = array.tensor
        if "dtype" in kwargs:
            copy = tx.output.call_method("to", [copy, kwargs["dtype"]], {})
        return tx.output.call_method("clone", [copy], {"memory_format": ConstantVariable(torch.contiguous_format)})
    raise Unsupported(f"{getattr(fn, '__name__', fn)} with an ndarray argument")


def numpy_operator(tx: Translator, fn: Any, args: list[VariableTracker]) -> VariableTracker:
    """An operator (``a + b``, ``a += 1``, ``-a``, ``a[i]``, ``a[i] = v``) with an ndarray
    operand: numpy's own operator, recorded through torch._numpy's."""
    if any(isinstance(a, TensorVariable) for a in args):
        raise Unsupported(f"{fn.__name__} of an ndarray and a tensor")
    what = f"{fn.__name__}({', '.join(a.describe() for a in args)})"
    return call_numpy(tx, what, fn, fn, args, {})


# -- attributes and methods of arrays ---------------------------------------------------------------

_ARRAY_VALUED = frozenset({"T", "mT", "real", "imag"})
# attributes whose value is not traced, and methods whose call is not (a graph break at the call)
_UNTRACED_ATTRIBUTES = frozenset({"flags", "strides", "base", "data", "ctypes", "flat", "__array_interface__"})
_NOT_TRACED = frozenset({"resize", "setflags", "dump", "dumps", "tofile", "tobytes", "tolist", "item",
                         "__array__", "byteswap", "newbyteorder", "view", "getfield", "setfield"})


def array_attribute(tx: Translator, array: NumpyArrayVariable, name: str) -> VariableTracker:
    """``a.name`` for an ndarray or numpy scalar of the trace."""
    if name in ("shape", "ndim", "size", "nbytes"):
        shape = array.shape(tx)
        size = math.prod(shape)
        value = {"shape": shape, "ndim": len(shape), "size": size, "nbytes": size * array.dtype.itemsize}[name]
        return ConstantVariable(value)
    if name == "dtype":
        return ConstantVariable(array.dtype)
    if name == "itemsize":
        return ConstantVariable(array.dtype.itemsize)
    if name == "__class__":
        return ConstantVariable(array.python_type())
    if name in _ARRAY_VALUED:
        return call_numpy(tx, f"{array.describe()}.{name}", operator.attrgetter(name), operator.attrgetter(name),
                          [array], {})
    if name in _UNTRACED_ATTRIBUTES:
        raise Unsupported(f"{array.describe()}.{name} is not traced")
    if not hasattr(array.python_type(), name):
        raise MissingAttribute(f"{array.describe()} has no attribute {name!r}")
    return NumpyMethodVariable(array, name)


def array_method(tx: Translator, array: NumpyArrayVariable, name: str, args: list[VariableTracker],
                 kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``a.name(*args, **kwargs)``: numpy's method, recorded through torch._numpy's."""
    if name in _NOT_TRACED:
        raise Unsupported(f"{array.describe()}.{name}() is not traced")
    if getattr(tnp().ndarray, name, None) is None:
        raise Unsupported(f"{array.describe()}.{name}() has no torch translation")

    def method(obj: Any, *a: Any, **k: Any) -> Any:
        return getattr(obj, name)(*a, **k)

    return call_numpy(tx, f"{array.describe()}.{name}()", method, method, [array, *args], kwargs)


class NumpyMethodVariable(VariableTracker):
    """``a.sum`` before it is called (a bound method of a traced array)."""

    __slots__ = ("array", "name")

    def __init__(self, array: NumpyArrayVariable, name: str) -> None:
        super().__init__(None)
        self.array = array
        self.name = name

    def describe(self) -> str:
        return f"method {self.name} of {self.array.describe()}"

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return array_method(tx, self.array, self.name, args, kwargs)

    def rebuild_text(self, expr: Any, ref: Any) -> str:
        return f"{expr(self.array)}.{self.name}"


# -- numpy functions ----------------------------------------------------------------------------------

@functools.cache
def _trace_time_functions() -> frozenset[Any]:
    """numpy functions without effects whose result, for constant arguments, is a constant of
    dtypes or limits (evaluated at trace time)."""
    import numpy as np

    return frozenset({np.result_type, np.promote_types, np.can_cast, np.issubdtype, np.min_scalar_type,
                      np.finfo, np.iinfo, np.dtype, np.isscalar, getattr(np, "isdtype", np.issubdtype)})


def _torch_counterpart(fn: Any) -> Any:
    """The torch._numpy function standing for numpy's ``fn`` (the same name in the same
    namespace, where numpy's is that very object), or None."""
    import numpy as np

    name = getattr(fn, "__name__", None)
    if type(name) is not str:
        return None
    module = tnp()
    for real_ns, torch_ns in ((np, module), (np.linalg, module.linalg), (np.fft, module.fft)):
        if getattr(real_ns, name, None) is fn:
            return getattr(torch_ns, _SAME_AS.get(name, name), None)
    return None


# numpy functions that are another's equivalent on exact ndarrays (the only arrays traced)
_SAME_AS = {"asanyarray": "asarray"}


class NumpyFunctionVariable(VariableTracker):
    """A numpy function, ufunc or scalar type (``np.sin``, ``np.sum``, ``np.float32``): known at
    trace time; a call records torch operations (``call_numpy``) or, on constants, is evaluated."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.fn = fn

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.fn

    def python_type(self) -> type:
        return type(self.fn)

    def describe(self) -> str:
        return f"numpy.{getattr(self.fn, '__name__', self.fn)}"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        try:
            value = getattr(self.fn, name)
        except AttributeError:
            raise MissingAttribute(f"{self.describe()} has no attribute {name!r}") from None
        if is_constant_value(value):
            return ConstantVariable(value)
        raise Unsupported(f"{self.describe()}.{name} is not traced")

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        import numpy as np

        fn = self.fn
        if _numpy_module_of(fn) and fn.__module__.startswith("numpy.random"):
            raise Unsupported(f"{self.describe()}: numpy's random numbers are not traced (the call runs "
                              "eagerly, so they are eager's)")
        constant = _on_constants(fn, args, kwargs)
        if constant is not None:
            return constant
        if fn in (np.asarray, np.array, np.asanyarray, np.ascontiguousarray) and args \
                and isinstance(args[0], TensorVariable):
            args = [tensor_to_numpy(tx, args[0], [], {}), *args[1:]]  # numpy reads the tensor's memory
        target = _torch_counterpart(fn)
        if target is None:
            raise Unsupported(f"{self.describe()} has no torch translation")
        return call_numpy(tx, f"{self.describe()}()", fn, target, args, kwargs)


def _on_constants(fn: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """``fn(*args)`` at trace time, where ``fn`` has no effect (a ufunc without ``out``, a
    scalar type, a dtype function), every argument is a constant (an array stands for its
    dtype in ``np.finfo``/``np.iinfo``) and the result is a constant; else None."""
    import numpy as np

    values = [*args, *kwargs.values()]
    if fn in (np.finfo, np.iinfo) and len(values) == 1 and isinstance(values[0], NumpyArrayVariable):
        values = [ConstantVariable(values[0].dtype)]
        args, kwargs = values, {}
    pure = (isinstance(fn, np.ufunc) and "out" not in kwargs) or fn in _trace_time_functions() or (
        isinstance(fn, type) and issubclass(fn, np.generic))
    if not pure or not all(v.is_constant() for v in values):
        return None
    try:
        result = fn(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
    except Exception as e:
        from ._errors import traced_error

        raise traced_error(e) from e
    if isinstance(result, (np.finfo, np.iinfo)):
        return FrozenObjectVariable(result)  # read-only: .eps, .max, .bits, ...
    if is_constant_value(result):
        return ConstantVariable(result)
    return None
