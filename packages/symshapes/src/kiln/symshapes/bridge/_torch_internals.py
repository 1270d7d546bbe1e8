"""The torch internals kiln's fake tensors cannot avoid, kept in one place.

- ``python_dispatcher()``: ``torch._dispatch.python.enable_python_dispatcher``. Composite
  kernels written in C++ (expand, view's size inference, relu's reference, ...) call the
  non-symbolic ``sizes()`` and fail on symbolic sizes; the Python dispatcher routes those
  ops to torch's Python decompositions, which handle SymInts. torch offers no public switch
  for this (torch.compile enables the same thing internally while tracing).
  ``no_python_dispatcher()`` (``torch._dispatch.python.no_python_dispatcher``) turns it off
  inside, for a call on concrete meta tensors that must take the C++ meta kernel.
- ``make_wrapper_subclass``: ``torch.Tensor._make_wrapper_subclass``, the constructor that
  the ``__torch_dispatch__`` documentation and tutorials use for tensor subclasses that own
  no storage. It is what lets a fake tensor report any device (``cuda`` without a GPU) and
  symbolic sizes.
- ``disabled_torch_function``: ``torch._C._disabled_torch_function_impl``, the documented
  idiom that keeps ``__torch_function__`` from re-wrapping results of a dispatch subclass.
- ``allow_unavailable_devices``: ``torch._C._ensureCUDADeviceGuardSet``. Creating a tensor
  for device ``cuda`` (``torch.empty(3, device="cuda")``) first asks the CUDA device guard to
  select the device, which fails on a build or machine without CUDA before any dispatch
  mode sees the call. This installs a no-op guard when CUDA is unavailable (torch's own
  FakeTensorMode does the same), so fake ``cuda`` tensors can be created anywhere.
- ``FAKE_MODE_KEY``: ``torch._C._TorchDispatchModeKey.FAKE``. torch initializes a device's
  runtime before a factory call for it reaches any mode (``torch.empty(3, device="cuda")``
  fails on a CPU-only build) unless the active dispatch mode is registered under this key,
  which tells torch that a fake mode handles tensor creation. kiln's FakeTensorMode
  registers under it for that reason only.
- ``active_fake_mode``: ``torch._C._get_dispatch_mode(FAKE_MODE_KEY)``, the mode (kiln's or
  torch's) registered under that key now. torch keeps one; pushing a second one makes
  torch raise *after* releasing a reference to the new mode that it never took (torch
  2.11 to 2.13: ``push_on_torch_dispatch_stack`` increfs only on success), so the mode is
  freed while still referenced and a later garbage collection crashes the interpreter.
  kiln asks first and never lets that push fail; ``set_aside_fake_mode`` and
  ``restore_fake_mode`` (``_unset_dispatch_mode``/``_set_dispatch_mode``, what torch's
  FakeTensorMode does to a mode it enters over) let kiln's mode enter over torch's.
- ``op_schema``: ``OpOverload._schema``, an op's declared signature (argument names and
  alias annotations: which outputs are views of or writes to which inputs). The
  ``__torch_dispatch__`` documentation reads it the same way; there is no public spelling.
- ``mutate_metadata``: runs an inplace-view op, which changes a tensor's own sizes/strides
  (``t_``, ``squeeze_``, ``unsqueeze_``, ``as_strided_``), on the wrapper itself with dispatch off and the meta key forced on
  (``torch.utils._mode_utils.no_dispatch``, ``torch._C._set_meta_in_tls_dispatch_include``).
  A wrapper subclass's metadata lives in its TensorImpl, and this is the only way to change
  it; torch's ``return_and_correct_aliasing`` does the same for its own wrapper subclasses.
- ``stride_only_caller``: torch's Python functions whose plain ``if`` on a symbolic size
  only chooses a stride. ``torch._prims._collapse_view_helper`` (every ``view``/``reshape``
  that merges dims) asks ``shape[idx] != 1`` to leave a size-1 dim's stride out of the merged
  stride; its other decisions use ``guard_or_false``/``torch._check``. A stride of a dim of
  size 1 addresses nothing, so the answer for "not 1" is valid for 1 (torch 2.11-2.13).
- ``oblivious_site``: the callers of torch's ``guard_or_false``/``guard_or_true`` whose
  default answer is valid for a size of 1 (see ``ShapeEnv.guard_or``). Not every caller's
  is: ``torch._refs.squeeze`` keeps a dim it cannot prove is 1, which is wrong for a 1 at
  run time (torch accepts that for data-dependent sizes only). Listed, with why:
  ``torch._refs._broadcast_shapes`` and C++ ``ExpandUtils.cpp`` (``infer_size``): "not 1"
  takes the non-broadcasting path and ``torch._check``s that the sizes are equal;
  ``torch._prims._broadcast_in_dim_meta`` and ``should_expand`` in ``torch._refs``'
  ``_maybe_broadcast``: the same check, else a stride or a no-op expand;
  ``should_fold`` in ``torch._decomp.decompositions.matmul``: folding the batch into one
  ``mm`` or not gives equal values in a new tensor either way; the ``false_if_dde`` forms of
  ``torch._prims_common.is_contiguous``/``check_contiguous_sizes_strides`` and
  ``_is_non_overlapping_and_dense_or_false``: "not contiguous/dense" only chooses an
  output's strides (elementwise ops, clone) or skips reshape's contiguous shortcut, whose
  general path decides exactly; ``is_channels_last_contiguous_2d/3d``: a memory format
  suggestion (strides); C++ ``Contiguity.h``: the "certainly contiguous" shortcut of a
  symbolic tensor's layout flags, which otherwise asks the exact expression
  (``KilnSymNode.is_contiguous``); C++ ``input_metadata.cpp`` (autograd's check whether a
  gradient must be summed to its input's shape, ``InputMetadata::maybe_reduce``): "not 1"
  sums over the dim, which for a size of 1 gives the same values as not summing; C++
  ``TensorUtils.cpp`` (``computeStride``: whether a
  reshape can be a view) only when called from ``torch._decomp.decompositions.matmul``, whose
  output is a new tensor whatever its reshapes were. A user's own ``reshape`` is not listed:
  a view for a real 1 where kiln assumed a copy would hide an aliasing.
- ``TorchDispatchMode``: from ``torch.utils._python_dispatch``, documented under
  "Extending PyTorch" as the base class of dispatch modes.
- ``set_aside_user_state``/``restore_user_state``: the user's torch-function modes, the
  user's (non-infra) torch-dispatch modes and the default saved-tensors hooks
  (``torch.autograd.graph.saved_tensors_hooks``) taken off torch's thread-local stacks
  (``torch._C._pop_torch_function_stack``, ``_pop_torch_dispatch_stack``,
  ``_autograd._pop_saved_tensors_default_hooks`` and their push twins), then put back in
  the same order. Tracing on fake tensors is kiln's business: a user's mode or hook sees
  what the compiled code runs, as in eager, never the trace. torch has no public way to
  hide a mode that is already active (``_pop_mode_temporarily`` does the same for one
  mode). The ``DeviceContext`` function modes of ``torch.set_default_device`` stay:
  traced factory calls must see the default device. Infra dispatch modes (torch's own,
  under a mode key) stay. Hooks are left in place when torch has saved-tensors hooks
  disabled (nothing could be pushed back then).
- ``dynamo_disable_wrappers()``: the functions torch wraps with ``torch._disable_dynamo``
  (found through ``torch._compile._disable_dynamo``'s inner code object). Many of torch's
  Python meta kernels and references are wrapped so (``elementwise_type_promotion_wrapper``,
  ``make_fx``'s ``dispatch_trace``); the wrapper's first call imports ``torch._dynamo``
  (torch's whole frontend, ~1 s) to build the disabled twin it caches on the wrapped
  function as ``fn.__dynamo_disable``. ``_frontend.no_frontend_import`` pre-sets that
  attribute for the duration of a trace (see there).

Invariant: no other kiln.symshapes module touches an underscore-prefixed torch name.
"""

