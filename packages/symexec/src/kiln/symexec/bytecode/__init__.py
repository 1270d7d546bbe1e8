"""kiln.symexec.bytecode: CPython bytecode decoding and assembly, version-neutral.

Three levels: a code object; the concrete level (``ConcreteBytecode``: real opcodes, integer
opargs, raw location and exception tables); the abstract level (``Bytecode``: ``Instr`` with
argument meanings, ``Label`` jump targets, a handler per instruction). ``decode`` and
``assemble`` convert between code objects and the abstract level; ``make_code`` builds a
fresh function body and ``make_resume`` one that continues another at an instruction (graph
breaks); ``disassemble`` formats either for logs; ``decompile_code`` turns kiln's generated code
(resume functions, replacements) back into Python source. All knowledge of one CPython
version is in ``TABLE`` (``py311``/``py312``/``py313``), chosen once at import.
"""

from ._assemble import AssemblyError, assemble, assemble_concrete, stack_depths
from ._build import call_instrs, conditional_jump, make_code, normalize_jumps, prologue, with_null
from ._bytecode import Bytecode, ExceptionRange, copy_instrs, exception_ranges, localsplus_names
from ._cfg import BasicBlock, ControlFlowGraph
from ._concrete import (
    ConcreteBytecode,
    ConcreteInstr,
    decode_concrete,
    encode_concrete,
    extended_args_needed,
)
from ._decode import DecodeError, decode, decode_concrete_bytecode, jump_target_offset
from ._decompile import (
    REPLACEMENT_FILE_PREFIX,
    REPLACEMENT_PREFIX,
    DecompiledCode,
    NotExact,
    decompile_code,
    is_replacement,
    is_resume,
)
from ._disasm import disassemble, format_arg
from ._exctable import ExceptionTableEntry, decode_exception_table, encode_exception_table
from ._instr import (
    NO_ARG,
    AttrArg,
    CompareArg,
    ExceptHandler,
    GlobalArg,
    Instr,
    Label,
    Location,
    SuperAttrArg,
    const_key,
)
from ._linetable import decode_linetable, encode_linetable
from ._resume import RESUME_PREFIX, STACK_PREFIX, in_loop, live_locals, make_resume, resumable
from ._signature import names_to_constants, signature
from ._stackdepth import FlowInstr, StackDepthError, basic_block_starts, compute_stacksize
from ._table import ArgKind, VersionTable
from ._walk import map_code, walk_code
from .versions import SUPPORTED_VERSIONS, TABLE, UnsupportedVersion

__all__ = [
    "NO_ARG",
    "REPLACEMENT_FILE_PREFIX",
    "REPLACEMENT_PREFIX",
    "RESUME_PREFIX",
    "STACK_PREFIX",
    "SUPPORTED_VERSIONS",
    "TABLE",
    "ArgKind",
    "AssemblyError",
    "AttrArg",
    "BasicBlock",
    "Bytecode",
    "CompareArg",
    "ConcreteBytecode",
    "ConcreteInstr",
    "ControlFlowGraph",
    "DecodeError",
    "DecompiledCode",
    "ExceptHandler",
    "ExceptionRange",
    "ExceptionTableEntry",
    "FlowInstr",
    "GlobalArg",
    "Instr",
    "Label",
    "Location",
    "NotExact",
    "StackDepthError",
    "SuperAttrArg",
    "UnsupportedVersion",
    "VersionTable",
    "assemble",
    "assemble_concrete",
    "basic_block_starts",
    "call_instrs",
    "compute_stacksize",
    "conditional_jump",
    "const_key",
    "copy_instrs",
    "decode",
    "decode_concrete",
    "decode_concrete_bytecode",
    "decode_exception_table",
    "decode_linetable",
    "decompile_code",
    "disassemble",
    "encode_concrete",
    "encode_exception_table",
    "encode_linetable",
    "exception_ranges",
    "extended_args_needed",
    "format_arg",
    "in_loop",
    "is_replacement",
    "is_resume",
    "jump_target_offset",
    "live_locals",
    "localsplus_names",
    "make_code",
    "make_resume",
    "map_code",
    "names_to_constants",
    "normalize_jumps",
    "prologue",
    "resumable",
    "signature",
    "stack_depths",
    "walk_code",
    "with_null",
]
