"""Whether a matrix product becomes a template kernel (``InductorConfig.matmul_templates``
``"auto"``, under max-autotune): the product alone, as a template kernel with its tiles
measured (``_autotune.tune`` over ``_template.template_candidates``), against the vendor
library's (``torch.mm``/``torch.bmm``: cuBLAS), both on scratch operands of the product's
layouts at the example sizes, each the median of ``triton.testing.do_bench``. The template is
taken where its best time is at most the library's, plus, where an elementwise op reads the
product (an epilogue the template fuses), the time of a copy of the result (what that op
costs at least after the library's call, as a kernel of its own: a read and a write of every
element; measured on H100 at 4096 x 4096 x 1024 in bfloat16, the library's 53 us and the
template's 58, a ReLU after the library's call cost another 17 us, none in the template's
epilogue). The answer is kept in ``<cache>/autotune`` (the key: the sizes, strides,
offsets, dtype, ``tl.dot`` precision, whether an epilogue reads it, GPU, triton's version and
the template's source), so no later compile measures it again.

Under triton's interpreter (CPU tensors, ``cpu_backend='triton'``) nothing can be timed and
the template is what is being tested: it is always taken.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from .._config import InductorConfig, cache_root
from .._entries import EntryStore
from .._ir import ComputedBuffer, InputBuffer, Matmul
from .._policy import FusionPolicy
from ._autotune import AutotunePolicy, _extent, device_identity, tune
from ._kernel import render_kernel
from ._runtime import HEADER, load_module, module_source

__all__ = ["template_wins"]

_log = logging.getLogger("kiln.perf_hints")
_VERSION = 1


def _operand(name: str, extent: int, dtype: torch.dtype, device: str) -> InputBuffer:
    """A stand-in operand buffer of ``extent`` elements (the product reads it through its
    window's strides and offset)."""
    return InputBuffer(name, (sympy.Integer(extent),), dtype, device=device, stride=(sympy.S.One,))


def template_wins(body: Matmul, sizes: Sequence[sympy.Expr], dtype: torch.dtype, device: str,
                  hint: Callable[[Any], int], store: EntryStore, config: InductorConfig, epilogue: bool = False,
                  policy: AutotunePolicy | None = None) -> bool:
    """Whether the product ``body`` (a buffer of ``sizes`` and ``dtype`` on ``device``; read
    by an elementwise op: ``epilogue``) is faster as a template kernel than as the vendor
    library's call (see the module docstring)."""
    if not device.startswith("cuda"):
        return True
    import triton.testing

    from .._scheduler import new_kernel

    policy = policy or AutotunePolicy()
    start = time.perf_counter()
    batch = hint(sizes[0]) if len(sizes) == 3 else 1
    m, n, k = hint(sizes[-2]), hint(sizes[-1]), hint(body.k)
    (a, sa, oa), (b, sb, ob) = body.a, body.b
    sa, sb, oa, ob = [hint(s) for s in sa], [hint(s) for s in sb], hint(oa), hint(ob)
    key = hashlib.sha256(json.dumps([_VERSION, str(dtype), batch, m, n, k, sa, sb, oa % 16, ob % 16, body.precision, epilogue,
                                     device_identity(device), _sources()], separators=(",", ":")).encode()).hexdigest()[:40]
    record = store.read(key)
    if record is not None and isinstance(record.get("template"), bool):
        return record["template"]
    a_extent = oa + _extent((batch, m, k), sa)
    b_extent = ob + _extent((batch, k, n), sb)
    # the stand-in kernel: the product alone, stored (named as the graph names them: the
    # tuning's scratch tensors are made per parameter name)
    buffers = {a: _operand(a, a_extent, dtype, device)}
    buffers[b] = _operand(b, max(b_extent, a_extent if a == b else 0), dtype, device)
    product = ComputedBuffer("kiln_product", tuple(sizes), dtype, body, device=device)
    kernel = new_kernel(product, 0)
    buffers[product.name] = product
    launch = render_kernel(kernel, FusionPolicy(), {name: buf.dtype for name, buf in buffers.items()})
    module = load_module(module_source([launch.code]), cache_root(config))
    tuned = tune(launch, getattr(module, kernel.name), device, buffers, hint, store, policy)
    times = [t for t in (tuned.timings if tuned is not None else []) if t is not None]
    if not times:
        wins, best, vendor = False, None, None
    else:
        best = min(times)
        generator = torch.Generator(device=device).manual_seed(0)
        with torch.cuda.device(torch.device(device)):
            base_a = torch.randn(a_extent, generator=generator, device=device).to(dtype)
            base_b = torch.randn(b_extent, generator=generator, device=device).to(dtype)
            if len(sizes) == 3:
                left = base_a.as_strided((batch, m, k), sa, oa)
                right = base_b.as_strided((batch, k, n), sb, ob)
                call = lambda: torch.bmm(left, right)  # noqa: E731
            else:
                left = base_a.as_strided((m, k), sa[1:], oa)
                right = base_b.as_strided((k, n), sb[1:], ob)
                call = lambda: torch.mm(left, right)  # noqa: E731
            vendor = float(triton.testing.do_bench(call, warmup=policy.warmup_ms, rep=policy.rep_ms,
                                                   return_mode="median"))
            if epilogue:  # the reader's own pass after the library's call: at least a copy of the result
                result = call()
                target = torch.empty_like(result)
                vendor += float(triton.testing.do_bench(lambda: target.copy_(result), warmup=policy.warmup_ms,
                                                        rep=policy.rep_ms, return_mode="median"))
        wins = best <= vendor
    store.write(key, {"template": wins, "template_ms": best, "vendor_ms": vendor,
                      "chosen": tuned.chosen if tuned is not None else None})
    _log.info("kiln.inductor: matmul %s x %s x %s (batch %s, %s): template %s ms (%s), vendor %s ms%s: %s (%.2f s)",
              m, n, k, batch, dtype, best, tuned.chosen if tuned is not None else None, vendor,
              " with its reader's pass" if epilogue else "",
              "template" if wins else "vendor library", time.perf_counter() - start)
    return wins


@functools.cache
def _sources() -> str:
    """A digest of the module header and the template's code generator (a change to either
    measures again), read once per process."""
    from . import _template

    with open(_template.__file__, "rb") as f:
        return hashlib.sha256(HEADER.encode() + f.read()).hexdigest()
