"""Running a numpy operation as torch operations of the graph, checked against numpy itself.

A numpy call on traced arrays (``np.sin(a)``, ``a.sum(axis=0)``, ``a + 1``, ``a[0]``) is run
twice at trace time:

- through ``torch._numpy`` (torch's numpy-compatible layer over tensors) on ndarrays that
  wrap the arrays' fake tensors, under a torch-function mode that records every torch call it
  makes as a node of the graph (``OutputGraph.call_function``/``call_method``), so the graph
  holds plain torch operations on the same data;
- through numpy itself on stand-in arrays of the same dtypes and shapes (zeros), giving what
  eager's result is: an ndarray or a numpy scalar, its dtype and shape, and which arguments it
  shares memory with.

The two must agree on every one of those, or tracing stops there (a graph break: eager runs
the call): numpy's type promotion (float64 defaults, NEP 50 scalars) and its scalar-versus-
array results are numpy's own answers, never a re-implementation. Where ``torch._numpy`` gives
a tensor sharing memory with an argument and numpy gives a copy (``astype`` to the same dtype,
an element read), the result is cloned in the graph; the other way round (numpy a view, torch
a copy) stops tracing, since later writes through the view would differ.

Invariants: a torch call inside ``torch._numpy`` that needs tensor data (``.item()``,
``bool(t)``), that returns a value other than a tensor or metadata, or that sees a tensor the
trace does not know stops tracing, even when ``torch._numpy`` would catch the error. Symbolic
sizes (of a dynamic tensor made an array) are specialized where numpy code reads them, a shape
guard: numpy code is traced for the shapes it runs on.
"""

from __future__ import annotations

import functools
import operator
import sys
import warnings
from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._base import VariableTracker
from ._constant import ConstantVariable, is_constant_value
from ._containers import ListVariable, TupleVariable
from ._tensor import TensorVariable

if TYPE_CHECKING:
    from .._translator import Translator

__all__ = ["NumpyArrayVariable", "call_numpy", "numpy_dtype_of", "tnp"]


@functools.cache
def tnp() -> Any:
    """``torch._numpy``, with numpy's default dtypes (float64, complex128, int64).

    ``torch._numpy`` reads its defaults from ``torch._dynamo.config`` the first time it needs
    them; importing that would load torch's own frontend, so when it is not loaded the same
    defaults (the config's) are set directly."""
    import torch
    import torch._numpy as module
    from torch._numpy import _dtypes_impl

    if _dtypes_impl._default_dtypes is None and "torch._dynamo.config" not in sys.modules:
        _dtypes_impl._default_dtypes = _dtypes_impl.DefaultDTypes(
            float_dtype=torch.float64, complex_dtype=torch.complex128, int_dtype=torch.int64)
    return module


def numpy_dtype_of(torch_dtype: Any) -> Any:
    """The numpy dtype a tensor of ``torch_dtype`` converts to (``Tensor.numpy()``); None when
    numpy has none (bfloat16, the float8 types)."""
    import numpy as np

    try:
        return np.dtype(str(torch_dtype).removeprefix("torch."))
    except TypeError:
        return None


