"""Unwind native stacks from ``.eh_frame`` call-frame information, without gdb.

Every library a C++ program loads carries ``.eh_frame`` (exceptions need it)
and, from the linker, ``.eh_frame_hdr``: a sorted table of (function start,
FDE) pairs.  That is all an unwinder needs:

1. find the FDE of a pc by binary search in ``.eh_frame_hdr`` (gdb reads the
   whole ``.eh_frame`` instead, tens of MB for ``libtensorflow_cc.so.2``);
2. run the CIE's and the FDE's CFA instructions up to the pc, which says how to
   compute the frame's CFA and where each callee-saved register and the
   return address were saved;
3. read them from the stack: that is the caller's frame.  Repeat until the
   return address is undefined (``_start``, ``clone3``), or the thread was
   caught just after the ``clone``/``clone3`` syscall that started it (no
   FDE there: the new thread's stack starts at that frame).

DWARF expressions are evaluated for the rules that use them (PLT entries,
glibc's signal trampoline).  Anything this module does not understand raises
``CfiError``: the caller then asks gdb, which knows more tricks (prologue
analysis, frames without CFI), so nothing is ever guessed.

Registers use DWARF's x86-64 numbering: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi,
5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15, 16 the return address (rip).
"""

from __future__ import annotations

import bisect
import mmap
import struct
from typing import (
    Any,
    Callable,
    Dict,
    Generic,
    List,
    Literal,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
    TypeVar,
    Union,
)

from .elf import ElfError, ElfFile, Section
from .jit import recover_caller
from .leb128 import sleb128 as _sleb
from .leb128 import uleb128 as _uleb
from .mapfile import map_file

__all__ = ["CfiError", "EhFrame", "Frame", "Module", "Unwinder", "DWARF_REGS"]

DWARF_REGS = ("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
              "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip")
RSP, RIP = 7, 16
MASK = (1 << 64) - 1
MAX_RECOVERED = 16  # callers recovered without CFI per thread: beyond, the stack is garbage
_CLONES = (56, 435)  # the clone and clone3 syscalls
Reader = Callable[[int, int], bytes]


class CfiError(Exception):
    """This pc cannot be unwound from CFI alone."""

    # Set by ``Unwinder.unwind``: the frames unwound before the one that failed.
    frames: Optional[List[Frame[Any]]] = None


class Cie(NamedTuple):
    """A Common Information Entry: what every FDE pointing at it shares."""

    code_align: int
    data_align: int
    ra_reg: int  # the return-address column
    fde_enc: int  # DW_EH_PE encoding of its FDEs' addresses
    aug_z: bool  # "z" augmentation: FDEs carry an augmentation length
    signal_frame: bool  # "S": the frames of a signal trampoline
    initial: bytes  # the initial CFA instructions


class Fde(NamedTuple):
    """A Frame Description Entry: the file addresses ``[start, end)`` it covers, its CIE, its program."""

    start: int
    end: int
    cie: Cie
    program: bytes


# The CFA rule: ("reg", reg, offset) | ("expr", bytes).
CfaRule = Union[Tuple[Literal["reg"], int, int], Tuple[Literal["expr"], bytes]]
# A register's rule (a register without one keeps its value: "same value").
RegRule = Union[
    Tuple[Literal["offset"], int],  # saved at CFA + n
    Tuple[Literal["val_offset"], int],  # is CFA + n
    Tuple[Literal["register"], int],  # in another register
    Tuple[Literal["expr"], bytes],  # saved at the address the expression gives
    Tuple[Literal["val_expr"], bytes],  # is the value the expression gives
    Tuple[Literal["undefined"]],
]


class _State(TypedDict):
    """What a CFA program changes as it runs: the CFA rule and the register rules."""

    cfa: Optional[CfaRule]
    rules: Dict[int, RegRule]


class Row(NamedTuple):
    """The unwind row at one address: the CFA rule, the register rules, the return-address column."""

    cfa: Optional[CfaRule]
    rules: Dict[int, RegRule]  # DWARF register -> its rule
    ra_reg: int
    signal_frame: bool


