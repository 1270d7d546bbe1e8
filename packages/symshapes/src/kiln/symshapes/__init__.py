"""kiln.symshapes: symbolic sizes over sympy, a ShapeEnv, shape guards; fake tensors (torch bridge).

The core (this package) needs only sympy. The torch bridge lives in ``kiln.symshapes.bridge``
(SymNode for ``torch.SymInt``, fake tensors) and is the only part that imports torch.
"""

from kiln.symshapes._config import ShapeEnvConfig
from kiln.symshapes._errors import GuardOnDataDependentError, SymbolicShapeError
from kiln.symshapes._functions import FloorDiv, Mod, TruncToInt
from kiln.symshapes._guards import ProducedGuards, ShapeGuard
from kiln.symshapes._shape_env import ShapeEnv
from kiln.symshapes._sources import DimSource
from kiln.symshapes._symbolic import (
    SymBool,
    SymFloat,
    SymInt,
    expect_true,
    guard_bool,
    guard_int,
    guard_or_false,
    guard_or_true,
    guard_size_oblivious,
    statically_known_true,
    sym_float,
    sym_int,
    sym_ite,
    sym_max,
    sym_min,
    sym_not,
)
from kiln.symshapes._value_ranges import ValueRange

__version__ = "0.1.0"
__all__ = [
    "DimSource",
    "FloorDiv",
    "GuardOnDataDependentError",
    "Mod",
    "ProducedGuards",
    "ShapeEnv",
    "ShapeEnvConfig",
    "ShapeGuard",
    "SymBool",
    "SymFloat",
    "SymInt",
    "SymbolicShapeError",
    "TruncToInt",
    "ValueRange",
    "expect_true",
    "guard_bool",
    "guard_int",
    "guard_or_false",
    "guard_or_true",
    "guard_size_oblivious",
    "statically_known_true",
    "sym_float",
    "sym_int",
    "sym_ite",
    "sym_max",
    "sym_min",
    "sym_not",
]
