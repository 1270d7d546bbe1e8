"""ShapeEnv configuration: the specialization policy, as one typed value read at creation."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ShapeEnvConfig"]


@dataclass(slots=True, frozen=True)
class ShapeEnvConfig:
    """How a ``ShapeEnv`` turns example sizes into symbols.

    duck_shape: sizes with equal example values share one symbol (and a guard that their
        sources are equal), as torch does by default.
    specialize_zero_one: example sizes 0 and 1 become constants; every size symbol then
        ranges over ``[2, inf)``, which is what lets broadcasting checks go without guards.
    """

    duck_shape: bool = True
    specialize_zero_one: bool = True