# ------------------------------------------------------------------------------------------ decoding


_FIXED = {0x02: "<H", 0x03: "<I", 0x04: "<Q", 0x0A: "<h", 0x0B: "<i", 0x0C: "<q", 0x00: "<Q"}


class EhFrame:
    """The ``.eh_frame``/``.eh_frame_hdr`` of one ELF file (file addresses, not run-time ones)."""

    def __init__(self, path: str, image: Optional[mmap.mmap] = None) -> None:
        """The CFI of the file ``path``, or of ``image``: an ELF image read from memory (the vDSO)."""
        self.path = path
        # The unwind row (CFA rule, register rules, return-address column, signal frame) of each
        # file address looked up so far: threads waiting in the same place share it.
        self.rows: Dict[int, Row] = {}
        if image is not None:
            self.mm = image
        else:
            self.mm = map_file(path)
        try:
            elf = ElfFile(self.mm, path)
        except ElfError as exc:
            raise CfiError(str(exc)) from None
        hdr = elf.section(".eh_frame_hdr")
        eh = elf.section(".eh_frame")
        if hdr is None or eh is None or hdr.type == 8 or eh.type == 8:
            raise CfiError("%s has no .eh_frame_hdr" % path)
        self.hdr_addr = hdr.addr
        self.eh = eh
        self.eh_addr, self.eh_off, self.eh_size = eh.addr, eh.offset, eh.size
        mm = self.mm
        version, _ptr_enc, count_enc, table_enc = mm[hdr.offset:hdr.offset + 4]
        if version != 1 or table_enc != 0x3B:  # datarel | sdata4: what every linker writes
            raise CfiError("%s: unsupported .eh_frame_hdr (version %d, table encoding 0x%x)"
                           % (path, version, table_enc))
        pos = hdr.offset + 4
        _eh_ptr, pos = self._encoded(_ptr_enc, pos, hdr)
        self.count, pos = self._encoded(count_enc, pos, hdr)
        self.table = pos
        self._cies: Dict[int, Cie] = {}
        self._fdes: Dict[int, Fde] = {}

    def _encoded(self, enc: int, pos: int, sec: Section) -> Tuple[int, int]:
        """A DW_EH_PE-encoded value at file offset ``pos`` of section ``sec``."""
        if enc == 0xFF:
            return 0, pos
        fmt = enc & 0x0F
        if fmt == 0x01:
            value, end = _uleb(self.mm, pos)
        elif fmt == 0x09:
            value, end = _sleb(self.mm, pos)
        elif fmt in _FIXED:
            value = struct.unpack_from(_FIXED[fmt], self.mm, pos)[0]
            end = pos + struct.calcsize(_FIXED[fmt])
        else:
            raise CfiError("%s: pointer encoding 0x%x" % (self.path, enc))
        app = enc & 0x70
        if app == 0x10:  # pcrel
            value += sec.addr + (pos - sec.offset)
        elif app == 0x30:  # datarel: relative to .eh_frame_hdr
            value += self.hdr_addr
        elif app:
            raise CfiError("%s: pointer encoding 0x%x" % (self.path, enc))
        if enc & 0x80:
            raise CfiError("%s: indirect pointer in CFI" % self.path)
        return value & MASK, end

    def _eh_pos(self, fde_addr: int) -> int:
        off = self.eh_off + (fde_addr - self.eh_addr)
        if not self.eh_off <= off < self.eh_off + self.eh_size:
            raise CfiError("%s: FDE outside .eh_frame" % self.path)
        return off

    def find(self, pc: int) -> Fde:
        """The FDE covering file address ``pc``."""
        lo, hi = 0, self.count
        base = self.table
        unpack = struct.unpack_from
        while lo < hi:
            mid = (lo + hi) // 2
            if unpack("<i", self.mm, base + mid * 8)[0] + self.hdr_addr <= pc:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            raise CfiError("no FDE for 0x%x in %s" % (pc, self.path))
        fde_addr = (unpack("<i", self.mm, base + (lo - 1) * 8 + 4)[0] + self.hdr_addr) & MASK
        fde = self._fdes.get(fde_addr)
        if fde is None:
            fde = self._fdes[fde_addr] = self._parse_fde(self._eh_pos(fde_addr))
        if not fde.start <= pc < fde.end:
            raise CfiError("no FDE for 0x%x in %s" % (pc, self.path))
        return fde

    def _parse_fde(self, pos: int) -> Fde:
        mm = self.mm
        length = struct.unpack_from("<I", mm, pos)[0]
        if length == 0xFFFFFFFF:
            raise CfiError("%s: 64-bit DWARF CFI" % self.path)
        end = pos + 4 + length
        cie_ptr = struct.unpack_from("<I", mm, pos + 4)[0]
        cie = self._cie(pos + 4 - cie_ptr)
        start, p = self._encoded(cie.fde_enc, pos + 8, self.eh)
        size, p = self._encoded(cie.fde_enc & 0x0F, p, self.eh)
        if cie.aug_z:
            aug_len, p = _uleb(mm, p)
            p += aug_len
        return Fde(start, start + size, cie, bytes(mm[p:end]))

    def _cie(self, pos: int) -> Cie:
        cie = self._cies.get(pos)
        if cie is not None:
            return cie
        mm = self.mm
        length = struct.unpack_from("<I", mm, pos)[0]
        end = pos + 4 + length
        p = pos + 8
        version = mm[p]
        p += 1
        aug_end = mm.find(b"\0", p)
        aug = bytes(mm[p:aug_end])
        p = aug_end + 1
        if b"eh" in aug:
            raise CfiError("%s: old 'eh' augmentation" % self.path)
        code_align, p = _uleb(mm, p)
        data_align, p = _sleb(mm, p)
        if version == 1:
            ra_reg = mm[p]
            p += 1
        else:
            ra_reg, p = _uleb(mm, p)
        fde_enc = 0
        signal_frame = False
        aug_z = aug.startswith(b"z")
        if aug_z:
            aug_len, p = _uleb(mm, p)
            data_end = p + aug_len
            q = p
            for ch in aug[1:]:
                if ch == ord("R"):
                    fde_enc = mm[q]
                    q += 1
                elif ch == ord("P"):
                    enc = mm[q]
                    _value, q = self._encoded(enc & 0x7F, q + 1, self.eh)
                elif ch == ord("L"):
                    q += 1
                elif ch == ord("S"):
                    signal_frame = True
                elif ch == ord("B"):
                    pass
                else:
                    break  # unknown: the length lets us skip the rest
            p = data_end
        elif aug:
            raise CfiError("%s: CIE augmentation %r" % (self.path, aug))
        cie = Cie(code_align, data_align, ra_reg, fde_enc, aug_z, signal_frame, bytes(mm[p:end]))
        self._cies[pos] = cie
        return cie