from __future__ import annotations

import functools
import sys

import torch
from torch._dispatch.python import enable_python_dispatcher, no_python_dispatcher
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = [
    "DYNAMO_DISABLE_ATTR",
    "FAKE_MODE_KEY",
    "TorchDispatchMode",
    "active_fake_mode",
    "allow_unavailable_devices",
    "disabled_torch_function",
    "dynamo_disable_wrappers",
    "make_wrapper_subclass",
    "mutate_metadata",
    "no_python_dispatcher",
    "op_schema",
    "python_dispatcher",
    "restore_fake_mode",
    "restore_user_state",
    "set_aside_fake_mode",
    "set_aside_user_state",
]

disabled_torch_function = torch._C._disabled_torch_function_impl
FAKE_MODE_KEY = torch._C._TorchDispatchModeKey.FAKE


def python_dispatcher():
    """Context manager under which composite ops use torch's Python decompositions."""
    return enable_python_dispatcher()


def make_wrapper_subclass(cls, size, stride, storage_offset, dtype, device, requires_grad, layout=torch.strided):
    """A tensor of type ``cls`` with this metadata and no storage."""
    return torch.Tensor._make_wrapper_subclass(
        cls,
        size,
        strides=stride,
        storage_offset=storage_offset,
        dtype=dtype,
        device=device,
        requires_grad=requires_grad,
        layout=layout,
    )


