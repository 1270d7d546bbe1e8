"""The first call of a lazy module (``nn.LazyLinear``, a user ``LazyModuleMixin`` layer).

A lazy module's first call runs its ``_initialize_hook``, a forward pre-hook that infers
the parameter shapes from the input, materializes and initializes the parameters, removes
itself and changes the module's class (``LazyLinear`` becomes ``Linear``). Eager does this
once, for real; so does the trace: ``initialize_lazy`` runs the hook on the real module at
trace time with the traced arguments (fake tensors, whose sizes are the real ones), then the
call is traced like any other, reading the new parameters as graph inputs.

Invariants: the module's structure guard, taken before the change, is replaced by one of its
new structure (the next call reuses the graph; another uninitialized module recompiles).
Refused (Unsupported, before anything changes) where doing the work at trace time could
differ from eager: a module reached without a source, other forward pre-hooks that eager
would run first, an argument whose size is a symbol, members of the module read already,
or a random op earlier in the graph (eager would draw its numbers before the parameter
initialization does, the graph after it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._unsupported import Unsupported
from ._base import VariableTracker

if TYPE_CHECKING:
    from .._translator import Translator
    from ._modules import NNModuleVariable

__all__ = ["initialize_lazy"]

# Parts of the names of torch functions that draw random numbers (checked on graph nodes).
_RANDOM_NAMES = ("rand", "dropout", "bernoulli", "normal", "uniform", "multinomial", "exponential",
                 "cauchy", "geometric", "poisson", "rrelu", "random")


def initialize_lazy(tx: Translator, module: NNModuleVariable, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> None:
    """Run the lazy module's initialization hook for real, as its first eager call would."""
    from torch.nn.modules.lazy import LazyModuleMixin

    from kiln.guards import ModuleStructureMatch

    from ._modules import _hooks_module

    m = module.module
    hook = m.__dict__["_initialize_hook"]
    what = module.describe()
    if not isinstance(m, LazyModuleMixin) or module.source is None:
        raise Unsupported(f"initializing the lazy module {what} (reached without a source)")
    if list(m._forward_pre_hooks) != [hook.id] or getattr(_hooks_module(), "_global_forward_pre_hooks", None):
        raise Unsupported(f"initializing the lazy module {what}: other forward pre-hooks run before it")
    _check_members_unread(tx, module)
    _check_no_random_ops(tx, what)
    values = [_example(a, what) for a in args]
    named = {k: _example(v, what) for k, v in kwargs.items()}
    before = ModuleStructureMatch.from_module(module.source, m, ordered=True)
    try:
        m._infer_parameters(m, tuple(values), named)
    except Exception as e:
        raise Unsupported(f"initializing the lazy module {what} raised {type(e).__name__}: {e}") from e
    if before in tx.output.guards:
        tx.output.guards.discard(before)
        tx.output.guards.add(ModuleStructureMatch.from_module(module.source, m, ordered=True))


def _example(v: VariableTracker, what: str) -> Any:
    """The value the hook gets for ``v``: a tensor's fake (all its sizes plain ints), a
    constant, or a tuple or list of such values."""
    from ._containers import ListVariable, TupleVariable
    from ._tensor import TensorVariable

    if isinstance(v, TensorVariable):
        if not all(type(s) is int for s in v.fake.shape):
            raise Unsupported(f"initializing the lazy module {what} from {v.describe()}, whose size is a symbol")
        return v.fake
    if isinstance(v, (TupleVariable, ListVariable)):
        items = [_example(i, what) for i in v.items]
        return items if isinstance(v, ListVariable) else tuple(items)
    if v.is_constant():
        return v.as_constant()
    raise Unsupported(f"initializing the lazy module {what} from {v.describe()}")


def _check_members_unread(tx: Translator, module: NNModuleVariable) -> None:
    # a parameter read before the call would be tracked as the uninitialized tensor it was
    from kiln.guards import ItemSource

    step = module._step()
    for slot in ("_parameters", "_buffers"):
        slot_source = step(module.source, slot)
        names = module.module.__dict__.get(slot, {})
        if slot_source in tx.output.trackers or any(ItemSource(slot_source, k) in tx.output.trackers for k in names):
            raise Unsupported(f"initializing the lazy module {module.describe()} after reading its {slot[1:]}")


def _check_no_random_ops(tx: Translator, what: str) -> None:
    for node in tx.output.graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
        if any(part in name.lower() for part in _RANDOM_NAMES):
            raise Unsupported(f"initializing the lazy module {what} after the random op {name} "
                              "(eager draws its numbers first)")
