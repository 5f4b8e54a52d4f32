"""Freeze every thread of a process with ptrace, read its registers and memory, let it go.

This is what ``tfnative stack`` needs when it does not start gdb (see
``snapshot.py``): the threads stopped for a few hundred milliseconds, the
registers of each, and reads of the target's memory.

* Threads are taken with ``PTRACE_SEIZE`` + ``PTRACE_INTERRUPT``, never with a
  SIGSTOP: should tfnative die (even ``kill -9``) while it holds them, the
  kernel detaches them and they run on, with no signal left pending.
* A signal that arrives while a thread is held is handed back to it at the
  detach, so the target loses nothing.
* A process that was stopped (job control) stays stopped after the detach.
* ``/proc/PID/task`` is listed again until no new thread shows up: a thread
  created while the others were being seized is seized too.

Linux on x86-64 only: ``Unsupported`` elsewhere, and the caller uses gdb.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import signal
import struct
import time
from typing import Callable, Dict, List, Optional, Set, Tuple

from ..core import procfs
from ..core.memory import USER_SPACE_END
from ..errors import PtraceRefused, Unsupported
from .vmread import Batch

__all__ = ["Frozen", "Memory", "REGISTERS", "ensure_not_stopped", "read_exact"]

PTRACE_GETREGS = 12
PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_EVENT_STOP = 128
WALL = 0x40000000

# struct user_regs_struct (x86-64), in order.
REGISTERS = ("r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx",
             "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base",
             "ds", "es", "fs", "gs")


# waitpid's status for the stop PTRACE_INTERRUPT causes (event, signal byte, stopped marker), masked as
# ``_take`` masks it: (PTRACE_EVENT_STOP << 16) | (SIGTRAP << 8) | 0x7f, any group-stop signal aside.
_INTERRUPT_STOP = (PTRACE_EVENT_STOP << 16) | 0x7F

_call: Optional[Callable[[int, int, int, int], int]] = None


def _ptrace_call() -> Callable[[int, int, int, int], int]:
    """libc's ptrace(2), loaded once: -1 and errno (``ctypes.get_errno``) on failure."""
    global _call
    if _call is None:
        fn = ctypes.CDLL(None, use_errno=True).ptrace
        fn.restype = ctypes.c_long
        fn.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_size_t, ctypes.c_size_t)  # plain ints: no boxing
        _call = fn
    return _call


def _ptrace(request: int, tid: int, addr: int = 0, data: int = 0) -> int:
    """ptrace(2) for the requests that return 0 or -1 (no PEEK): errno counts only at -1."""
    res = _ptrace_call()(request, tid, addr, data)
    if res == -1:
        err = ctypes.get_errno()
        if err:
            raise OSError(err, os.strerror(err))
    return int(res)


PAGE = 4096
_RSP_AT, _FS_BASE_AT = 8 * REGISTERS.index("rsp"), 8 * REGISTERS.index("fs_base")


def read_exact(fd: int, addr: int, size: int) -> bytes:
    """``size`` bytes at ``addr`` of the process whose ``/proc/PID/mem`` is open as ``fd``, read now;
    MemoryError where they cannot all be read."""
    if addr <= 0 or addr >= USER_SPACE_END or size < 0:
        raise MemoryError("bad address 0x%x" % addr)
    try:
        data = os.pread(fd, size, addr)
    except (OSError, OverflowError) as exc:
        raise MemoryError("cannot read 0x%x: %s" % (addr, exc)) from None
    if len(data) != size:
        raise MemoryError("cannot read 0x%x: short read" % addr)
    return data