def active_fake_mode():
    """The dispatch mode registered under torch's FAKE key (kiln's or torch's), or None."""
    return torch._C._get_dispatch_mode(FAKE_MODE_KEY)


def set_aside_fake_mode():
    """Unregister the FAKE-key mode (returned) so that another one can be pushed."""
    return torch._C._unset_dispatch_mode(FAKE_MODE_KEY)


def restore_fake_mode(mode) -> None:
    """Register ``mode`` (from ``set_aside_fake_mode``) under the FAKE key again."""
    if mode is not None:
        torch._C._set_dispatch_mode(mode)


def allow_unavailable_devices() -> None:
    """Let ``cuda`` tensors be requested (for fakes) when CUDA is not available."""
    if not torch.cuda.is_available():
        torch._C._ensureCUDADeviceGuardSet()


def op_schema(func):
    """The ``torch._C.FunctionSchema`` of an ATen ``OpOverload``."""
    return func._schema


def _set_aside_function_modes() -> list | None:
    c = torch._C
    if not c._len_torch_function_stack():
        return None
    from torch.utils._device import DeviceContext

    modes = [c._pop_torch_function_stack() for _ in range(c._len_torch_function_stack())][::-1]
    for mode in modes:
        if isinstance(mode, DeviceContext):
            c._push_on_torch_function_stack(mode)
    return modes


def _restore_function_modes(modes: list) -> None:
    c = torch._C
    while c._len_torch_function_stack():
        c._pop_torch_function_stack()
    for mode in modes:
        c._push_on_torch_function_stack(mode)


def _user_dispatch_mode_count() -> int:
    c = torch._C
    infra = sum(c._get_dispatch_mode(key) is not None for key in c._TorchDispatchModeKey.__members__.values())
    return c._len_torch_dispatch_stack() - infra


def _set_aside_dispatch_modes() -> list | None:
    c = torch._C
    if not c._len_torch_dispatch_stack():
        return None
    # With a mode key given as None, torch pops user modes before infra ones.
    modes = [c._pop_torch_dispatch_stack(None) for _ in range(_user_dispatch_mode_count())][::-1]
    return modes or None


def _restore_dispatch_modes(modes: list) -> None:
    for mode in modes:
        torch._C._push_on_torch_dispatch_stack(mode)


def _set_aside_saved_tensors_hooks() -> list | None:
    hooks_api = torch._C._autograd
    top = hooks_api._top_saved_tensors_default_hooks(True)
    if top is None or not hooks_api._saved_tensors_hooks_is_enabled():
        return None
    hooks = []
    while top is not None:
        hooks.append(top)
        hooks_api._pop_saved_tensors_default_hooks()
        top = hooks_api._top_saved_tensors_default_hooks(True)
    return hooks[::-1]


def _restore_saved_tensors_hooks(hooks: list) -> None:
    for pack, unpack in hooks:
        torch._C._autograd._push_saved_tensors_default_hooks(pack, unpack)


def set_aside_user_state(*, dispatch_modes: bool = True) -> tuple | None:
    """Take the user's torch-function modes (not ``DeviceContext``), dispatch modes (when
    ``dispatch_modes``) and default saved-tensors hooks off torch's stacks; returns what
    ``restore_user_state`` needs to put them back (None when there was nothing)."""
    functions = _set_aside_function_modes()
    try:
        dispatch = _set_aside_dispatch_modes() if dispatch_modes else None
        try:
            hooks = _set_aside_saved_tensors_hooks()
        except BaseException:
            if dispatch is not None:
                _restore_dispatch_modes(dispatch)
            raise
    except BaseException:
        if functions is not None:
            _restore_function_modes(functions)
        raise
    if functions is None and dispatch is None and hooks is None:
        return None
    return functions, dispatch, hooks


def restore_user_state(token: tuple | None) -> None:
    """Put back what ``set_aside_user_state`` took (in the order it was)."""
    if token is None:
        return
    functions, dispatch, hooks = token
    try:
        if hooks is not None:
            _restore_saved_tensors_hooks(hooks)
    finally:
        try:
            if dispatch is not None:
                _restore_dispatch_modes(dispatch)
        finally:
            if functions is not None:
                _restore_function_modes(functions)


