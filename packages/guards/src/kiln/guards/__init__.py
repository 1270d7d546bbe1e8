"""kiln.guards: sources, guard kinds, the guard compiler and failure explanations.

State facts about values reachable from a frame (its locals ``L`` and globals ``G``),
collect them in a GuardSet, and compile it to one fast checker::

    gs = GuardSet([TypeMatch(LocalSource("n"), int), EqualsMatch(LocalSource("n"), 3)])
    check = gs.compile(globals_dict)
    check({"n": 3})          # True
    check.explain({"n": 4})  # "L['n'] == 3: expected 3, got 4"

Works without torch; torch is imported only by tensor and torch-state guards.
"""

from kiln.guards._base import CodeContext, Guard
from kiln.guards._compiler import compile_guards
from kiln.guards._explain import evaluate, explain_all, explain_failure
from kiln.guards._guard_set import GuardSet, order_guards
from kiln.guards._module_kinds import ModuleStructureMatch, NoModuleHooks
from kiln.guards._python_kinds import (
    EMPTY_CELL,
    DictKeysMatch,
    EqualsMatch,
    FunctionMatch,
    HasAttr,
    IdMatch,
    IsNone,
    KeyAbsent,
    LengthMatch,
    NoAliasing,
    NoHasAttr,
    NotNone,
    ObjectAliasing,
    SetItemsMatch,
    TypeMatch,
    cell_values,
)
from kiln.guards._shape_kinds import ShapeRelation
from kiln.guards._sources import (
    AttrSource,
    ClosureCellSource,
    DefaultsSource,
    DictItemSource,
    GenericAttrSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    MappingGetSource,
    ModuleSource,
    Source,
    TensorSizeSource,
    TensorStorageOffsetSource,
    TensorStrideSource,
    TypeSource,
    importable_path,
    is_item_key,
    is_module_tensor,
)
from kiln.guards._storage_kinds import NoStorageSharing
from kiln.guards._tensor_kinds import TensorMatch
from kiln.guards._torch_state import TorchGlobalState

__version__ = "0.1.0"
__all__ = [
    "EMPTY_CELL",
    "AttrSource",
    "ClosureCellSource",
    "CodeContext",
    "DefaultsSource",
    "DictItemSource",
    "DictKeysMatch",
    "EqualsMatch",
    "FunctionMatch",
    "GenericAttrSource",
    "GlobalSource",
    "Guard",
    "GuardSet",
    "HasAttr",
    "IdMatch",
    "IsNone",
    "ItemSource",
    "KeyAbsent",
    "LengthMatch",
    "LocalSource",
    "MappingGetSource",
    "ModuleSource",
    "ModuleStructureMatch",
    "NoAliasing",
    "NoHasAttr",
    "NoModuleHooks",
    "NoStorageSharing",
    "NotNone",
    "ObjectAliasing",
    "SetItemsMatch",
    "ShapeRelation",
    "Source",
    "TensorMatch",
    "TensorSizeSource",
    "TensorStorageOffsetSource",
    "TensorStrideSource",
    "TorchGlobalState",
    "TypeMatch",
    "TypeSource",
    "cell_values",
    "compile_guards",
    "evaluate",
    "explain_all",
    "explain_failure",
    "importable_path",
    "is_item_key",
    "is_module_tensor",
    "order_guards",
]
