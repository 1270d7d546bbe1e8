"""Tracing is invisible to the user's torch modes and hooks.

A user's ``TorchFunctionMode`` or ``TorchDispatchMode`` active around a compiled call, and
their default saved-tensors hooks (``torch.autograd.graph.saved_tensors_hooks``), must see
what the compiled code runs, as eager would, never the fake ops and metadata reads of a
trace. ``hide_user_state()`` takes them off torch's stacks until it is closed.

Invariants:
- On close (exceptions included) the stacks hold exactly the same objects in the same
  order as before; nothing is created or dropped.
- ``torch.set_default_device``'s mode and torch's own infra dispatch modes stay active.
- ``dispatch_modes=False`` leaves dispatch modes in place: the dispatch keys they add to
  torch's thread-local include set are part of tensor guards taken during a trace (fake
  ops hide them on their own: ``FakeTensorMode`` hides everything while entered).
"""

from __future__ import annotations

import contextlib

from kiln.symshapes.bridge._torch_internals import restore_user_state, set_aside_user_state

__all__ = ["hide_user_state"]


def hide_user_state(*, dispatch_modes: bool = True) -> contextlib.ExitStack:
    """Set the user's modes and saved-tensors hooks aside now; the returned stack (a context
    manager, or call ``.close()``) puts them back."""
    stack = contextlib.ExitStack()
    stack.callback(restore_user_state, set_aside_user_state(dispatch_modes=dispatch_modes))
    return stack
