"""FakeTensorMode: the dispatch mode that runs ATen ops on fake tensors.

While a FakeTensorMode is active (``with mode:``), every ATen op call goes to
``mode.dispatch``: fake inputs are replaced by their meta tensors, real tensors met on the
way become (static) fakes, device arguments become ``meta``, the op runs through torch's own
meta kernel, and each meta result is wrapped as a FakeTensor on the device the op would have
produced. Ops whose output size depends on data (``nonzero``, ``.item()``, ...) are answered
by ``data_dependent_rules`` with unbacked symbols instead. Calls whose arguments are all
static are looked up in a ``DispatchCache`` first (same input metadata, same outputs).

With a ShapeEnv the mode supports symbolic sizes: entering it enables torch's Python
dispatcher (see ``_torch_internals``) so composite kernels decompose symbolically, and every
decision a kernel takes on a size is recorded in that ShapeEnv. Without one, shapes are
static and nothing of the kind is entered.

Invariants:
- A FakeTensor belongs to exactly one mode; mixing modes is an error.
- An output that the op's schema declares as a view of an input shares that input's
  FakeStorage; an in-place or ``out=`` result is the input FakeTensor object itself, with
  its sizes and strides updated when an inplace-view op changed them (``t_``,
  ``squeeze_``); resizing a fake in place (``resize_``, growing an ``out=`` tensor) raises.
- An op with no meta kernel raises ``UnsupportedOpError`` naming the op, unless its real
  kernel run on zeros tells its results' metadata (static inputs, ``_real_fallback``).
- While the mode is entered (and while ``from_real`` runs) the user's torch-function and
  torch-dispatch modes and default saved-tensors hooks are off torch's stacks: they never
  see fake ops. They are back, in order, when the mode exits, exceptions included.
- The mode never asks torch to push it over another FAKE-key mode (torch mishandles the
  refusal; see ``_torch_internals.active_fake_mode``): over another kiln mode entering is
  a ValueError; torch's own fake mode is set aside while this one is entered and is
  active again after it exits.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from kiln.symshapes._shape_env import ShapeEnv
from kiln.symshapes.bridge._dispatch_cache import DispatchCache
from kiln.symshapes.bridge._fake_tensor import FakeStorage, FakeTensor
from kiln.symshapes.bridge._fast_meta import fast_rule
from kiln.symshapes.bridge._real_fallback import run_real_fallback
from kiln.symshapes.bridge._shape_env_view import ShapeEnvView
from kiln.symshapes.bridge._torch_internals import (
    FAKE_MODE_KEY,
    TorchDispatchMode,
    active_fake_mode,
    allow_unavailable_devices,
    mutate_metadata,
    op_schema,
    python_dispatcher,
    restore_fake_mode,
    restore_user_state,
    set_aside_fake_mode,
    set_aside_user_state,
)

__all__ = ["FakeTensorMode", "UnsupportedOpError", "data_dependent_rules"]

_META = torch.device("meta")
_METADATA_MUTATIONS = frozenset({"resize_", "resize_as_", "set_"})
_METADATA_QUERIES = {
    "size": torch.Tensor.size,
    "sym_size": torch.Tensor.size,
    "stride": torch.Tensor.stride,
    "sym_stride": torch.Tensor.stride,
    "numel": torch.Tensor.numel,
    "sym_numel": torch.Tensor.numel,
    "storage_offset": torch.Tensor.storage_offset,
    "sym_storage_offset": torch.Tensor.storage_offset,
    "dim": torch.Tensor.dim,
    "is_contiguous": torch.Tensor.is_contiguous,
}
_CPU = torch.device("cpu")
# ops whose CPU kernel gives these results in the dtype of the first input, where the meta
# kernel (written for the other devices) gives the computation dtype
_CPU_INPUT_DTYPE_RESULTS = {torch.ops.aten.native_layer_norm.default: (1, 2)}
# convolutions whose CPU kernels give a channels-last result when the input or the weight is
# channels-last, where the meta kernel (which cannot tell the backend) gives a contiguous one
_CPU_LAYOUT_FOLLOWING = frozenset({torch.ops.aten.convolution.default})

data_dependent_rules: dict[str, Callable] = {}
"""Op name (``aten.nonzero.default``'s packet name ``nonzero``) -> rule(mode, func, args, kwargs)."""


class UnsupportedOpError(NotImplementedError):
    """An ATen op that fake tensors cannot run (no meta kernel, or data-dependent output)."""

    def __init__(self, func: object, why: str) -> None:
        self.op = str(func)
        super().__init__(f"kiln fake tensors cannot run {func}: {why}")


@dataclass(slots=True, frozen=True)
class _OpInfo:
    """What the schema says about aliasing, cached per op overload."""

    # For each return: index of the argument it aliases (view) or writes (in-place/out).
    aliases: tuple[int | None, ...]
    writes: tuple[bool, ...]
    arg_names: tuple[str, ...]
    device_index: int | None
    name: str  # the overload packet's name (``nonzero`` for ``aten.nonzero.default``)
    mutates_metadata: bool  # in-place change of an input's sizes/strides (t_, resize_, ...)
    inplace_view: bool  # tagged inplace_view: only sizes/strides change (t_, squeeze_, ...)
    pointwise: bool  # tagged pointwise
    fast: Callable | None = None  # its rule in ``_fast_meta`` (symbolic sizes), if any


def _op_info(func) -> _OpInfo:
    schema = op_schema(func)
    arg_sets = [(a.alias_info.before_set if a.alias_info else None) for a in schema.arguments]
    aliases, writes = [], []
    for ret in schema.returns:
        index = None
        if ret.alias_info is not None:
            wanted = set(ret.alias_info.before_set)
            for i, sets in enumerate(arg_sets):
                # A list return (``Tensor(a)[]``) exposes no alias set of its own: its
                # elements alias the one annotated argument.
                if sets and (set(sets) & wanted or not wanted):
                    index = i
                    break
        aliases.append(index)
        writes.append(bool(ret.alias_info and ret.alias_info.is_write))
    names = tuple(a.name for a in schema.arguments)
    device_index = names.index("device") if "device" in names else None
    name = func.overloadpacket.__name__
    inplace_view = torch.Tag.inplace_view in func.tags
    mutates = inplace_view or name in _METADATA_MUTATIONS
    info = _OpInfo(tuple(aliases), tuple(writes), names, device_index, name, mutates, inplace_view,
                   torch.Tag.pointwise in func.tags)
    return dataclasses.replace(info, fast=fast_rule(info))


def _retarget_device(index: int, args: tuple, kwargs: dict, has_inputs: bool):
    """Point the op's ``device`` argument at meta; return the device it asked for (or None)."""
    if "device" in kwargs:
        device = kwargs["device"]
        if device is not None or not has_inputs:
            kwargs["device"] = _META
    elif len(args) > index:
        device = args[index]
        if device is not None or not has_inputs:
            args = (*args[:index], _META, *args[index + 1 :])
    else:
        device = None
        if not has_inputs:
            kwargs["device"] = _META
    return args, kwargs, (torch.device(device) if device is not None else None)


class FakeTensorMode(TorchDispatchMode):
    """Run ATen ops on FakeTensors; ``shape_env`` enables symbolic and unbacked sizes."""

    def __init__(self, shape_env: ShapeEnv | None = None, *, cache: DispatchCache | bool | None = True) -> None:
        """``shape_env``: enables symbolic and unbacked sizes. ``cache``: a DispatchCache to
        share between modes, True for a fresh one, False/None to always run meta kernels."""
        super().__init__()
        self.cache = DispatchCache() if cache is True else (cache or None)
        self._mode_key = FAKE_MODE_KEY
        self.shape_env = shape_env
        self.env_view = ShapeEnvView(shape_env) if shape_env is not None else None
        self._infos: dict[object, _OpInfo] = {}
        self._storages: dict[tuple, tuple[FakeStorage, StorageWeakRef]] = {}
        self._exits: list[contextlib.ExitStack | None] = []
        self._materializing = 0
        # what ``_fast_meta``'s probes gave (key: op, argument kinds), shared through the cache
        self.fast_probes: dict[tuple, object] = self.cache.probes if self.cache is not None else {}
        self.fast_hits = 0  # calls answered by a ``_fast_meta`` rule

    # ------------------------------------------------------------ context
    def __enter__(self):
        if self._exits:
            # Re-entering the active mode (a helper that says ``with mode:`` again) is a
            # no-op; torch allows one FAKE-key mode at a time.
            self._exits.append(None)
            return self
        # Checked before torch is asked: torch's push of a second FAKE-key mode raises after
        # dropping a reference it never took (the mode object is freed while still in use,
        # a crash at a later garbage collection) and leaves TorchDispatchMode's flags pushed.
        active = active_fake_mode()
        if isinstance(active, FakeTensorMode):
            raise ValueError("cannot enter this FakeTensorMode while another fake mode is active "
                             "(a FakeTensor belongs to one mode)")
        allow_unavailable_devices()
        stack = contextlib.ExitStack()
        try:
            # The user's modes and saved-tensors hooks never see fake ops (put back last).
            stack.callback(restore_user_state, set_aside_user_state())
            if active is not None:
                # torch's own fake mode (a torch.compile backend running kiln): set aside
                # while this one is active and put back after, as torch's mode does to ours.
                stack.callback(restore_fake_mode, set_aside_fake_mode())
            if self.shape_env is not None:
                stack.enter_context(python_dispatcher())
            entered = super().__enter__()
        except BaseException:
            stack.close()
            raise
        self._exits.append(stack)
        return entered

    def __exit__(self, *exc):
        stack = self._exits.pop()
        if stack is None:
            return None
        try:
            return super().__exit__(*exc)
        finally:
            stack.close()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self._materializing:
            return func(*args, **(kwargs or {}))
        return self.dispatch(func, args, kwargs or {})

    @contextlib.contextmanager
    def materializing(self):
        """Inside, ops run for real (to build real tensors while the mode is active)."""
        self._materializing += 1
        try:
            yield
        finally:
            self._materializing -= 1

    # ------------------------------------------------------------ dispatch
    def dispatch(self, func, args: tuple, kwargs: dict):
        """Run ATen op ``func`` on fake (or real) arguments; return fake results."""
        info = self._infos.get(func)
        if info is None:
            info = self._infos[func] = _op_info(func)
        query = _METADATA_QUERIES.get(info.name)
        if query is not None and args and isinstance(args[0], FakeTensor):
            # size()/stride()/numel() reached the dispatcher (a decomposition asked an
            # op for them): answer from the fake's own metadata.
            return query(args[0].meta, *args[1:], **kwargs)
        rule = data_dependent_rules.get(info.name)
        if rule is not None:
            result = rule(self, func, args, kwargs)
            if result is not NotImplemented:
                return result
        # by hints, the cache's size-oblivious answers are not the ones wanted
        cacheable = self.cache is not None and not info.mutates_metadata and not self._by_hints()
        key = self.cache.key(func, args, kwargs, self.shape_env) if cacheable else None
        if key is None:
            return self.run_meta(func, args, kwargs, info)
        inputs: list[FakeTensor] = []
        self._collect((args, tuple(kwargs.values())), inputs)
        spec = self.cache.entries.get(key)
        if spec is not None:
            self.cache.hits += 1
            return self.cache.replay(spec, inputs, self)
        self.cache.misses += 1
        out = self.run_meta(func, args, kwargs, info)
        self.cache.store(key, inputs, out)
        if self.shape_env is not None:
            # The call may have taught the ShapeEnv replacements: file it under the
            # simplified key too, which is what the next identical call will present.
            later = self.cache.key(func, args, kwargs, self.shape_env)
            if later is not None and later != key:
                self.cache.store(later, inputs, out)
        return out

    def _by_hints(self) -> bool:
        return self.shape_env is not None and self.shape_env.deciding_by_hints

    def run_meta(self, func, args: tuple, kwargs: dict, info: _OpInfo | None = None):
        """Run ``func`` through its meta kernel (no data-dependent rule) and wrap the results."""
        if info is None:
            info = self._infos.get(func) or self._infos.setdefault(func, _op_info(func))
        if info.fast is not None and self.shape_env is not None:
            out = info.fast(self, func, info, args, kwargs)
            if out is not None:
                self.fast_hits += 1
                return self._cpu_result_layout(func, args, self._cpu_result_dtypes(func, args, out))
        inputs: list[FakeTensor] = []
        meta_args = self._unwrap(args, inputs)
        meta_kwargs = {k: self._unwrap(v, inputs) for k, v in kwargs.items()} if kwargs else {}
        device = None
        if info.device_index is not None:
            meta_args, meta_kwargs, device = _retarget_device(info.device_index, meta_args, meta_kwargs, bool(inputs))
        if device is None:
            device = _common_device(inputs) if inputs else torch.device(torch.get_default_device())
        try:
            if self.shape_env is not None:
                out = self._run_symbolic(func, meta_args, meta_kwargs)
            else:
                out = func(*meta_args, **meta_kwargs)
        except NotImplementedError as err:
            message = str(err)
            if "Could not run" in message or "no fake impl or Meta kernel" in message:
                out = run_real_fallback(self, func, info, args, kwargs)
                if out is not None:
                    return out
                why = "it has no meta kernel (no Meta or fake implementation is registered in torch)"
            else:
                why = "its meta kernel refused: " + message.strip().splitlines()[0]
            raise UnsupportedOpError(func, why) from err
        out = self._wrap_outputs(func, info, out, args, kwargs, inputs, device)
        return self._cpu_result_layout(func, args, self._cpu_result_dtypes(func, args, out))

    def _cpu_result_dtypes(self, func, args: tuple, out):
        """``out`` with the dtypes the CPU kernel gives where its meta kernel says otherwise
        (``_CPU_INPUT_DTYPE_RESULTS``): native_layer_norm's mean and rstd of a bf16 or fp16
        input are float32 on other devices but of the input's dtype on the CPU."""
        results = _CPU_INPUT_DTYPE_RESULTS.get(func)
        if results is None or not isinstance(out, tuple) or not args or not isinstance(args[0], torch.Tensor):
            return out
        x = args[0]
        if x.device.type != "cpu":
            return out
        # with weights of another dtype (float32 weights of a bf16 input) the CPU kernel
        # computes in theirs and gives the statistics in it, as the meta kernel does
        params = [a for a in args[2:4] if isinstance(a, torch.Tensor)]
        if any(p.dtype != x.dtype for p in params):
            return out
        fixed = list(out)
        for k in results:
            t = fixed[k]
            if isinstance(t, FakeTensor) and t.dtype != x.dtype:
                fixed[k] = FakeTensor.of_metadata(self, list(t.shape), list(t.stride()), t.storage_offset(), x.dtype,
                                                  t.device)
        return tuple(fixed)

    def _cpu_result_layout(self, func, args: tuple, out):
        """``out`` channels-last where the CPU kernel gives it so (``_CPU_LAYOUT_FOLLOWING``): a
        4-D (5-D) convolution of a channels-last input or weight, as eager's oneDNN and slow
        kernels alike lay out their result. Sizes and strides must be ints (a symbolic layout
        stays as the meta kernel said)."""
        if func not in _CPU_LAYOUT_FOLLOWING or not isinstance(out, FakeTensor) or len(args) < 2:
            return out
        from torch._prims_common import make_channels_last_strides_for, suggest_memory_format

        fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(out.dim())
        operands = [a for a in args[:2] if isinstance(a, torch.Tensor)]
        if fmt is None or out.device.type != "cpu" or len(operands) != 2 \
                or not all(type(v) is int for t in (out, *operands) for v in (*t.shape, *t.stride())):
            return out
        if not any(suggest_memory_format(t) is fmt for t in operands):
            return out
        strides = list(make_channels_last_strides_for(out.shape))
        if strides == list(out.stride()):
            return out
        return FakeTensor.of_metadata(self, list(out.shape), strides, 0, out.dtype, out.device)

    def _run_symbolic(self, func, meta_args, meta_kwargs):
        """``func`` on meta tensors with symbolic sizes. A size that may be 1 is decided
        size-obliviously where torch allows it (``ShapeEnv.guard_or``); when such an answer
        contradicted the example values and the kernel then failed (a ``torch._check`` on
        them), the kernel runs again deciding every size by its example value."""
        with python_dispatcher():
            return self.run_by_hints_if_contradicted(lambda: func(*meta_args, **meta_kwargs))

    def run_by_hints_if_contradicted(self, call: Callable[[], object]) -> object:
        """``call()``; when it raises after a size-oblivious answer contradicted the example
        values (``ShapeEnv.contradicted`` moved on), ``call()`` again with every size decided
        by its example value (``ShapeEnv.by_hints``: guards). For one ATen kernel, and for a
        torch function whose composite kernel checks what an earlier op of it assumed
        (``take_along_dim`` broadcasting indices of a real size 1)."""
        env = self.shape_env
        if env is None:
            return call()
        before = env.contradicted
        try:
            return call()
        except Exception:
            if env.contradicted == before:
                raise
        with env.by_hints():
            return call()

    def _collect(self, value, inputs: list[FakeTensor]) -> None:
        """The fake tensors among ``value`` (real ones converted) into ``inputs``, in
        ``_unwrap``'s order, without making their meta tensors (a cache hit needs none)."""
        if isinstance(value, torch.Tensor):
            inputs.append(self._fake_input(value))
        elif isinstance(value, (list, tuple)):
            for v in value:
                self._collect(v, inputs)

    def _unwrap(self, value, inputs: list[FakeTensor]):
        """``value`` with each tensor replaced by its fake's meta tensor; the fakes into
        ``inputs``."""
        if isinstance(value, torch.Tensor):
            fake = self._fake_input(value)
            inputs.append(fake)
            return fake.meta
        if isinstance(value, (list, tuple)):
            return type(value)(self._unwrap(v, inputs) for v in value) if value else value
        return value

    def _fake_input(self, value: torch.Tensor) -> FakeTensor:
        if isinstance(value, FakeTensor):
            if value.fake_mode is not self:
                raise ValueError("a FakeTensor from another FakeTensorMode was passed to this one")
            return value
        return self.from_real(value)

    def _wrap_outputs(self, func, info: _OpInfo, out, args, kwargs, inputs, device):
        def wrap(meta, index):
            if not isinstance(meta, torch.Tensor):
                return meta
            alias = info.aliases[index] if index < len(info.aliases) else None
            source = None
            if alias is not None:
                source = _argument(info, alias, args, kwargs)
            if isinstance(source, FakeTensor) and info.writes[index]:
                if not _same_metadata(source, meta):
                    if not info.inplace_view:
                        raise UnsupportedOpError(
                            func, "it resizes a fake tensor in place (pass out= tensors of the result's size)"
                        )
                    # t_, squeeze_, as_strided_, ...: the wrapper follows the meta tensor.
                    mutate_metadata(func, args, kwargs)
                    source.meta = meta
                    if not _same_metadata(source, meta):
                        raise UnsupportedOpError(func, "it changes a fake tensor's sizes or strides in a way kiln cannot mirror")
                return source
            storage = None
            if isinstance(source, FakeTensor):
                storage = source.fake_storage
            elif isinstance(source, (list, tuple)):
                storage = next((s.fake_storage for s in source if isinstance(s, FakeTensor)), None)
            return FakeTensor(self, meta, device, storage)

        if isinstance(out, torch.Tensor):
            return wrap(out, 0)
        if isinstance(out, tuple):
            return tuple(
                [wrap(m, i) for m in item] if isinstance(item, list) else wrap(item, i) for i, item in enumerate(out)
            )
        if isinstance(out, list):
            return [wrap(m, 0) for m in out]
        return out

    # ------------------------------------------------------------ conversion
    def from_real(self, tensor: torch.Tensor, *, dynamic_dims=(), name: str | None = None, size_source=None,
                  dim_ranges=None) -> FakeTensor:
        """A FakeTensor with ``tensor``'s metadata; see ``kiln.symshapes.bridge.from_real``."""
        from kiln.symshapes.bridge._convert import fake_from_real

        token = set_aside_user_state()
        try:
            return fake_from_real(self, tensor, dynamic_dims=dynamic_dims, name=name, size_source=size_source,
                                  dim_ranges=dim_ranges)
        finally:
            restore_user_state(token)

    def storage_for(self, tensor: torch.Tensor) -> FakeStorage:
        """The FakeStorage standing for ``tensor``'s real storage (shared by its views)."""
        storage = tensor.untyped_storage()
        key = (tensor.device, storage.data_ptr(), storage.nbytes())
        entry = self._storages.get(key)
        # The weak reference tells a live storage from a new one at a reused address.
        if entry is None or entry[1].expired():
            entry = self._storages[key] = (FakeStorage(tensor.device), StorageWeakRef(storage))
        return entry[0]


def _same_metadata(fake: FakeTensor, meta: torch.Tensor) -> bool:
    return (
        fake.shape == meta.shape
        and fake.stride() == meta.stride()
        and fake.storage_offset() == meta.storage_offset()
    )


def _argument(info: _OpInfo, index: int, args, kwargs):
    if index < len(args):
        return args[index]
    return kwargs.get(info.arg_names[index])


def _common_device(inputs: list[FakeTensor]) -> torch.device:
    """The device of the first non-CPU input; CPU scalars mix with any device, as in torch."""
    for fake in inputs:
        if fake.device.type != "cpu":
            return fake.device
    return inputs[0].device
