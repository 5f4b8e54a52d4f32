"""Reads of a process's memory through ``/proc/PID/mem``: exact reads (``read_exact``) and the hold's page copy
(``Memory``: copy, then let go), for every live source; no ptrace request here (``sources/ptrace.py`` holds the
threads while the copy is taken).
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Set, Tuple

from ..core.memory import USER_SPACE_END, UnwindMemory
from .vmread import Batch

__all__ = ["Memory", "PAGE", "read_exact"]

PAGE = 4096


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


class Memory(UnwindMemory):
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