class NumpyArrayVariable(VariableTracker):
    """An ndarray (or, with ``scalar``, a numpy scalar such as ``np.float32``) whose data is a
    tensor of the graph: ``tensor`` (a TensorVariable) holds its elements, ``dtype`` is the
    numpy dtype eager's value has. Operations on it run through ``call_numpy``.

    Without a source it is rebuilt after the graph from the tensor (``rebuild_text``):
    ``t.numpy()``, which shares the tensor's memory, or ``t.numpy()[()]`` for a scalar."""

    __slots__ = ("dtype", "scalar", "tensor")

    def __init__(self, tensor: TensorVariable, dtype: Any, *, scalar: bool = False, source: Any = None) -> None:
        super().__init__(source)
        self.tensor = tensor
        self.dtype = dtype
        self.scalar = scalar

    def python_type(self) -> type:
        import numpy as np

        return self.dtype.type if self.scalar else np.ndarray

    def describe(self) -> str:
        kind = f"numpy {self.dtype.name} scalar" if self.scalar else f"ndarray of {self.dtype.name}"
        where = str(self.source) if self.source is not None else f"%{self.tensor.node.name}"
        return f"{kind} {where}"

    def shape(self, tx: Translator) -> tuple[int, ...]:
        """The array's shape, as ints: a symbolic size (a dynamic tensor's) is specialized."""
        return tuple(concrete(tx, s) for s in self.tensor.fake.shape)

    def rebuild_text(self, expr: Any, ref: Any) -> str:
        return f"{ref(_to_scalar if self.scalar else _to_array, 'to_numpy')}({expr(self.tensor)})"

    def get_attr(self, tx: Translator, name: str) -> VariableTracker:
        from ._numpy import array_attribute

        return array_attribute(tx, self, name)

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        from ._numpy import array_method

        return array_method(tx, self, name, args, kwargs)

    def iterate(self, tx: Translator) -> list[VariableTracker]:
        shape = self.shape(tx)
        if self.scalar or not shape:
            raise Unsupported(f"iterating over {self.describe()} (eager raises TypeError)")
        return [call_numpy(tx, f"{self.describe()}[{i}]", operator.getitem, operator.getitem,
                           [self, ConstantVariable(i)], {}) for i in range(shape[0])]

    def truth(self, tx: Translator) -> bool:
        raise Unsupported(f"the truth value of {self.describe()} depends on its data (a data-dependent branch)")


def concrete(tx: Translator, value: Any) -> Any:
    """``value``, with a symbolic size or number made its value now: a shape guard (as
    ``int(n)`` of a dynamic size does), so the trace is for that value. numpy code is traced
    for the shapes it runs on; a size that depends on data stops tracing."""
    import torch

    if not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value
    from ._symnumber import is_unbacked

    if is_unbacked(value):
        raise Unsupported(f"numpy code needs the value of {value}, which depends on tensor data")
    tx.output.note_specialization(value)
    return {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(value)](value)


def _to_array(t: Any) -> Any:
    return t.numpy()


def _to_scalar(t: Any) -> Any:
    return t.numpy()[()]


# -- recording torch calls ------------------------------------------------------------------------

# torch calls inside torch._numpy whose answer is metadata (no tensor): computed on the fakes
_METADATA = frozenset({
    "dim", "ndimension", "size", "numel", "nelement", "stride", "is_floating_point", "is_complex",
    "element_size", "is_contiguous", "result_type", "promote_types", "can_cast", "broadcast_shapes",
    "is_tensor", "get_default_dtype", "__len__", "storage_offset", "is_signed",
})
# tensor-valued properties (``t.T``): a ``getattr`` node, as TensorVariable records them
_TENSOR_PROPERTIES = frozenset({"T", "mT", "H", "mH", "real", "imag"})
_DATA = frozenset({"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__", "__complex__"})
_OPERATOR_METHODS = {"__getitem__": operator.getitem, "__setitem__": operator.setitem}


def _recorder_class() -> type:
    from torch.overrides import TorchFunctionMode

    class Recorder(TorchFunctionMode):
        """Records each torch call ``torch._numpy`` makes as a node (see the module docstring);
        ``failure`` keeps the first Unsupported raised, which ``torch._numpy`` may catch."""

        def __init__(self, tx: Translator) -> None:
            super().__init__()
            self.tx = tx
            self.failure: Unsupported | None = None

        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            try:
                return _record_call(self.tx, func, args, kwargs or {})
            except Unsupported as e:
                self.failure = self.failure or e
                raise

    return Recorder


_Recorder = functools.cache(_recorder_class)