# ------------------------------------------------------------------------------------ CFA programs


def _run(program: bytes, code_align: int, data_align: int, loc: int, pc: int, state: _State,
         initial: Optional[Dict[int, RegRule]]) -> int:
    """Run CFA instructions from ``loc`` while the location is <= ``pc``; update ``state``."""
    rules = state["rules"]
    stack: List[Tuple[Optional[CfaRule], Dict[int, RegRule]]] = []
    pos, n = 0, len(program)
    while pos < n:
        op = program[pos]
        pos += 1
        high, low = op & 0xC0, op & 0x3F
        if high == 0x40:  # advance_loc
            loc += low * code_align
            if loc > pc:
                return loc
            continue
        if high == 0x80:  # offset
            off, pos = _uleb(program, pos)
            rules[low] = ("offset", off * data_align)
            continue
        if high == 0xC0:  # restore
            _restore(rules, initial, low)
            continue
        if op == 0x00:
            continue
        if op in (0x02, 0x03, 0x04):
            fmt = {0x02: "<B", 0x03: "<H", 0x04: "<I"}[op]
            delta = struct.unpack_from(fmt, program, pos)[0]
            pos += struct.calcsize(fmt)
            loc += delta * code_align
            if loc > pc:
                return loc
        elif op == 0x05:  # offset_extended
            reg, pos = _uleb(program, pos)
            off, pos = _uleb(program, pos)
            rules[reg] = ("offset", off * data_align)
        elif op == 0x06:  # restore_extended
            reg, pos = _uleb(program, pos)
            _restore(rules, initial, reg)
        elif op == 0x07:  # undefined
            reg, pos = _uleb(program, pos)
            rules[reg] = ("undefined",)
        elif op == 0x08:  # same_value
            reg, pos = _uleb(program, pos)
            rules.pop(reg, None)
        elif op == 0x09:  # register
            reg, pos = _uleb(program, pos)
            other, pos = _uleb(program, pos)
            rules[reg] = ("register", other)
        elif op == 0x0A:  # remember_state
            stack.append((state["cfa"], dict(rules)))
        elif op == 0x0B:  # restore_state
            if not stack:
                raise CfiError("DW_CFA_restore_state with nothing remembered")
            cfa, saved = stack.pop()
            state["cfa"] = cfa
            rules.clear()
            rules.update(saved)
        elif op == 0x0C:  # def_cfa
            reg, pos = _uleb(program, pos)
            off, pos = _uleb(program, pos)
            state["cfa"] = ("reg", reg, off)
        elif op == 0x0D:  # def_cfa_register
            reg, pos = _uleb(program, pos)
            state["cfa"] = ("reg", reg, _cfa_offset(state))
        elif op == 0x0E:  # def_cfa_offset
            off, pos = _uleb(program, pos)
            state["cfa"] = ("reg", _cfa_reg(state), off)
        elif op == 0x0F:  # def_cfa_expression
            size, pos = _uleb(program, pos)
            state["cfa"] = ("expr", program[pos:pos + size])
            pos += size
        elif op in (0x10, 0x16):  # expression, val_expression
            reg, pos = _uleb(program, pos)
            size, pos = _uleb(program, pos)
            if op == 0x10:
                rules[reg] = ("expr", program[pos:pos + size])
            else:
                rules[reg] = ("val_expr", program[pos:pos + size])
            pos += size
        elif op == 0x11:  # offset_extended_sf
            reg, pos = _uleb(program, pos)
            off, pos = _sleb(program, pos)
            rules[reg] = ("offset", off * data_align)
        elif op == 0x12:  # def_cfa_sf
            reg, pos = _uleb(program, pos)
            off, pos = _sleb(program, pos)
            state["cfa"] = ("reg", reg, off * data_align)
        elif op == 0x13:  # def_cfa_offset_sf
            off, pos = _sleb(program, pos)
            state["cfa"] = ("reg", _cfa_reg(state), off * data_align)
        elif op in (0x14, 0x15):  # val_offset, val_offset_sf
            reg, pos = _uleb(program, pos)
            off, pos = (_uleb if op == 0x14 else _sleb)(program, pos)
            rules[reg] = ("val_offset", off * data_align)
        elif op == 0x2E:  # GNU_args_size
            _size, pos = _uleb(program, pos)
        elif op == 0x2F:  # GNU_negative_offset_extended
            reg, pos = _uleb(program, pos)
            off, pos = _uleb(program, pos)
            rules[reg] = ("offset", -off * data_align)
        else:
            raise CfiError("CFA instruction 0x%02x" % op)
    return loc


