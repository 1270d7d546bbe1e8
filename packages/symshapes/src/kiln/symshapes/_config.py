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
    oblivious_one: with ``specialize_zero_one``, only 0 is specialized: an example size of 1
        gets a symbol too, and every dynamic size ranges over ``[1, inf)``. Whether such a
        size is 1 is then decided size-obliviously wherever torch's kernels say the answer
        for "not 1" is valid for 1 as well (``guard_size_oblivious``, and
        ``guard_or_false``/``guard_or_true``, which answer their default without a guard);
        everywhere else (a plain ``bool`` of ``s == 1``) it is a guard on the example value.
    """

    duck_shape: bool = True
    specialize_zero_one: bool = True
    oblivious_one: bool = False