def _record_call(tx: Translator, func: Any, args: tuple, kwargs: dict) -> Any:
    import torch

    output = tx.output
    name = getattr(func, "__name__", "")
    if name == "__get__":  # a property of a tensor: metadata, or a tensor (``t.T``)
        attr = func.__self__.__name__
        if attr in _TENSOR_PROPERTIES:
            return _fakes(output.call_function(getattr, [_tracker(tx, args[0]), ConstantVariable(attr)], {}))
        if attr in ("grad", "data", "_base", "grad_fn"):
            raise Unsupported(f"torch._numpy read .{attr} of a tensor")
        return func(*args, **kwargs)
    if name in _DATA:
        raise Unsupported(f"torch._numpy called {name} on a tensor, which needs its data at trace time")
    qualname = getattr(func, "__qualname__", "") or ""
    method = qualname.startswith(("TensorBase.", "Tensor.", "_TensorBase.")) and args \
        and isinstance(args[0], torch.Tensor)
    if name in _METADATA:
        with output.fake_mode:
            return func(*args, **kwargs)
    vargs = [_tracker(tx, a) for a in args]
    vkwargs = {k: _tracker(tx, v) for k, v in kwargs.items()}
    if method and name in _OPERATOR_METHODS:
        result = output.call_function(_OPERATOR_METHODS[name], vargs, vkwargs)
    elif method:
        result = output.call_method(name, vargs, vkwargs)
    else:
        result = output.call_function(func, vargs, vkwargs)
    if not _holds_tensor(result) and not (result.is_constant() and result.as_constant() is None):
        raise Unsupported(f"torch._numpy called {qualname or name}, which gave {result.describe()} "
                          "(not a tensor): kiln does not trace it")
    return _fakes(result)


def _holds_tensor(v: VariableTracker) -> bool:
    if isinstance(v, TensorVariable):
        return True
    if isinstance(v, (TupleVariable, ListVariable)):
        return any(_holds_tensor(i) for i in v.items)
    return False


def _tracker(tx: Translator, value: Any) -> VariableTracker:
    """The tracker of an argument torch._numpy passes to a torch call."""
    from kiln.symshapes.bridge import FakeTensor

    if isinstance(value, FakeTensor):
        known = tx.output.tensors.get(id(value))
        if known is None:
            raise Unsupported("torch._numpy passed a tensor the trace did not make")
        return known
    import torch

    if isinstance(value, torch.Tensor):
        raise Unsupported("torch._numpy made a real tensor while tracing")
    if isinstance(value, (tuple, list)):  # torch.Size too
        items = [_tracker(tx, v) for v in value]
        if all(type(i) is ConstantVariable for i in items):
            values = [i.as_constant() for i in items]
            return ConstantVariable(torch.Size(values) if type(value) is torch.Size else type(value)(values))
        return TupleVariable(items) if isinstance(value, tuple) else ListVariable(items)
    value = concrete(tx, value)  # a size computed from a dynamic tensor's
    if is_constant_value(value):
        return ConstantVariable(value)
    raise Unsupported(f"torch._numpy passed a {type(value).__name__} to a torch call")


def _fakes(v: VariableTracker) -> Any:
    """The value torch._numpy gets back for a recorded call's result."""
    from ._symnumber import SymNumberVariable

    if isinstance(v, TensorVariable):
        return v.fake
    if isinstance(v, SymNumberVariable):
        raise Unsupported("torch._numpy needed a number computed from tensor data")
    if isinstance(v, TupleVariable):
        items = [_fakes(i) for i in v.items]
        tp = v.tuple_type
        if tp is tuple or tp.__module__ == "torch":  # torch.Size
            return tp(items)
        return tp(*items) if hasattr(tp, "_fields") else tp(items)  # namedtuple / torch.return_types
    if isinstance(v, ListVariable):
        return [_fakes(i) for i in v.items]
    return v.as_constant()


# -- one numpy operation ------------------------------------------------------------------------------

