"""Stack-copy planning for the hold: which range of each thread's stack is copied while the process
is held (``STACK_COPY`` from its stack pointer up, the red zone below), in one batch of reads, and the
reads straight from the process of ``--no-pause``'s second reading.
"""

from __future__ import annotations

import bisect
import itertools
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..core import procfs
from ..core.memory import USER_SPACE_END, Memory
from ..core.python.pyframes import ThreadPy
from ..sources.live import LiveSource
from ..sources.modules import Mappings
from ..sources.procmem import PAGE, read_exact
from ..sources.procmem import Memory as LiveMemory
from ..sources.ptrace import REGISTERS
from ..sources.vmread import Batch

STACK_COPY = 256 << 10  # the most of each thread's stack copied while held, from its stack pointer up
RED_ZONE = 128  # x86-64: a leaf function's data below its stack pointer
STACK_GUESS = 12 << 10  # the live stack of a thread, for the buffer made before the hold (1,000 idle Python
# threads: 6 KiB each; more goes to memory touched in the hold)
_RSP, _FS_BASE = REGISTERS.index("rsp"), REGISTERS.index("fs_base")


def inner_to_host(native_id: Optional[int], inner: Dict[int, int]) -> Optional[int]:
    """The host thread id of a thread id seen inside the process's PID namespace."""
    if not inner or native_id is None:
        return native_id
    return next((host for host, ns in inner.items() if ns == native_id), native_id)


class Uncached(Memory):
    """Reads straight from the process (the second reading of --no-pause): ``fd``, its ``/proc/PID/mem``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, addr: int, size: int) -> bytes:
        return read_exact(self.fd, addr, size)


def read_raw(memory: LiveMemory, start: int, size: int) -> bytes:
    try:
        return Uncached(memory.fd).read(start, size)
    except MemoryError:
        return b""


def py_key(thread: ThreadPy) -> Tuple[Any, ...]:
    """What two readings of a thread's Python frames must agree on."""
    return tuple((f.function, f.file, f.line) for g in thread.groups for f in g), thread.error


def user_regs(pid: int, tid: int) -> Optional[Dict[str, int]]:
    """The user stack pointer and program counter of a thread blocked in the kernel, without stopping it
    (``/proc/PID/task/TID/syscall``: "NR ARGS... SP PC", or "-1 SP PC" outside a system call); None
    for a thread running on a CPU ("running") or unreadable."""
    fields = procfs.syscall(pid, tid)
    if fields is None or len(fields) < 3 or fields[0] == "running":
        return None
    try:
        sp, pc = int(fields[-2], 16), int(fields[-1], 16)
    except ValueError:
        return None
    if not (sp and pc):
        return None
    regs = {"rsp": sp, "rip": pc}
    if fields[0] not in ("-1", "running") and fields[0].lstrip("-").isdigit():
        regs["orig_rax"] = int(fields[0])  # the system call it waits in, as kstate reads it from ptrace
    return regs


def _thread_stack(mapping: Callable[[int], Optional[Tuple[int, int]]], rsp: int,
                  fs_base: int) -> List[Tuple[int, int]]:
    """What to copy of a held thread's stack, page-aligned, from its rsp and fs_base: the live part at its
    stack pointer (from just below it to its mapping's end, ``STACK_COPY`` at most) and, where the stack
    pointer is outside the thread's own stack (oneDNN's JIT kernels move it to a buffer of their own), the
    top of its own stack (below its thread pointer, ``fs_base``), where the frames that called the kernel
    are."""
    if not rsp:
        return []
    out: List[Tuple[int, int]] = []
    span = mapping(rsp)
    start = rsp - RED_ZONE
    end = min(span[1], rsp + STACK_COPY) if span else rsp + PAGE
    if 0 < start < end <= USER_SPACE_END:
        out.append((start - start % PAGE, -(-end // PAGE) * PAGE))
    if not fs_base or (span is not None and span[0] < fs_base <= span[1]):
        return out  # the usual case: the stack pointer is in the thread's own stack
    own = mapping(fs_base - 1)
    if own is not None and not own[0] <= rsp < own[1] and span != own:
        low = max(own[0], fs_base - STACK_COPY)
        out.append((low - low % PAGE, -(-min(own[1], fs_base) // PAGE) * PAGE))
    return out


def stack_batch(pid: int, mappings: Mappings, words: memoryview, buffer: bytearray) -> Batch:
    """Every held thread's ``_thread_stack``, as one batch, from the registers read in the hold
    (``Frozen.words``: ``len(REGISTERS)`` words a thread).  Run in the hold, where each microsecond a thread
    costs is a millisecond of pause for a thousand: the usual case (the stack pointer in the thread's own
    stack, its thread pointer at that stack's top) is computed here, with the mappings looked up by
    ``bisect`` for all threads at once; the rest goes to ``_thread_stack``."""
    count = len(REGISTERS)
    rsps, bases = words[_RSP::count].tolist(), words[_FS_BASE::count].tolist()
    spans = mappings.spans
    ranges: List[Tuple[int, int]] = []
    add = ranges.append
    for rsp, fs_base, k in zip(rsps, bases, map(bisect.bisect_right, itertools.repeat(mappings.starts), rsps)):
        lo, hi = spans[k - 1] if k else (0, 0)
        if lo < fs_base <= hi and RED_ZONE < rsp < hi:
            start, end = rsp - RED_ZONE, rsp + STACK_COPY
            add((start - start % PAGE, hi if end >= hi else -(-end // PAGE) * PAGE))
        else:
            ranges.extend(_thread_stack(mappings, rsp, fs_base))
    return Batch(pid, ranges, buffer=buffer)


def copy_stack(source: LiveSource, rsp: int) -> Tuple[int, bytes]:
    """Copy the live part of one thread's stack (the first range ``_thread_stack`` gives for it); (its first
    page's address, the bytes copied)."""
    ranges = _thread_stack(source.mapping_of, rsp, 0)
    pages = source.memory.pages
    if not ranges or pages is None:
        return 0, b""
    base, end = ranges[0]
    taken = source.memory.copy(base, end)
    return base, b"".join(pages.get(base + k, b"") for k in range(0, taken, PAGE))
