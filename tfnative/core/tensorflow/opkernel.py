"""Op context: which TensorFlow op a kernel frame is running, read from memory.

A CPU kernel runs as ``SomeKernel::Compute(OpKernelContext*)``, called by
``ThreadPoolDevice::Compute(OpKernel*, OpKernelContext*)``.  The ``OpKernel``
object knows its node: ``name_view_`` and ``type_string_view_``, two string
views that follow each other in the object, followed by the int
``graph_def_version_``.  We need no debug info to find them:

* **the object**: at a function's entry, ``this`` is in ``rdi`` (``rsi`` for the
  device's ``Compute``).  Deeper in a kernel, ``this`` lives on in a
  callee-saved register or in the stack of the kernel's frame or its caller's;
  a word there is taken as the kernel when it points to an object whose vtable
  holds the frame's own function (the virtual ``Compute`` it is running).
  Nothing is guessed from a pointer that fails that check.
* **the fields**: the first pair of adjacent string views in the object whose
  second one is an op type name (``[A-Za-z_][A-Za-z0-9_]*``) and whose first is
  a printable node name; libstdc++ lays a view out as (length, pointer),
  libc++ as (pointer, length): both are tried.  The offset found (200 and 216
  in TF 2.21) is kept and checked again on every object.

Only memory is read: no call into the target, no lock taken.
"""

import re
import struct
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..memory import USER_SPACE_END, Memory
from ..model import Frame, NativeFrame

OBJECT_SCAN_BYTES = 512
VTABLE_SLOTS = 24
STACK_SCAN_BYTES = 16384
MAX_NAME = 4096
_TYPE_RE = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*\Z")
# x86-64 System V: the registers a callee preserves, where ``this`` lives on.
CALLEE_SAVED = ("rbx", "rbp", "r12", "r13", "r14", "r15")


# oneDNN (``TF_ENABLE_ONEDNN_OPTS``, on by default on x86) rewrites ops to its own kernels:
# MatMul runs as ``_MklMatMul``, Conv2D as ``_MklNativeConv2D``, ``_FusedMatMul`` as
# ``_MklFusedMatMul``.  The type a user asks for and reads is the op of the graph.
_ONEDNN_PREFIXES = ("_MklNative", "_Mkl")
_INTERNAL_FUSED = {"FusedMatMul", "FusedConv2D", "FusedConv3D", "FusedDepthwiseConv2dNative", "FusedBatchMatMulV2"}


def graph_op_type(kernel_type: str) -> str:
    """The op type of the graph that a kernel's type string runs (``_MklMatMul`` -> ``MatMul``)."""
    for prefix in _ONEDNN_PREFIXES:
        if kernel_type.startswith(prefix) and len(kernel_type) > len(prefix) and kernel_type[len(prefix)].isupper():
            base = kernel_type[len(prefix):]
            return "_" + base if base in _INTERNAL_FUSED else base
    return kernel_type


def _printable(raw: bytes) -> bool:
    return all(32 <= b < 127 for b in raw)


class OpKernelReader:
    """Reads ``OpKernel`` objects; ``memory.read(addr, size) -> bytes`` raises MemoryError."""

    def __init__(self, memory: Memory) -> None:
        self.mem = memory
        self.layout: Optional[Tuple[int, bool]] = None  # (offset, length first)
        self._vtables: Dict[int, Tuple[int, ...]] = {}

    def u64(self, addr: int) -> int:
        value: int = struct.unpack("<Q", self.mem.read(addr, 8))[0]
        return value

    def vtable(self, obj: int) -> Tuple[int, ...]:
        """The first VTABLE_SLOTS entries of the vtable of ``obj`` (empty when unreadable)."""
        try:
            vptr = self.u64(obj)
        except MemoryError:
            return ()
        if vptr % 8 or vptr < 0x1000:
            return ()
        slots = self._vtables.get(vptr)
        if slots is None:
            try:
                slots = struct.unpack("<%dQ" % VTABLE_SLOTS, self.mem.read(vptr, 8 * VTABLE_SLOTS))
            except MemoryError:
                slots = ()
            self._vtables[vptr] = slots
        return slots

    def runs(self, obj: int, function: int) -> bool:
        """Whether ``obj``'s vtable holds ``function``: the object whose virtual method a frame runs."""
        return function in self.vtable(obj)

    def _view(self, raw: bytes, off: int, length_first: bool) -> Optional[bytes]:
        a, b = struct.unpack_from("<QQ", raw, off)
        length, ptr = (a, b) if length_first else (b, a)
        if not 0 < length <= MAX_NAME or ptr < 0x1000:
            return None
        try:
            return self.mem.read(ptr, length)
        except MemoryError:
            return None

    def _fields_at(self, raw: bytes, off: int, length_first: bool) -> Optional[Dict[str, str]]:
        if off + 36 > len(raw):
            return None
        op_type = self._view(raw, off + 16, length_first)
        if op_type is None or len(op_type) > 256 or not _TYPE_RE.match(op_type):
            return None
        name = self._view(raw, off, length_first)
        if name is None or not _printable(name):
            return None
        version = struct.unpack_from("<i", raw, off + 32)[0]
        if not 0 <= version < 1 << 20:
            return None
        kernel_type = op_type.decode()
        found = {"type": graph_op_type(kernel_type), "name": name.decode()}
        if found["type"] != kernel_type:
            found["kernel_type"] = kernel_type  # oneDNN's rewrite: the type the kernel itself carries
        return found

    def info(self, obj: int) -> Optional[Dict[str, str]]:
        """``{"type", "name", "kernel"}`` of the OpKernel at ``obj``, or None when it does not look like one.

        ``type`` is the graph's op type; where oneDNN rewrote the op, ``kernel_type``
        is the type the kernel carries (``_MklMatMul`` for a MatMul).
        """
        if not self.vtable(obj):
            return None
        try:
            raw = self.mem.read(obj, OBJECT_SCAN_BYTES)
        except MemoryError:
            return None
        found = self._fields_at(raw, *self.layout) if self.layout is not None else None
        if found is None:
            for off in range(8, OBJECT_SCAN_BYTES - 32, 8):
                for length_first in (True, False):
                    found = self._fields_at(raw, off, length_first)
                    if found is not None:
                        self.layout = (off, length_first)
                        break
                if found is not None:
                    break
        if found is not None:
            found["kernel"] = "0x%x" % obj
        return found

    def find(self, function: int, candidates: List[int]) -> Optional[int]:
        """The first of ``candidates`` (pointer-sized values) that is an object running ``function``."""
        seen = set()
        for value in candidates:
            if value in seen or value % 8 or not 0x1000 <= value < USER_SPACE_END:
                continue
            seen.add(value)
            if self.runs(value, function):
                return value
        return None


