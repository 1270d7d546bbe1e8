"""Autocast state around a graph that enters autocast blocks, restored when the graph raises.

A graph records an autocast ``with`` block as ``_enter_autocast``/``_exit_autocast`` nodes.
When an op between them fails on run-time values, the exit never runs: autocast would stay
on, and its nesting count raised, so the cast-weights cache would never be cleared again (a
stale bf16 copy of a weight the optimizer has since changed). Eager's unwinding leaves the
state of before the block; autocast blocks never stay open across a graph boundary (a break
inside one is refused), so that is the state before the graph call. The replacement takes
``autocast_state()`` before calling such a graph and calls ``restore_autocast`` when it
raises: the enabled flags and dtypes of each device, the cache switch, and the nesting count
brought back down as each block's ``__exit__`` would (clearing the cache at zero).
"""

from __future__ import annotations

import torch

__all__ = ["AUTOCAST_DEVICES", "autocast_state", "restore_autocast"]

AUTOCAST_DEVICES = ("cpu", "cuda")


def _nesting() -> int:
    depth = torch.autocast_increment_nesting()
    torch.autocast_decrement_nesting()
    return depth - 1


def autocast_state() -> tuple:
    """The autocast switches now (per device: enabled, dtype), the cache switch, the nesting."""
    devices = tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES)
    return devices, torch.is_autocast_cache_enabled(), _nesting()


def restore_autocast(state: tuple) -> None:
    """Put back what ``autocast_state`` returned, as the exits of the open blocks would."""
    devices, cache_enabled, nesting = state
    for _ in range(_nesting() - nesting):
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
    for device, enabled, dtype in devices:
        torch.set_autocast_enabled(device, enabled)
        torch.set_autocast_dtype(device, dtype)
    torch.set_autocast_cache_enabled(cache_enabled)