def _restore(rules: Dict[int, RegRule], initial: Optional[Dict[int, RegRule]], reg: int) -> None:
    if initial is not None and reg in initial:
        rules[reg] = initial[reg]
    else:
        rules.pop(reg, None)


def _cfa_reg(state: _State) -> int:
    cfa = state["cfa"]
    if cfa is None or cfa[0] != "reg":
        raise CfiError("CFA offset change without a register rule")
    return cfa[1]


def _cfa_offset(state: _State) -> int:
    cfa = state["cfa"]
    if cfa is None or cfa[0] != "reg":
        raise CfiError("CFA register change without an offset rule")
    return cfa[2]


# ------------------------------------------------------------------------------ DWARF expressions


def _evaluate(expr: bytes, regs: Dict[int, int], read: Reader, push_cfa: Optional[int] = None) -> int:
    """The value of a DWARF expression (the subset CFI uses)."""
    stack: List[int] = [] if push_cfa is None else [push_cfa]
    pos, n = 0, len(expr)

    def reg(r: int) -> int:
        if r not in regs:
            raise CfiError("DWARF expression reads register %d, unknown here" % r)
        return regs[r]

    while pos < n:
        op = expr[pos]
        pos += 1
        if 0x30 <= op <= 0x4F:  # lit0..lit31
            stack.append(op - 0x30)
        elif 0x70 <= op <= 0x8F:  # breg0..breg31
            off, pos = _sleb(expr, pos)
            stack.append((reg(op - 0x70) + off) & MASK)
        elif 0x50 <= op <= 0x6F:  # reg0..reg31
            stack.append(reg(op - 0x50))
        elif op == 0x92:  # bregx
            r, pos = _uleb(expr, pos)
            off, pos = _sleb(expr, pos)
            stack.append((reg(r) + off) & MASK)
        elif op in (0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F):
            fmt = {0x08: "<B", 0x09: "<b", 0x0A: "<H", 0x0B: "<h", 0x0C: "<I", 0x0D: "<i",
                   0x0E: "<Q", 0x0F: "<q"}[op]
            stack.append(struct.unpack_from(fmt, expr, pos)[0] & MASK)
            pos += struct.calcsize(fmt)
        elif op == 0x10:
            v, pos = _uleb(expr, pos)
            stack.append(v & MASK)
        elif op == 0x11:
            v, pos = _sleb(expr, pos)
            stack.append(v & MASK)
        elif op == 0x12:
            stack.append(stack[-1])
        elif op == 0x13:
            stack.pop()
        elif op == 0x14:
            stack.append(stack[-2])
        elif op == 0x15:
            stack.append(stack[-1 - expr[pos]])
            pos += 1
        elif op == 0x16:
            stack[-1], stack[-2] = stack[-2], stack[-1]
        elif op == 0x06:  # deref
            addr = stack.pop()
            try:
                stack.append(struct.unpack("<Q", read(addr, 8))[0])
            except MemoryError:
                raise CfiError("DWARF expression reads unreadable 0x%x" % addr) from None
        elif op == 0x23:  # plus_uconst
            v, pos = _uleb(expr, pos)
            stack.append((stack.pop() + v) & MASK)
        elif op == 0x1F:
            stack.append(-stack.pop() & MASK)
        elif op == 0x20:
            stack.append(~stack.pop() & MASK)
        elif op in _BINARY:
            b, a = stack.pop(), stack.pop()
            stack.append(_BINARY[op](a, b) & MASK)
        else:
            raise CfiError("DWARF expression op 0x%02x" % op)
    if not stack:
        raise CfiError("empty DWARF expression")
    return stack[-1]