def call_numpy(tx: Translator, what: str, numpy_fn: Any, torch_fn: Any, args: list[VariableTracker],
               kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``numpy_fn(*args, **kwargs)`` as eager numpy computes it, recorded as the torch
    operations of ``torch_fn`` (the ``torch._numpy`` counterpart, called with the same
    arguments); see the module docstring. ``what`` names the call in reasons."""
    stand_ins = _StandIns(tx)
    real_args = [stand_ins.numpy(a, what) for a in args]
    real_kwargs = {k: stand_ins.numpy(v, what) for k, v in kwargs.items()}
    import numpy as np

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            expected = numpy_fn(*real_args, **real_kwargs)
    except Exception as e:
        raise Unsupported(f"{what} raised {type(e).__name__} on stand-ins of its arguments ({e}); "
                          "eager runs it") from None
    module = tnp()
    recorder = _Recorder()(tx)
    try:
        with recorder:  # numpy scalars among the arguments become tensors of the graph too
            t_args = [stand_ins.torch(a) for a in args]
            t_kwargs = {k: stand_ins.torch(v) for k, v in kwargs.items()}
            result = torch_fn(*t_args, **t_kwargs)
    except Unsupported:
        raise
    except Exception as e:
        raise recorder.failure or Unsupported(
            f"{what} failed in torch._numpy: {type(e).__name__}: {e}") from None
    if recorder.failure is not None:
        raise recorder.failure
    return _Result(tx, what, stand_ins, module).convert(result, expected)


class _StandIns:
    """The arguments of one numpy call, for numpy (zeros of each array's dtype and shape, one
    per tracker) and for torch._numpy (ndarrays over the arrays' fake tensors)."""

    def __init__(self, tx: Translator) -> None:
        self.tx = tx
        self.arrays: dict[int, tuple[NumpyArrayVariable, Any, Any]] = {}  # id(tracker) -> (it, numpy, tnp)

    def numpy(self, v: VariableTracker, what: str) -> Any:
        import numpy as np

        if isinstance(v, NumpyArrayVariable):
            known = self.arrays.get(id(v))
            if known is None:
                real = np.zeros(v.shape(self.tx), v.dtype)
                real = real[()] if v.scalar else real
                known = self.arrays[id(v)] = (v, real, tnp().ndarray(v.tensor.fake))
            return known[1]
        if isinstance(v, TupleVariable):
            return tuple(self.numpy(i, what) for i in v.items)
        if isinstance(v, ListVariable):
            return [self.numpy(i, what) for i in v.items]
        if isinstance(v, TensorVariable):
            raise Unsupported(f"{what} with a tensor argument ({v.describe()}): numpy would convert it")
        if v.is_constant():
            value = v.as_constant()
            if type(value) is slice or is_constant_value(value) or _is_dtype_like(value):
                return value
        raise Unsupported(f"{what} with {v.describe()} as an argument")

    def torch(self, v: VariableTracker) -> Any:
        if isinstance(v, NumpyArrayVariable):
            return self.arrays[id(v)][2]
        if isinstance(v, TupleVariable):
            return tuple(self.torch(i) for i in v.items)
        if isinstance(v, ListVariable):
            return [self.torch(i) for i in v.items]
        return _torch_constant(v.as_constant())

    def argument_of(self, real: Any) -> NumpyArrayVariable | None:
        """The tracker whose numpy stand-in is ``real`` (numpy gave an argument back)."""
        import numpy as np

        if type(real) is not np.ndarray:  # numpy scalars are immutable (np.True_ is one object)
            return None
        return next((t for t, r, _ in self.arrays.values() if r is real), None)


def _is_dtype_like(value: Any) -> bool:
    import numpy as np

    return isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, (np.generic, float, int,
                                                                                          bool, complex)))


