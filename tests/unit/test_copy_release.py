"""Copy, then let go (``sources/procmem.Memory``): after ``released()`` reads come from the copy, and a page
the copy lacks is read from the running process and counted, never mixed in silently."""

import ctypes
import os

from tfnative.sources.procmem import PAGE, Memory


def test_reads_after_the_release_come_from_the_copy_and_misses_are_counted():
    buf = ctypes.create_string_buffer(b"A" * (3 * PAGE))
    other = ctypes.create_string_buffer(b"B" * (3 * PAGE))
    addr = ctypes.addressof(buf)
    mem = Memory(os.getpid(), cache=True)
    try:
        assert mem.copy(addr, addr + 3 * PAGE) >= 3 * PAGE
        mem.released()
        ctypes.memset(addr, ord("C"), 3 * PAGE)  # the process runs on and changes it
        assert mem.read(addr + 10, 8) == b"A" * 8
        assert mem.read(addr + PAGE - 4, 8) == b"A" * 8  # across two copied pages
        assert mem.late_reads == 0
        inner = ctypes.addressof(other) + PAGE  # a page wholly inside the other buffer, never copied
        inner -= inner % PAGE
        assert mem.read(inner + 8, 8) == b"B" * 8
        assert mem.late_reads == 1 and mem.late_pages == {inner}
    finally:
        mem.close()


def test_a_range_that_cannot_be_read_copies_nothing():
    mem = Memory(os.getpid(), cache=True)
    try:
        assert mem.copy(PAGE, 2 * PAGE) == 0  # page 1 is never mapped
    finally:
        mem.close()


def test_copy_many_and_a_page_fetched_again_fill_the_copy():
    buf = ctypes.create_string_buffer(b"A" * (4 * PAGE))
    addr = ctypes.addressof(buf)
    base = addr - addr % PAGE + PAGE  # a page wholly inside the buffer
    mem = Memory(os.getpid(), cache=True)
    try:
        assert mem.copy_many([(addr, addr + 100), (PAGE, 2 * PAGE)]) >= PAGE
        assert mem.read(addr, 4) == b"AAAA"
        ctypes.memset(base, ord("Z"), PAGE)
        again = mem.plan_pages([base])
        mem.fetch(again)
        assert again.done == [PAGE]  # read again: as the process has it now
        mem.released()
        assert mem.read(base, 2) == b"ZZ" and mem.late_reads == 0
    finally:
        mem.close()