def stack_words(memory: Memory, low: int, high: int) -> List[int]:
    """The 8-byte words of the stack between ``low`` and ``high`` (bounded), innermost first."""
    high = min(high, low + STACK_SCAN_BYTES)
    if high <= low:
        return []
    try:
        raw = memory.read(low, high - low)
    except MemoryError:
        return []
    return list(struct.unpack("<%dQ" % (len(raw) // 8), raw[: len(raw) // 8 * 8]))



class FrameContext(NamedTuple):
    """What ``op_of_frame`` knows of a native frame: its function's entry, its pc and level, the registers
    (by name, missing when unknown) of the frame and of its caller, and the stack ``low``..``high`` to scan."""

    start: int
    pc: int
    level: int
    regs: Dict[str, int]
    caller_regs: Dict[str, int]
    low: int
    high: int


def op_of_frame(kernels: OpKernelReader, frame: FrameContext, device: bool = False) -> Optional[Dict[str, str]]:
    """``{"type", "name", "kernel"}`` of the op a native frame runs, or None.

    For a kernel's ``Compute``, the OpKernel is the object whose vtable holds
    that function (``frame.start``), found in the frame's or its caller's
    registers or on its stack; for a device's ``Compute`` (``device``), it is
    the first argument at the function's entry (``rsi``).
    """
    start, pc, level, regs, caller_regs, low, high = frame
    # At the entry, or just past what gdb skips of a prologue (endbr64, push %rbp; mov %rsp,%rbp)
    # when it breaks on a function by name: the arguments are still in their registers.
    at_entry = level == 0 and start and 0 <= pc - start <= 8
    if device:
        obj = regs.get("rsi") if at_entry else None
        return kernels.info(obj) if obj else None
    if not start:
        return None
    candidates: List[int] = []
    if level == 0 and regs.get("rdi") is not None:
        candidates.append(regs["rdi"])
    for values in (regs, caller_regs):
        candidates += [values[r] for r in CALLEE_SAVED if values.get(r) is not None]
    candidates += stack_words(kernels.mem, low, high or low + 4096)
    obj = kernels.find(start, candidates)
    return kernels.info(obj) if obj is not None else None

# Frames that run an op: a kernel's own method, and the device call that runs it.  A kernel named from
# its DWARF (a custom op built with -g) has no parameter list: "ZeroOutOp::Compute"; whether an OpKernel
# runs there is then read from the process (the kernel's vtable holds the function), as for any other.
KERNEL_RE = re.compile(r"::Compute(?:Async)?(?:\((?:tensorflow::)?OpKernelContext\*|\Z)")
DEVICE_RE = re.compile(r"Device::Compute(?:Async)?\((?:tensorflow::)?(?:Async)?OpKernel\*")


def op_frames(frames: Sequence[Frame]) -> List[Tuple[NativeFrame, bool]]:
    """The native frames of a stack that run an op (those with a ``level``), each with whether it is the
    device's call."""
    out = []
    for f in frames:
        if not isinstance(f, NativeFrame) or f.level is None:
            continue
        name = f.function or ""
        if DEVICE_RE.search(name):
            out.append((f, True))
        elif KERNEL_RE.search(name):
            out.append((f, False))
    return out


def inherit_device_ops(frames: Sequence[Frame]) -> None:
    """A device frame whose own argument is gone names the op of the kernel it called (just inside it)."""
    below = None
    for f in frames:
        if not isinstance(f, NativeFrame):
            continue
        name = f.function or ""
        if KERNEL_RE.search(name):
            below = f.op
        elif DEVICE_RE.search(name):
            if not f.op and below:
                f.op = below
            below = None
