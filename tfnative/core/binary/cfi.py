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
import struct
from typing import Callable, Dict, Generic, List, Literal, Optional, Sequence, Tuple, TypeVar, Union

from .cfaprogram import MASK, CfiError, Reader, Row, State, evaluate, run_program
from .ehframe import EhFrame
from .jit import recover_caller

__all__ = ["Frame", "Module", "Unwinder", "DWARF_REGS"]

DWARF_REGS = ("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
              "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip")
RSP, RIP = 7, 16
MAX_RECOVERED = 16  # callers recovered without CFI per thread: beyond, the stack is garbage
_CLONES = (56, 435)  # the clone and clone3 syscalls


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
            state: State = {"cfa": None, "rules": {}}
            run_program(cie.initial, cie.code_align, cie.data_align, start, 1 << 64, state, None)
            initial = dict(state["rules"])
            run_program(program, cie.code_align, cie.data_align, start, lookup, state, initial)
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
            cfa = evaluate(cfa_rule[1], regs, self.read)
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
                new[reg] = self._u64(evaluate(rule[1], regs, self.read, push_cfa=cfa))
            elif rule[0] == "val_expr":
                new[reg] = evaluate(rule[1], regs, self.read, push_cfa=cfa)
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