def mutate_metadata(func, args, kwargs) -> None:
    """Apply the in-place metadata op ``func`` to the (wrapper) tensors in ``args`` only."""
    from torch.utils._mode_utils import no_dispatch

    with no_dispatch():
        previous = torch._C._meta_in_tls_dispatch_include()
        torch._C._set_meta_in_tls_dispatch_include(True)
        try:
            func(*args, **kwargs)
        finally:
            torch._C._set_meta_in_tls_dispatch_include(previous)


DYNAMO_DISABLE_ATTR = "__dynamo_disable"


def dynamo_disable_wrappers() -> list:
    """The functions wrapped by ``torch._disable_dynamo`` that exist now (each one's ``fn``),
    or [] when torch's wrapper is not the one this was written for (torch 2.11 to 2.13)."""
    import gc
    import types

    inner = [c for c in torch._compile._disable_dynamo.__code__.co_consts
             if isinstance(c, types.CodeType) and c.co_freevars == ("fn", "recursive")
             and DYNAMO_DISABLE_ATTR in c.co_consts]
    if len(inner) != 1:
        return []
    wrapped = []
    for f in gc.get_referrers(inner[0]):
        if isinstance(f, types.FunctionType) and f.__closure__ is not None:
            fn = f.__closure__[f.__code__.co_freevars.index("fn")].cell_contents
            if isinstance(fn, types.FunctionType):
                wrapped.append(fn)
    return wrapped


# (module, function) of the torch functions listed under ``stride_only_caller``
_STRIDE_ONLY_PY = (("torch._prims", "_collapse_view_helper"),)
# (module, function) of each Python caller listed under ``oblivious_site``; C++ callers by file
_OBLIVIOUS_PY = (("torch._refs", "_broadcast_shapes"), ("torch._refs", "should_expand"),
                 ("torch._prims", "_broadcast_in_dim_meta"), ("torch._decomp.decompositions", "should_fold"),
                 ("torch._prims_common", "is_contiguous"),
                 ("torch._prims_common", "check_contiguous_sizes_strides"),
                 ("torch._prims_common", "_is_non_overlapping_and_dense_or_false"),
                 ("torch._prims_common", "is_channels_last_contiguous_2d"),
                 ("torch._prims_common", "is_channels_last_contiguous_3d"))
_OBLIVIOUS_CPP = ("ExpandUtils.cpp", "Contiguity.h", "input_metadata.cpp")
# C++ files listed only when the Python code that called into C++ is one of these
_OBLIVIOUS_CPP_WITHIN = {"TensorUtils.cpp": (("torch._decomp.decompositions", "matmul"),)}


@functools.cache
def _py_sites(pairs: tuple) -> frozenset:
    """``(file, function name)`` of each listed ``(module, function)``: how a frame's code is
    matched (a function's nested helpers and comprehensions have code objects of their own)."""
    import importlib

    sites = set()
    for module, name in pairs:
        try:
            sites.add((importlib.import_module(module).__file__, name))
        except ImportError:
            continue
    return frozenset(sites)


def _is_site(code, pairs: tuple) -> bool:
    return (code.co_filename, code.co_name) in _py_sites(pairs)


def caller_frame(depth: int):
    """The frame ``depth`` calls above the function that asks, or None where the Python stack
    is shallower: a call straight from C++ on a thread of its own (the autograd engine runs
    the backward of CUDA tensors on its device threads, with no Python frame beneath)."""
    try:
        return sys._getframe(depth + 1)
    except ValueError:
        return None


def stride_only_caller(frame) -> bool:
    """Whether ``frame`` runs a torch function whose plain ``bool`` of a SymBool only picks a
    stride (see the module docstring)."""
    return frame is not None and _is_site(frame.f_code, _STRIDE_ONLY_PY)


def oblivious_site(frame=None, file: str = "") -> bool:
    """Whether the caller of torch's ``guard_or_false``/``guard_or_true`` is listed: a C++
    caller by its ``file`` (and, for some files, the Python ``frame`` that called into C++),
    a Python one by the first ``frame`` outside torch's ``symbolic_shapes`` module."""
    if file:
        if file.endswith(_OBLIVIOUS_CPP):
            return True
        within = next((w for name, w in _OBLIVIOUS_CPP_WITHIN.items() if file.endswith(name)), None)
        if within is None or frame is None:
            return False
        return _is_site(frame.f_code, within)
    for _ in range(8):
        if frame is None:
            return False
        code = frame.f_code
        # torch's own helpers, and comprehensions (their function is the frame above)
        if not code.co_filename.endswith("symbolic_shapes.py") and not code.co_name.startswith("<"):
            return _is_site(code, _OBLIVIOUS_PY)
        frame = frame.f_back
    return False
