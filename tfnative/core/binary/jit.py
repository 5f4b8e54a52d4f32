"""The caller of a frame that has no CFI: JIT-generated code (oneDNN's kernels), code built without it.

Such a frame cannot be unwound exactly, so its caller is recovered the way
crash reporters do it, and marked as recovered:

* ``"frame-pointer"``: ``rbp`` points into the stack above ``rsp`` and the
  word after the saved ``rbp`` is a return address;
* ``"scan"``: the first word of the stack, from ``rsp`` up (a bounded
  window), that is a return address.

A word is a return address only when it points into known code and the
bytes just before it encode a ``call`` (``e8 rel32``, or ``ff /2`` in any of
its addressing forms): a pointer to code that no call precedes is not one.
A frame-pointer hit is used when the scan agrees with it or finds nothing
nearer (else the frame pointer belongs to an outer function that the scan
would skip).  The callee-saved registers of a recovered caller are unknown,
so only ``rsp``, ``rip`` and ``rbp`` are given: ``rbp`` along a frame-pointer
chain, or after a scan the word saved below the return address that points
to a frame whose next word is again a return address.
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, List, Optional, Tuple

__all__ = ["MAX_SCAN_WORDS", "is_call_before", "recover_caller"]

MAX_SCAN_WORDS = 4096  # 32 KiB of stack: the frames of JIT kernels are small
MAX_FRAME_POINTER_SPAN = 1 << 20
MAX_STACK_POINTERS = 16
RBP, RSP, RIP = 6, 7, 16
Reader = Callable[[int, int], bytes]


def is_call_before(code: bytes) -> bool:
    """Whether ``code`` (the bytes just before a return address, 8 of them) ends with a ``call``."""
    n = len(code)
    if n >= 5 and code[n - 5] == 0xE8:
        return True
    for length in range(2, 9):
        start = n - length
        if start < 0:
            break
        pos = start
        if 0x40 <= code[pos] <= 0x4F and length > 2:  # REX
            pos += 1
        if code[pos] != 0xFF:
            continue
        modrm = code[pos + 1] if pos + 1 < n else None
        if modrm is None or (modrm >> 3) & 7 != 2:
            continue
        mod, rm = modrm >> 6, modrm & 7
        size = pos + 2 - start
        if mod != 3 and rm == 4:  # SIB
            if pos + 2 >= n:
                continue
            sib_base = code[pos + 2] & 7
            size += 1
            if mod == 0 and sib_base == 5:
                size += 4
        if mod == 1:
            size += 1
        elif mod == 2:
            size += 4
        elif mod == 0 and rm == 5:  # rip-relative
            size += 4
        if size == length:
            return True
    return False


def _return_address(read: Reader, is_code: Callable[[int], bool], word: int) -> bool:
    if word < 4096 or not is_code(word):
        return False
    try:
        return is_call_before(read(word - 8, 8))
    except MemoryError:
        return False


def _scan(read: Reader, is_code: Callable[[int], bool], rsp: int) -> Optional[Tuple[int, int]]:
    """(slot, return address) of the first return address on the stack from ``rsp`` up."""
    page = 4096
    addr = rsp
    end = rsp + 8 * MAX_SCAN_WORDS
    while addr < end:
        chunk = min(page - addr % page, end - addr)
        try:
            data = read(addr, chunk)
        except MemoryError:
            return None  # the end of the stack
        for i, (word,) in enumerate(struct.iter_unpack("<Q", data[:chunk - chunk % 8])):
            if _return_address(read, is_code, word):
                return addr + 8 * i, word
        addr += chunk
    return None


def recover_caller(regs: Dict[int, int], read: Reader, is_code: Callable[[int], bool],
                   stack: Optional[Tuple[int, int]] = None) -> Optional[Tuple[Dict[int, int], str]]:
    """The registers of the caller of a frame without CFI (DWARF numbers), and how they were found; or None.

    ``stack``: the thread's stack mapping, when known.  Some JIT kernels
    (oneDNN's GEMM) use ``rsp`` as a data pointer, keeping the real stack
    pointer in another register: when nothing is found from ``rsp``, the
    scan starts again from each register that points into ``stack``.
    """
    rsp = regs.get(RSP)
    if rsp is None or rsp % 8:
        return None
    found = _recover_from(regs, read, is_code, rsp)
    if found is None and stack is not None and not stack[0] <= rsp < stack[1]:
        for start in _stack_pointers(regs, read, rsp, stack):
            found = _recover_from(regs, read, is_code, start)
            if found is not None:
                return found[0], "scan"
    return found


def _stack_pointers(regs: Dict[int, int], read: Reader, rsp: int, stack: Tuple[int, int]) -> List[int]:
    """Where the real stack pointer may be kept while ``rsp`` points elsewhere: registers, then saved words.

    The registers that point into ``stack``, then the words of the first page
    at ``rsp`` that do (a kernel that moves ``rsp`` to a buffer of its own
    saves the original there); at most ``MAX_STACK_POINTERS``, in that order.
    """
    out = sorted({v & ~7 for r, v in regs.items() if r < RIP and stack[0] <= v < stack[1]})
    try:
        words = struct.unpack("<512Q", read(rsp, 4096))
    except MemoryError:
        words = ()
    out += [w & ~7 for w in words if stack[0] <= w < stack[1] and w & ~7 not in out]
    return out[:MAX_STACK_POINTERS]


def _recover_from(regs: Dict[int, int], read: Reader, is_code: Callable[[int], bool],
                  rsp: int) -> Optional[Tuple[Dict[int, int], str]]:
    fp: Optional[Tuple[int, int, int]] = None
    rbp = regs.get(RBP)
    if rbp is not None and rsp <= rbp < rsp + MAX_FRAME_POINTER_SPAN and rbp % 8 == 0:
        try:
            saved, ret = struct.unpack("<QQ", read(rbp, 16))
        except MemoryError:
            saved = ret = 0
        if _return_address(read, is_code, ret):
            fp = (rbp + 8, ret, saved)
    hit = _scan(read, is_code, rsp)
    if fp is not None and (hit is None or hit[0] >= fp[0]):
        slot, ret, saved = fp
        return {RSP: slot + 8, RIP: ret, RBP: saved}, "frame-pointer"
    if hit is not None:
        slot, ret = hit
        caller = {RSP: slot + 8, RIP: ret}
        saved = _saved_frame_pointer(read, is_code, rsp, slot)
        if saved is not None:
            caller[RBP] = saved
        return caller, "scan"
    return None


def _saved_frame_pointer(read: Reader, is_code: Callable[[int], bool], rsp: int, slot: int) -> Optional[int]:
    """The caller's ``rbp``, saved by the callee between ``rsp`` and the return address ``slot``, if one is there.

    A saved frame pointer points above the return address into the stack,
    and the word after the frame it points to is itself a return address.
    """
    words: Tuple[int, ...]
    try:
        words = struct.unpack("<%dQ" % ((slot - rsp) // 8), read(rsp, slot - rsp)) if slot > rsp else ()
    except MemoryError:
        return None
    for word in reversed(words):  # the nearest to the return address first: pushed first
        if slot < word < slot + MAX_FRAME_POINTER_SPAN and word % 8 == 0:
            try:
                ret = struct.unpack("<Q", read(word + 8, 8))[0]
            except MemoryError:
                continue
            if _return_address(read, is_code, ret):
                return word
    return None
