"""Reading SPIR-V modules in pure Python, for what Metal cannot run.

A module is a 5-word header (magic 0x07230203, version, generator, id bound, schema) followed by
instructions, each starting with a word whose high 16 bits are its length in words and low 16
bits its opcode (SPIR-V specification, section 2.3). Only the few instructions that decide Metal
fitness are interpreted here; everything else is skipped by its length.

What is looked for, and why each matters on Metal (docs/metal.md):

- 64-bit floats actually used. Taichi declares the Float64 and Int64 capabilities (and the
  OpTypeFloat 64 type) in every module, so the declarations prove nothing; an instruction whose
  result type holds a 64-bit float, or a variable of such a type, is a real use. Metal has no
  double type at all.
- 64-bit atomics: an OpAtomic* whose value type is 64 bits wide. Metal has none for buffers.
- Buffer bindings: Metal binds at most 31 buffers to one kernel (argument table indices 0..30);
  with SPIRV-Cross's decoration binding the SPIR-V binding number becomes the buffer index.
- Subgroup operations. Every OpGroup*, OpGroupNonUniform* and OpSubgroup*KHR instruction
  combines values across the invocations of one subgroup, so its result for an invocation
  depends on which invocations share its subgroup, that is on the subgroup size (32 on Apple
  GPUs, 8 on lavapipe, 32 or 64 elsewhere). SPIR-V does not show whether an algorithm folds
  the per-subgroup results back into a size-independent answer, so all of them are reported,
  and so are reads of the SubgroupSize, SubgroupLocalInvocationId, NumSubgroups and SubgroupId
  built-ins. Capability declarations alone are not uses.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

MAGIC = 0x07230203
HEADER_WORDS = 5
METAL_MAX_BUFFERS = 31
"""Buffer argument table entries of one Metal kernel (indices 0..30)."""

# Opcodes (SPIR-V 1.6 specification, section 3.52; extension opcodes from their registries).
OP_NAME = 5
OP_EXTENSION = 10
OP_ENTRY_POINT = 15
OP_CAPABILITY = 17
OP_TYPE_INT = 21
OP_TYPE_FLOAT = 22
OP_TYPE_VECTOR = 23
OP_TYPE_MATRIX = 24
OP_TYPE_ARRAY = 28
OP_TYPE_RUNTIME_ARRAY = 29
OP_TYPE_STRUCT = 30
OP_TYPE_POINTER = 32
OP_FUNCTION = 54
OP_VARIABLE = 59
OP_LOAD = 61
OP_DECORATE = 71
OP_ATOMIC_STORE = 228
ATOMIC_OPCODES = {
    227: "OpAtomicLoad", 228: "OpAtomicStore", 229: "OpAtomicExchange",
    230: "OpAtomicCompareExchange", 231: "OpAtomicCompareExchangeWeak",
    232: "OpAtomicIIncrement", 233: "OpAtomicIDecrement", 234: "OpAtomicIAdd",
    235: "OpAtomicISub", 236: "OpAtomicSMin", 237: "OpAtomicUMin", 238: "OpAtomicSMax",
    239: "OpAtomicUMax", 240: "OpAtomicAnd", 241: "OpAtomicOr", 242: "OpAtomicXor",
    5614: "OpAtomicFMinEXT", 5615: "OpAtomicFMaxEXT", 6035: "OpAtomicFAddEXT",
}  # fmt: skip
FLOAT_ATOMIC_OPCODES = {5614, 5615, 6035}
_GROUP_NAMES = (
    "All Any Broadcast IAdd FAdd FMin UMin SMin FMax UMax SMax".split()
)  # OpGroup*, opcodes 261..271
_NON_UNIFORM_NAMES = (
    "Elect All Any AllEqual Broadcast BroadcastFirst Ballot InverseBallot BallotBitExtract "
    "BallotBitCount BallotFindLSB BallotFindMSB Shuffle ShuffleXor ShuffleUp ShuffleDown IAdd "
    "FAdd IMul FMul SMin UMin FMin SMax UMax FMax BitwiseAnd BitwiseOr BitwiseXor LogicalAnd "
    "LogicalOr LogicalXor QuadBroadcast QuadSwap"
).split()  # OpGroupNonUniform*, opcodes 333..366
SUBGROUP_OPCODES = (
    {261 + i: f"OpGroup{name}" for i, name in enumerate(_GROUP_NAMES)}
    | {333 + i: f"OpGroupNonUniform{name}" for i, name in enumerate(_NON_UNIFORM_NAMES)}
    | {
        4421: "OpSubgroupBallotKHR",
        4422: "OpSubgroupFirstInvocationKHR",
        4428: "OpSubgroupAllKHR",
        4429: "OpSubgroupAnyKHR",
        4430: "OpSubgroupAllEqualKHR",
        4431: "OpGroupNonUniformRotateKHR",
        4432: "OpSubgroupReadInvocationKHR",
    }
)
DECORATION_BUILTIN = 11
DECORATION_BINDING = 33
DECORATION_DESCRIPTOR_SET = 34
SUBGROUP_BUILTINS = {
    36: "SubgroupSize",
    38: "NumSubgroups",
    40: "SubgroupId",
    41: "SubgroupLocalInvocationId",
}
STORAGE_UNIFORM = 2
STORAGE_STORAGE_BUFFER = 12
CAPABILITY_INT64 = 11


class SpirvError(ValueError):
    """Bytes that are not a well-formed SPIR-V module."""


@dataclass(frozen=True)
class Instruction:
    """One instruction: its opcode and its operand words (the length word left out)."""

    opcode: int
    operands: tuple[int, ...]


def _words(data: bytes, offset: int, count: int) -> tuple[int, ...]:
    return struct.unpack_from(f"<{count}I", data, offset)


def module_length(data: bytes, offset: int) -> int:
    """Length in words of the module whose header starts at byte `offset`, by walking its
    instructions until the data ends, a zero-length word appears or an instruction would run
    past the end. Taichi's cache puts each module's word count (a u64) just before it; when
    that count ends the walk exactly on an instruction boundary it is taken, which also stops
    the walk from running into whatever follows the module."""
    end_word = (len(data) - offset) // 4
    if end_word < HEADER_WORDS or _words(data, offset, 1)[0] != MAGIC:
        raise SpirvError(f"no SPIR-V header at byte {offset}")
    declared = struct.unpack_from("<Q", data, offset - 8)[0] if offset >= 8 else 0
    position = HEADER_WORDS
    while position < end_word:
        if position == declared:
            return declared
        count = _words(data, offset + 4 * position, 1)[0] >> 16
        if count == 0 or position + count > end_word:
            break
        position += count
    return position


def find_modules(data: bytes) -> list[bytes]:
    """Every SPIR-V module inside `data` (a file that may pack several, at any byte offset)."""
    modules = []
    start = data.find(struct.pack("<I", MAGIC))
    while start >= 0:
        length = module_length(data, start)
        modules.append(data[start : start + 4 * length])
        start = data.find(struct.pack("<I", MAGIC), start + 4 * length)
    return modules


def instructions(module: bytes) -> Iterator[Instruction]:
    """The instructions of one module, in order."""
    if len(module) % 4 or len(module) < 4 * HEADER_WORDS:
        raise SpirvError("a SPIR-V module is a whole number of words, at least the header")
    words = _words(module, 0, len(module) // 4)
    if words[0] != MAGIC:
        raise SpirvError("missing SPIR-V magic number")
    position = HEADER_WORDS
    while position < len(words):
        count, opcode = words[position] >> 16, words[position] & 0xFFFF
        if count == 0 or position + count > len(words):
            raise SpirvError(f"instruction at word {position} has a bad length {count}")
        yield Instruction(opcode, words[position + 1 : position + count])
        position += count


def decode_string(operands: tuple[int, ...]) -> str:
    """A literal string operand: UTF-8, nul-terminated, packed 4 bytes a word."""
    raw = struct.pack(f"<{len(operands)}I", *operands)
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")


@dataclass
class ModuleReport:
    """What one module holds that matters on Metal."""

    version: tuple[int, int]
    entry_points: list[str] = field(default_factory=list)
    declares_int64: bool = False
    buffer_bindings: list[tuple[int, int]] = field(default_factory=list)
    float64_uses: list[str] = field(default_factory=list)
    atomics64: list[str] = field(default_factory=list)
    float_atomics: list[str] = field(default_factory=list)
    subgroup_uses: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """Why Metal cannot run this module; empty when it can."""
        found = []
        if self.float64_uses:
            found.append(f"64-bit floats used ({_summary(self.float64_uses)})")
        if self.atomics64:
            found.append(f"64-bit atomics ({_summary(self.atomics64)})")
        if len(self.buffer_bindings) > METAL_MAX_BUFFERS:
            found.append(
                f"{len(self.buffer_bindings)} buffer bindings, Metal allows {METAL_MAX_BUFFERS}"
            )
        highest = max((b for _, b in self.buffer_bindings), default=-1)
        if highest >= METAL_MAX_BUFFERS:
            found.append(f"buffer binding {highest} beyond Metal's indices 0..30")
        if self.subgroup_uses:
            found.append(f"subgroup-size dependent ({_summary(self.subgroup_uses)})")
        return found


def _summary(items: list[str]) -> str:
    unique = sorted(set(items))
    more = f", +{len(unique) - 3} more" if len(unique) > 3 else ""
    return ", ".join(unique[:3]) + more


def inspect_module(module: bytes) -> ModuleReport:
    """Read one module for 64-bit floats and atomics, buffer bindings and subgroup use."""
    version_word = _words(module, 4, 1)[0]
    report = ModuleReport(version=((version_word >> 16) & 0xFF, (version_word >> 8) & 0xFF))
    names: dict[int, str] = {}
    types: dict[int, Instruction] = {}
    value_types: dict[int, int] = {}
    decorations: dict[int, dict[int, int]] = {}
    buffer_variables: list[int] = []
    builtin_variables: dict[int, str] = {}
    body: list[Instruction] = []
    in_functions = False
    for inst in instructions(module):
        op, args = inst.opcode, inst.operands
        if op == OP_FUNCTION:
            in_functions = True
        if op == OP_NAME:
            names.setdefault(args[0], decode_string(args[1:]))
        elif op == OP_ENTRY_POINT:
            report.entry_points.append(decode_string(args[2:]))
        elif op == OP_CAPABILITY and args[0] == CAPABILITY_INT64:
            report.declares_int64 = True
        elif op == OP_DECORATE and len(args) >= 2:
            decorations.setdefault(args[0], {})[args[1]] = args[2] if len(args) > 2 else 0
        elif OP_TYPE_INT <= op <= OP_TYPE_POINTER:
            types[args[0]] = inst
        elif op == OP_VARIABLE and not in_functions:
            value_types[args[1]] = args[0]
            storage = args[2]
            if storage in (STORAGE_STORAGE_BUFFER, STORAGE_UNIFORM):
                buffer_variables.append(args[1])
            if _holds(types, args[0], OP_TYPE_FLOAT, 64):
                report.float64_uses.append(f"variable {names.get(args[1], args[1])}")
        if in_functions:
            body.append(inst)
            if len(args) >= 2 and args[0] in types:
                value_types[args[1]] = args[0]
    for variable in buffer_variables:
        marks = decorations.get(variable, {})
        report.buffer_bindings.append(
            (marks.get(DECORATION_DESCRIPTOR_SET, 0), marks.get(DECORATION_BINDING, 0))
        )
    for variable, marks in decorations.items():
        builtin = SUBGROUP_BUILTINS.get(marks.get(DECORATION_BUILTIN, -1))
        if builtin is not None:
            builtin_variables[variable] = builtin
    for inst in body:
        _inspect_instruction(inst, report, types, value_types, builtin_variables)
    return report


def _inspect_instruction(
    inst: Instruction,
    report: ModuleReport,
    types: dict[int, Instruction],
    value_types: dict[int, int],
    builtin_variables: dict[int, str],
) -> None:
    op, args = inst.opcode, inst.operands
    # A result type comes first in every instruction that has one; type ids appear in no
    # other operand position of function-body instructions, so this test needs no table.
    result_type = args[0] if args and args[0] in types else None
    if result_type is not None and _holds(types, result_type, OP_TYPE_FLOAT, 64):
        report.float64_uses.append(f"opcode {op}")
    if op in ATOMIC_OPCODES:
        name = ATOMIC_OPCODES[op]
        if op == OP_ATOMIC_STORE:
            pointer_type = types.get(value_types.get(args[0], -1))
            value_type = pointer_type.operands[2] if pointer_type else None
        else:
            value_type = result_type
        if value_type is not None and _width(types, value_type) == 64:
            report.atomics64.append(name)
        if op in FLOAT_ATOMIC_OPCODES:
            report.float_atomics.append(name)
    if op in SUBGROUP_OPCODES:
        report.subgroup_uses.append(SUBGROUP_OPCODES[op])
    if op == OP_LOAD and len(args) >= 3 and args[2] in builtin_variables:
        report.subgroup_uses.append(builtin_variables[args[2]])


def _width(types: dict[int, Instruction], type_id: int) -> int | None:
    """Bit width of a scalar int or float type (None for other types)."""
    inst = types.get(type_id)
    if inst is not None and inst.opcode in (OP_TYPE_INT, OP_TYPE_FLOAT):
        return inst.operands[1]
    return None


def _holds(types: dict[int, Instruction], type_id: int, opcode: int, width: int) -> bool:
    """Whether type `type_id` is, or is built from, a scalar of `opcode` and `width` bits."""
    seen: set[int] = set()
    pending = [type_id]
    while pending:
        current = pending.pop()
        inst = types.get(current)
        if inst is None or current in seen:
            continue
        seen.add(current)
        op, args = inst.opcode, inst.operands
        if op == opcode and args[1] == width:
            return True
        if op in (OP_TYPE_VECTOR, OP_TYPE_MATRIX, OP_TYPE_ARRAY, OP_TYPE_RUNTIME_ARRAY):
            pending.append(args[1])
        elif op == OP_TYPE_STRUCT:
            pending.extend(args[1:])
        elif op == OP_TYPE_POINTER:
            pending.append(args[2])
    return False
