"""Import instructions: a module that is already imported is looked up, never loaded.

``import x`` / ``from x import y`` inside a traced function run no module code at trace
time: the module must be in ``sys.modules`` already (its attributes are then read like any
module's, guarded through ``M['x']`` unless it is a trusted library); a module that does not
exist raises ModuleNotFoundError in the trace (which a ``try``/``except`` may catch); one that
exists but is not imported yet stops tracing.
"""

from __future__ import annotations

from ._opcodes import rule
from ._translator import Translator
from ._unsupported import TracedException, Unsupported
from .variables._base import VariableTracker


def _imported(tx: Translator, name: str) -> VariableTracker:
    import sys

    from kiln.guards import ModuleSource

    from .variables._objects import is_trusted_module

    module = sys.modules[name]
    return tx.builder.wrap(module, None if is_trusted_module(module) else ModuleSource(name))


@rule("IMPORT_NAME")
def _import_name(tx, instr):
    import importlib.util
    import sys

    fromlist, level = tx.pop(), tx.pop()
    level = level.as_constant()
    names = fromlist.as_constant() or ()
    name = instr.arg
    if level:
        package = tx.f_globals.get("__package__") or ""
        try:
            name = importlib.util.resolve_name("." * level + instr.arg, package)
        except ImportError as e:
            raise Unsupported(f"relative import of {instr.arg!r}: {e}") from None
    # Loading a module runs its code; only imports that are already done are traced.
    needed = [name] if names else [".".join(name.split(".")[:i + 1]) for i in range(name.count(".") + 1)]
    for n in needed:
        if n not in sys.modules:
            parent = n.rpartition(".")[0]
            # with its parent imported, looking a module up loads nothing: a module that
            # does not exist raises ModuleNotFoundError (``try: import x`` / ``except``)
            if (not parent or parent in sys.modules) and importlib.util.find_spec(n) is None:
                raise TracedException(f"No module named {n!r}", ModuleNotFoundError)
            raise Unsupported(f"import of {n!r}, which is not imported yet, inside a compiled region")
    module = sys.modules[name]
    for item in names:
        if item != "*" and not hasattr(module, item) and f"{name}.{item}" not in sys.modules:
            raise Unsupported(f"'from {name} import {item}' would load a module inside a compiled region")
    tx.push(_imported(tx, name if names else name.partition(".")[0]))


@rule("IMPORT_FROM")
def _import_from(tx, instr):
    tx.push(tx.stack[-1].get_attr(tx, instr.arg))
