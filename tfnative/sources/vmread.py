"""Many ranges of a process's memory read with one system call: ``process_vm_readv``.

A snapshot's hold copies a thousand threads' stacks and a few thousand pages
of Python thread states and frames.  One ``pread`` of ``/proc/PID/mem`` a
range costs a system call and a Python call each; ``process_vm_readv`` takes
up to ``IOV_MAX`` ranges a call, into one buffer.  The plan (the ``iovec``
arrays) is built before the hold where the ranges are known then, and the
bytes are cut into pages after it, so that the hold itself is the system calls.

The kernel stops a call at the first page it cannot read: the ranges before
it are whole, the one it stopped in is read again with one ``pread``, which
keeps what precedes its first unreadable page, and the calls go on with the
next range.  Where ``process_vm_readv`` is not allowed (seccomp,
an old kernel) every range is read with ``pread``.
"""

from __future__ import annotations

import bisect
import ctypes
import errno
import mmap
import os
from array import array
from itertools import accumulate
from typing import Callable, List, Optional, Tuple, Union

__all__ = ["Batch", "IOV_MAX", "spare"]

IOV_MAX = 1024
PAGE = 4096

_Readv = Callable[[int, int, int, int, int, int], int]
_readv: Optional[_Readv] = None
_unusable = False  # process_vm_readv refused once (ENOSYS, EPERM...): pread from then on


def _syscall() -> Optional[_Readv]:
    global _readv
    if _readv is None and not _unusable:
        fn = getattr(ctypes.CDLL(None, use_errno=True), "process_vm_readv", None)
        if fn is None:
            return None
        fn.restype = ctypes.c_ssize_t
        fn.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                       ctypes.c_ulong)
        _readv = fn
    return _readv


class Batch:
    """The ranges ``[start, end)`` of process ``pid``'s memory, to be read together by ``read``.

    ``done[i]`` is how many bytes of range ``i`` were read (from its start);
    ``data`` holds them, range after range (``offsets[i]`` is where range
    ``i`` begins in it).  ``whole``: the ranges are pages the reader wants each of (a refresh), so a page
    that could not be read is worth recording as such."""

    def __init__(self, pid: int, ranges: List[Tuple[int, int]], whole: bool = False,
                 buffer: Optional[bytearray] = None) -> None:
        self.pid = pid
        self.whole = whole
        self.ranges = [(s, e) for s, e in ranges if 0 < s < e]
        sizes = [e - s for s, e in self.ranges]
        self.offsets: List[int] = list(accumulate(sizes, initial=0))
        total = self.offsets.pop()
        # Where the bytes go.  A page of our own memory touched for the first time costs a fault (several
        # microseconds in a VM), so a batch planned before the hold gets its buffer now, touched, and a batch
        # planned in the hold takes a buffer touched before it (``spare``); one that does not fit there goes
        # to an anonymous mapping, whose pages are made only as the kernel copies into them.
        self.data: Union[bytearray, mmap.mmap]
        if buffer is None:
            self.data = bytearray(total)
        elif len(buffer) >= total:
            self.data = buffer
        else:
            self.data = mmap.mmap(-1, max(total, 1))
        self.done = [0] * len(self.ranges)
        # The iovec arrays, (address, length) pairs: made with whole-array operations, for a batch built in the
        # hold (a thousand stacks).
        count = len(self.ranges)
        self._local = array("Q", bytes(16 * count))
        self._remote = array("Q", bytes(16 * count))
        if self.ranges:
            base = ctypes.addressof((ctypes.c_char * total).from_buffer(self.data))
            lengths = array("Q", sizes)
            self._remote[0::2] = array("Q", [s for s, _e in self.ranges])
            self._remote[1::2] = lengths
            self._local[0::2] = array("Q", [base + off for off in self.offsets])
            self._local[1::2] = lengths

    def without(self, spans: List[Tuple[int, int]]) -> Batch:
        """This batch less its ranges that lie wholly inside one of ``spans`` (another batch of the same
        hold reads them already: Python 3.11's frames begin on each thread's C stack, which the stack copy
        holds).  The two share one buffer, each range where this batch put it."""
        spans = sorted(spans)
        starts = [start for start, _end in spans]
        keep = []
        for k, (start, end) in enumerate(self.ranges):
            i = bisect.bisect_right(starts, start) - 1
            if i < 0 or end > spans[i][1]:
                keep.append(k)
        sub = Batch(self.pid, [], self.whole, buffer=bytearray())
        sub.data = self.data
        sub.ranges = [self.ranges[k] for k in keep]
        sub.offsets = [self.offsets[k] for k in keep]
        sub.done = [0] * len(keep)
        for k in keep:
            sub._remote.extend(self._remote[2 * k: 2 * k + 2])
            sub._local.extend(self._local[2 * k: 2 * k + 2])
        return sub

    def read(self, fd: int) -> int:
        """Read every range now (``fd``: the process's ``/proc/PID/mem``, for ``pread``); the bytes read."""
        n = len(self.ranges)
        i = 0
        fn = _syscall()
        while i < n:
            if fn is None:
                self._pread(fd, i)
                i += 1
                continue
            count = min(IOV_MAX, n - i)
            local, remote = self._local.buffer_info()[0], self._remote.buffer_info()[0]
            got = fn(self.pid, local + 16 * i, count, remote + 16 * i, count, 0)
            if got < 0:
                err = ctypes.get_errno()
                if err in (errno.ENOSYS, errno.EPERM, errno.EINVAL):
                    global _unusable, _readv
                    _unusable, _readv, fn = True, None, None
                    continue
                got = 0  # EFAULT/ESRCH...: the first range cannot be read
            i = self._account(i, count, got, fd)
        return sum(self.done)

    def _account(self, i: int, count: int, got: int, fd: int) -> int:
        """Mark the ranges from ``i`` that ``got`` bytes covered; the range the call stopped in is read by
        ``pread``.  The index to go on from."""
        for k in range(i, i + count):
            size = self.ranges[k][1] - self.ranges[k][0]
            if got >= size:
                self.done[k] = size
                got -= size
                continue
            self._pread(fd, k)  # the kernel stopped in this range: read again, up to its first unreadable page
            return k + 1
        return i + count

    def _pread(self, fd: int, k: int) -> None:
        start, end = self.ranges[k]
        off = self.offsets[k]
        try:
            data = os.pread(fd, end - start, start)
        except (OSError, OverflowError):
            data = b""
        self.data[off: off + len(data)] = data
        self.done[k] = len(data)

    def pages(self) -> List[Tuple[int, bytes]]:
        """(page address, its 4 KiB) of every whole page read, for ranges that start on a page."""
        out: List[Tuple[int, bytes]] = []
        with memoryview(self.data) as data:
            for (start, _end), off, done in zip(self.ranges, self.offsets, self.done):
                for k in range(0, done - done % PAGE, PAGE):
                    out.append((start + k, bytes(data[off + k: off + k + PAGE])))
        return out

    def close(self) -> None:
        """Give a mapping back (``pages`` made copies of what it held)."""
        if isinstance(self.data, mmap.mmap):
            self.data.close()


def spare(size: int) -> bytearray:
    """A buffer of ``size`` bytes with every page touched: made before a hold, for a ``Batch`` planned in it."""
    return bytearray(size)