def _signed(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v


_BINARY: Dict[int, Callable[[int, int], int]] = {
    0x1A: lambda a, b: a & b,
    0x1C: lambda a, b: a - b,
    0x1E: lambda a, b: a * b,
    0x21: lambda a, b: a | b,
    0x22: lambda a, b: a + b,
    0x24: lambda a, b: a << b if b < 64 else 0,
    0x25: lambda a, b: a >> b,
    0x26: lambda a, b: _signed(a) >> b,
    0x27: lambda a, b: a ^ b,
    0x29: lambda a, b: int(a == b),
    0x2A: lambda a, b: int(_signed(a) >= _signed(b)),
    0x2B: lambda a, b: int(_signed(a) > _signed(b)),
    0x2C: lambda a, b: int(_signed(a) <= _signed(b)),
    0x2D: lambda a, b: int(_signed(a) < _signed(b)),
    0x2E: lambda a, b: int(a != b),
}


# ---------------------------------------------------------------------------------------- unwinder


class Module:
    """One mapped ELF file: where it is, and its CFI (opened on first use)."""

    def __init__(self, path: str, bias: int, ranges: List[Tuple[int, int]]) -> None:
        self.path = path
        self.bias = bias
        self.ranges = ranges
        self._cfi: Optional[EhFrame] = None
        self._error: Optional[str] = None

    @property
    def cfi(self) -> EhFrame:
        if self._cfi is None:
            if self._error:
                raise CfiError(self._error)
            try:
                self._cfi = self.open_cfi()
            except (OSError, ValueError, CfiError) as exc:
                self._error = str(exc)
                raise CfiError(self._error) from None
        return self._cfi

    def open_cfi(self) -> EhFrame:
        """The module's ``.eh_frame`` (from its file; a module without one overrides this)."""
        return EhFrame(self.path)


# The kind of module an unwinder is given, and its frames hold (``sources/modules.Library`` for a snapshot).
M = TypeVar("M", bound=Module)


class Frame(Generic[M]):
    """One native frame: its pc, its registers (DWARF numbers), and whether it is a signal trampoline's."""

    __slots__ = ("pc", "regs", "module", "signal", "recovered")

    def __init__(self, pc: int, regs: Dict[int, int], module: Optional[M]) -> None:
        self.pc = pc
        self.regs = regs
        self.module = module
        self.signal = False  # the frame of a signal trampoline
        self.recovered: Optional[str] = None  # how it was found without CFI ("frame-pointer", "scan")


class Unwinder(Generic[M]):
    """Unwinds threads of one process: ``modules`` from its maps, ``read(addr, size) -> bytes``."""

    def __init__(self, modules: Sequence[M], read: Reader,
                 stack_of: Optional[Callable[[int], Optional[Tuple[int, int]]]] = None) -> None:
        """``stack_of(address)``: the mapping holding an address (a thread's stack lies below its ``fs_base``)."""
        self.read = read
        self.stack_of = stack_of
        spans = sorted((lo, hi, m) for m in modules for lo, hi in m.ranges)
        self._los = [s[0] for s in spans]
        self._spans = spans

    def module_of(self, pc: int) -> Optional[M]:
        k = bisect.bisect_right(self._los, pc) - 1
        if k >= 0 and pc < self._spans[k][1]:
            return self._spans[k][2]
        return None

    def unwind(self, regs: Dict[str, int], limit: int) -> List[Frame[M]]:
        """The frames of a thread, innermost first, from its registers (names as in ptrace).

        Raises ``CfiError`` where a frame cannot be unwound from CFI alone.
        """
        values = {i: regs[name] for i, name in enumerate(DWARF_REGS) if name in regs}
        pc = regs["rip"]
        frames = [Frame(pc, values, self.module_of(pc))]
        recovered = 0
        stack = self.stack_of(regs["fs_base"] - 1) if self.stack_of and regs.get("fs_base") else None
        while len(frames) < limit:
            frame = frames[-1]
            try:
                caller = self._step(frame, innermost=len(frames) == 1 or frames[-2].signal)
            except CfiError as exc:
                # no CFI here (JIT code, a library built without it): recover the caller, a bounded number of times
                found = recover_caller(frame.regs, self.read, lambda pc: self.module_of(pc) is not None, stack)
                recovered += 1
                if found is None or recovered > MAX_RECOVERED:
                    exc.frames = frames  # what was unwound before it
                    raise
                caller_regs, how = found
                caller = Frame(caller_regs[RIP], caller_regs, self.module_of(caller_regs[RIP]))
                caller.recovered = how
            if caller is None or caller.pc == 0:
                return frames
            frames.append(caller)
        return frames

    def _step(self, frame: Frame[M], innermost: bool) -> Optional[Frame[M]]:
        module = frame.module
        if module is None:
            raise CfiError("pc 0x%x is in no mapped file" % frame.pc)
        cfi = module.cfi
        # A caller's pc is a return address: look up the call instruction before it.
        lookup = (frame.pc if innermost else frame.pc - 1) - module.bias
        row = cfi.rows.get(lookup)
        if row is None:
            try:
                start, _end, cie, program = cfi.find(lookup)
            except CfiError:
                if innermost:
                    at_clone = self._after_clone(frame)
                    if at_clone is not None:
                        return at_clone or None
                raise
            state: _State = {"cfa": None, "rules": {}}
            _run(cie.initial, cie.code_align, cie.data_align, start, 1 << 64, state, None)
            initial = dict(state["rules"])
            _run(program, cie.code_align, cie.data_align, start, lookup, state, initial)
            row = cfi.rows[lookup] = Row(state["cfa"], state["rules"], cie.ra_reg, cie.signal_frame)
        cfa_rule, rules, ra_reg, signal_frame = row
        frame.signal = signal_frame
        regs = frame.regs
        if cfa_rule is None:
            raise CfiError("no CFA rule at 0x%x" % frame.pc)
        if cfa_rule[0] == "reg":
            if cfa_rule[1] not in regs:
                raise CfiError("CFA register %d unknown at 0x%x" % (cfa_rule[1], frame.pc))
            cfa = (regs[cfa_rule[1]] + cfa_rule[2]) & MASK
        else:
            cfa = _evaluate(cfa_rule[1], regs, self.read)
        ra_rule = rules.get(ra_reg)
        if ra_rule is None or ra_rule[0] == "undefined":
            return None  # the outermost frame
        new = dict(regs)
        new[RSP] = cfa
        for reg, rule in rules.items():
            if rule[0] == "undefined":
                new.pop(reg, None)
            elif rule[0] == "offset":
                new[reg] = self._u64((cfa + rule[1]) & MASK)
            elif rule[0] == "val_offset":
                new[reg] = (cfa + rule[1]) & MASK
            elif rule[0] == "register":
                if rule[1] not in regs:
                    raise CfiError("register rule reads unknown register %d" % rule[1])
                new[reg] = regs[rule[1]]
            elif rule[0] == "expr":
                new[reg] = self._u64(_evaluate(rule[1], regs, self.read, push_cfa=cfa))
            elif rule[0] == "val_expr":
                new[reg] = _evaluate(rule[1], regs, self.read, push_cfa=cfa)
        pc = new.get(ra_reg)
        if pc is None:
            return None
        new[RIP] = pc
        if not signal_frame and cfa <= regs.get(RSP, 0):
            raise CfiError("the stack does not grow toward the caller at 0x%x" % frame.pc)
        module = self.module_of(pc)
        if module is None and pc:
            raise CfiError("the caller of 0x%x returns to 0x%x, in no known code" % (frame.pc, pc))
        return Frame(pc, new, module)

    def _after_clone(self, frame: Frame[M]) -> Union[Frame[M], Literal[False], None]:
        """The caller of a thread stopped just after glibc's ``clone``/``clone3`` syscall, which has no FDE.

        glibc leaves the few instructions after the syscall without CFI.  The
        instructions before the pc tell the place (``mov $NR,%eax; syscall``
        with NR 56 or 435); ``rax`` tells who returned: 0 in the new thread,
        whose stack starts there (returns False: the outermost frame), the new
        thread's id in the parent, still at the function's entry state (its
        return address at ``rsp``).  None: not this place.
        """
        try:
            code = self.read(frame.pc - 7, 7)
        except MemoryError:
            return None
        if code[0] != 0xB8 or code[5:7] != b"\x0f\x05" or struct.unpack_from("<I", code, 1)[0] not in _CLONES:
            return None
        if frame.regs.get(0) == 0:
            return False
        rsp = frame.regs.get(RSP)
        if rsp is None:
            return None
        new = dict(frame.regs)
        new[RSP] = rsp + 8
        pc = new[RIP] = self._u64(rsp)
        return Frame(pc, new, self.module_of(pc))

    def _u64(self, addr: int) -> int:
        try:
            value: int = struct.unpack("<Q", self.read(addr, 8))[0]
        except MemoryError as exc:
            raise CfiError("cannot read the saved register at 0x%x: %s" % (addr, exc)) from None
        return value