def _torch_constant(value: Any) -> Any:
    """A constant argument as torch._numpy takes it: numpy scalars become 0-d arrays of their
    dtype (strongly typed, as in numpy 2), numpy dtypes and scalar types torch._numpy's."""
    import numpy as np

    module = tnp()
    if isinstance(value, np.generic):
        return module.asarray(value.item(), dtype=value.dtype.name)
    if isinstance(value, np.dtype):
        return module.dtype(value.name)
    if isinstance(value, type) and issubclass(value, np.generic):
        try:
            return module.dtype(np.dtype(value).name)
        except TypeError:  # an abstract type: np.floating, np.integer
            found = getattr(module, value.__name__, None)
            if found is None:
                raise Unsupported(f"numpy type {value.__name__} has no torch._numpy counterpart") from None
            return found
    if type(value) is tuple:
        return tuple(_torch_constant(v) for v in value)
    return value


class _Result:
    """torch._numpy's result of one call made into trackers, checked against numpy's."""

    def __init__(self, tx: Translator, what: str, stand_ins: _StandIns, module: Any) -> None:
        self.tx = tx
        self.what = what
        self.stand_ins = stand_ins
        self.ndarray = module.ndarray
        self.dtype = module._dtypes.DType

    def convert(self, value: Any, expected: Any) -> VariableTracker:
        import numpy as np

        if isinstance(value, self.ndarray):
            if type(expected) is not np.ndarray and not isinstance(expected, np.generic):
                raise self._differs(f"an ndarray where numpy gives a {type(expected).__name__}")
            return self._array(value.tensor, expected)
        if isinstance(value, (tuple, list)) and type(expected) is type(value) and len(value) == len(expected):
            items = [self.convert(v, e) for v, e in zip(value, expected, strict=True)]
            return TupleVariable(items) if type(value) is tuple else ListVariable(items)
        if isinstance(value, self.dtype) and isinstance(expected, np.dtype):
            if np.dtype(value.name) != expected:
                raise self._differs(f"dtype {value.name} where numpy gives {expected}")
            return ConstantVariable(expected)
        if value is None and expected is None:
            return ConstantVariable(None)
        if is_constant_value(value) and type(value) is type(expected) and value == expected:
            return ConstantVariable(value)
        raise self._differs(f"a {type(value).__name__} where numpy gives a {type(expected).__name__}")

    def _differs(self, how: str) -> Unsupported:
        return Unsupported(f"{self.what}: torch._numpy gives {how}; eager runs it")

    def _array(self, fake: Any, expected: Any) -> VariableTracker:
        import numpy as np

        tensor = self.tx.output.tensors.get(id(fake))
        if tensor is None:
            raise self._differs("a tensor the trace did not make")
        if numpy_dtype_of(fake.dtype) != expected.dtype:
            raise self._differs(f"dtype {fake.dtype} where numpy gives {expected.dtype}")
        if tuple(concrete(self.tx, s) for s in fake.shape) != expected.shape:
            raise self._differs(f"shape {tuple(fake.shape)} where numpy gives {expected.shape}")
        scalar = isinstance(expected, np.generic)
        same = self.stand_ins.argument_of(expected)
        if same is not None:  # numpy gave that very argument back (``out=``, in place, asarray)
            if same.tensor is not tensor:
                raise self._differs("a new array where numpy gives its argument back")
            return same
        tensor = self._alias_as_numpy(tensor, expected)
        return NumpyArrayVariable(tensor, expected.dtype, scalar=scalar)

    def _alias_as_numpy(self, tensor: TensorVariable, expected: Any) -> TensorVariable:
        """``tensor``, or a copy of it where numpy's result shares no memory with the arguments
        whose memory torch's result shares (storages compared per argument tracker)."""
        import numpy as np

        storage = tensor.fake.fake_storage
        shares_torch = any(arg.tensor.fake.fake_storage is storage for arg, _, _ in self.stand_ins.arrays.values())
        numpy_storages = {id(arg.tensor.fake.fake_storage) for arg, real, _ in self.stand_ins.arrays.values()
                          if type(expected) is np.ndarray and isinstance(real, np.ndarray)
                          and np.may_share_memory(expected, real)}
        if numpy_storages - {id(storage)}:
            raise self._differs("a copy where numpy gives a view of an argument")
        if shares_torch and not numpy_storages:
            return self.tx.output.call_method("clone", [tensor], {})
        return tensor