class Memory:
    """Reads of the target's memory through ``/proc/PID/mem``; ``MemoryError`` when unreadable.

    ``cache=True`` keeps each page read, for a process that stays stopped while
    this object is used (a snapshot): the many small reads of an unwind and of
    the Python readers then cost one ``pread`` per page.

    Copy, then let go (``snapshot.take``): while the threads are held,
    ``fetch`` reads batches (each thread's live stack; ``plan_pages``: the
    pages of the Python thread states and frames, planned before the hold)
    with as few system calls as the kernel allows (``vmread``); ``released()``
    marks the moment the process runs again and cuts the batches into the
    page cache.  From then on every read is served from the copy where it
    holds the pages, and a page it lacks is read from the running process and
    counted in ``late_reads`` (its address in ``late_pages``), so that the
    caller can mark what was read after the release: a copy is never mixed
    silently with the process as it is later.
    """

    def __init__(self, pid: int, cache: bool = False) -> None:
        self.fd = os.open("/proc/%d/mem" % pid, os.O_RDONLY | os.O_CLOEXEC)
        self.pid = pid
        self.pages: Optional[Dict[int, bytes]] = {} if cache else None
        self.live = False  # released(): the process runs again, the cache is a copy of an earlier moment
        self.late_reads = 0
        self.late_pages: Set[int] = set()
        self._pending: List[Batch] = []  # fetched, not yet cut into pages

    def copy(self, start: int, end: int) -> int:
        """Take ``[start, end)`` (page-aligned outwards) into the page cache; the bytes taken (0 where the
        range cannot be read: its pages are then read one by one when asked)."""
        return self.copy_many([(start, end)])

    def copy_many(self, ranges: List[Tuple[int, int]]) -> int:
        """``copy`` of each ``[start, end)``, read together (``plan``, ``fetch``); the bytes taken."""
        batch = self.plan(ranges)
        taken = self.fetch(batch)
        self.settle()
        return taken

    def plan(self, ranges: List[Tuple[int, int]]) -> Batch:
        """The ranges, page-aligned outwards, to be read together by ``fetch``."""
        spans = []
        for start, end in ranges:
            if start <= 0 or end <= start or end > USER_SPACE_END:
                continue
            spans.append((start - start % PAGE, -(-end // PAGE) * PAGE))
        return Batch(self.pid, spans)

    def plan_pages(self, bases: List[int]) -> Batch:
        """The pages at ``bases`` (adjacent ones as one range) to be read again by ``fetch``: built before the
        hold, where the pages are known; a page that cannot be read is then cached as unreadable."""
        runs: List[Tuple[int, int]] = []
        for base in sorted(set(bases)):
            if runs and base == runs[-1][1]:
                runs[-1] = (runs[-1][0], base + PAGE)
            else:
                runs.append((base, base + PAGE))
        return Batch(self.pid, runs, whole=True)

    def fetch(self, batch: Batch) -> int:
        """Read ``batch`` now (the hold's system calls); its pages reach the cache at ``settle`` (after the
        hold, where cutting them costs the target nothing).  The bytes read."""
        if self.pages is None:
            return 0
        taken = batch.read(self.fd)
        self._pending.append(batch)
        return taken - taken % PAGE

    def adopt(self, batch: Batch) -> None:
        """A batch read by another thread in the hold (``Batch.read``): its pages reach the cache at ``settle``."""
        if self.pages is not None:
            self._pending.append(batch)

    def settle(self) -> None:
        """Cut the fetched batches into the page cache (a later batch's pages replace an earlier one's)."""
        pending, self._pending = self._pending, []
        for batch in pending:
            self.pages.update(batch.pages())  # type: ignore[union-attr]
            if batch.whole:
                for (start, end), done in zip(batch.ranges, batch.done):
                    for base in range(start + done - done % PAGE, end, PAGE):
                        self.pages[base] = b""  # type: ignore[index]
            batch.close()

    def track(self, pages: Optional[Set[int]]) -> None:
        """Record in ``pages`` the page of every read from now on (None: stop)."""
        if pages is None:
            self.__dict__.pop("read", None)  # the class's read again: no cost when not tracking
            return

        def read(addr: int, size: int) -> bytes:
            data = Memory.read(self, addr, size)
            first = addr - addr % PAGE
            pages.add(first)
            if addr + size > first + PAGE:
                pages.update(range(first + PAGE, addr + size, PAGE))
            return data

        self.read = read  # type: ignore[method-assign]

    def released(self) -> None:
        """The process runs again: pages not in the copy are read live from now on, and counted."""
        self.settle()
        self.live = True

    def _page(self, base: int) -> bytes:
        page = self.pages.get(base)  # type: ignore[union-attr]
        if page is None:
            try:
                page = os.pread(self.fd, PAGE, base)
            except (OSError, OverflowError):
                page = b""
            self.pages[base] = page  # type: ignore[index]
            if self.live:
                self.late_reads += 1
                self.late_pages.add(base)
        return page

    def read(self, addr: int, size: int) -> bytes:
        pages = self.pages
        if pages is not None and 0 < addr < USER_SPACE_END and 0 <= size:  # the hot path: a cached page
            off = addr % PAGE
            if off + size <= PAGE:
                page = pages.get(addr - off)
                if page is not None and len(page) == PAGE:
                    return page[off: off + size]
        return self._read(addr, size)

    def _read(self, addr: int, size: int) -> bytes:
        if addr <= 0 or addr >= USER_SPACE_END or size < 0:
            raise MemoryError("bad address 0x%x" % addr)
        if self._pending:
            self.settle()
            return self.read(addr, size)
        if self.pages is not None and size <= PAGE:
            base = addr - addr % PAGE
            page = self._page(base)
            if len(page) == PAGE:
                if addr + size <= base + PAGE:
                    return page[addr - base: addr - base + size]
                nxt = self._page(base + PAGE)  # a read across two pages, both from the cache
                if len(nxt) == PAGE:
                    return (page + nxt)[addr - base: addr - base + size]
        if self.live:
            self.late_reads += 1  # larger reads go to the process itself
        return read_exact(self.fd, addr, size)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _zombie(pid: int, tid: int) -> bool:
    """Whether thread ``tid`` of ``pid`` has exited and waits to be reaped (state Z)."""
    return procfs.state(pid, tid) == "Z"


class Frozen:
    """``with Frozen(pid) as f:`` every thread of ``pid`` is stopped; ``f.regs[tid]`` holds its registers."""

    def __init__(self, pid: int) -> None:
        if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
            raise Unsupported("the gdb-free snapshot reads x86-64 Linux registers only")
        self.pid = pid
        self.held: Dict[int, int] = {}  # tid -> signal to hand back at the detach (0: none)
        self.raw: Dict[int, bytes] = {}  # tid -> its user_regs_struct as read while held (``regs`` after)
        self.running: Set[int] = set()  # seized, not seen stopped yet
        self._regs: Optional[Dict[int, Dict[str, int]]] = None
        self._buf = ctypes.create_string_buffer(8 * len(REGISTERS))
        self.exited: Set[int] = set()  # zombie threads: the leader after pthread_exit
        self.started = 0.0  # time.monotonic() as the first thread was taken
        self.held_s = 0.0  # from then to the last thread's release

    def __enter__(self) -> Frozen:
        try:
            self._seize_all()  # PTRACE_SEIZE stops nothing: done before the hold, which it does not lengthen
            self.started = time.monotonic()
            self._hold_all()
        except BaseException:
            self.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @property
    def tids(self) -> List[int]:
        return sorted(self.raw, key=lambda t: (t != self.pid, t))

    @property
    def regs(self) -> Dict[int, Dict[str, int]]:
        """tid -> its registers by name; made from the raw copies on first use (after the hold, where it costs
        the target nothing)."""
        if self._regs is None:
            fmt = "<%dQ" % len(REGISTERS)
            self._regs = {tid: dict(zip(REGISTERS, struct.unpack(fmt, raw))) for tid, raw in self.raw.items()}
        return self._regs

    def stack_pointers(self) -> List[Tuple[int, int]]:
        """(rsp, fs_base) of each held thread, from its raw copy: what the hold needs to copy its stack."""
        word = struct.Struct("<Q").unpack_from
        return [(word(raw, _RSP_AT)[0], word(raw, _FS_BASE_AT)[0]) for raw in self.raw.values()]

    def _list(self) -> List[int]:
        try:
            return procfs.tids(self.pid)
        except ProcessLookupError:
            raise Unsupported("process %d is gone" % self.pid) from None

    def _seize(self, tid: int) -> bool:
        """PTRACE_SEIZE one thread (it runs on); False where it is gone or a zombie leader."""
        try:
            _ptrace(PTRACE_SEIZE, tid)
        except OSError as exc:
            if exc.errno == errno.ESRCH:  # it exited meanwhile
                return False
            if exc.errno == errno.EPERM and _zombie(self.pid, tid):
                self.exited.add(tid)  # a leader gone by pthread_exit: its threads live on
                return False
            raise PtraceRefused("ptrace(PTRACE_SEIZE, %d): %s" % (tid, exc.strerror)) from None
        self.held[tid] = 0
        self.running.add(tid)
        return True

    def _seize_all(self) -> None:
        for tid in self._list():
            if tid not in self.held and tid not in self.exited:
                self._seize(tid)

    def _interrupt(self, tids: List[int]) -> None:
        call = _ptrace_call()
        for tid in tids:
            call(PTRACE_INTERRUPT, tid, 0, 0)  # fails only for a thread gone meanwhile, which the wait sees

    def _hold_all(self) -> None:
        """Stop every seized thread and read its registers as soon as it has stopped; then the threads
        started meanwhile, until ``/proc/PID/task`` shows no new one."""
        pending = list(self.held)
        self._interrupt(pending)
        for _round in range(100):
            self._take(pending)
            new = [t for t in self._list() if t not in self.held and t not in self.exited]
            if not new:
                return
            pending = [t for t in new if self._seize(t)]
            self._interrupt(pending)
        raise Unsupported("the threads of process %d keep changing" % self.pid)

    def _take(self, tids: List[int]) -> None:
        """Wait for each interrupted thread's stop and read its registers.  The target waits on this loop:
        the usual stop (the interrupt's event stop) is told by one comparison, anything else goes to
        ``_wait_stop``."""
        waitpid, held, running, raw = os.waitpid, self.held, self.running, self.raw
        call = _ptrace_call()
        buf = self._buf
        where = ctypes.addressof(buf)
        for tid in tids:
            try:
                status = waitpid(tid, WALL)[1]
            except ChildProcessError:
                status = -1
            if status & 0xFFFF00FF != _INTERRUPT_STOP:
                self._wait_stop(tid, status)
            running.discard(tid)
            if tid not in held:
                continue
            if call(PTRACE_GETREGS, tid, 0, where) == -1:
                err = ctypes.get_errno()
                if err != errno.ESRCH:
                    raise Unsupported("ptrace(PTRACE_GETREGS, %d): %s" % (tid, os.strerror(err)))
                held.pop(tid, None)  # it exited meanwhile
                continue
            raw[tid] = buf.raw

    def _wait_stop(self, tid: int, status: Optional[int] = None) -> None:
        """Wait until ``tid`` is stopped (``status``: what a first ``waitpid`` gave; -1: it is no child of
        ours); a thread that exited is dropped, a signal it stopped for is kept for the detach."""
        while True:
            if status is None:
                try:
                    status = os.waitpid(tid, WALL)[1]
                except ChildProcessError:
                    status = -1
            if status == -1:
                self.held.pop(tid, None)
                return
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                self.held.pop(tid, None)
                return
            if not os.WIFSTOPPED(status):
                status = None
                continue
            sig = os.WSTOPSIG(status)
            if status >> 16 == PTRACE_EVENT_STOP:
                return  # the interrupt (or a group stop): the thread is held
            # A signal on its way to the thread: keep it for the detach.  The
            # thread is stopped now, which is all we need.
            if sig != signal.SIGTRAP:
                self.held[tid] = sig
            return

    def release(self) -> None:
        """Detach every held thread (idempotent); a held signal goes back to its thread.  A thread seized but
        not stopped yet (an error came between) is stopped first: only a stopped tracee can be detached."""
        if self.running:
            self._interrupt(list(self.running))
            for tid in list(self.running):
                self._wait_stop(tid)
            self.running.clear()
        call = _ptrace_call()
        for tid, sig in self.held.items():
            call(PTRACE_DETACH, tid, 0, sig)  # fails only for a thread gone meanwhile
        self.held.clear()
        if self.started and not self.held_s:
            self.held_s = time.monotonic() - self.started

    def thread_name(self, tid: int) -> str:
        return procfs.comm(self.pid, tid)


def ensure_not_stopped(pid: int, wait_s: float = 2.0) -> None:
    """After we let go of ``pid`` (a detach, the end of a snapshot) it must run on, whatever happened: a
    process still stopped after ``wait_s`` gets SIGCONT."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if procfs.state(pid) not in ("t", "T"):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
