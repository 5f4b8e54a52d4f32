"""``sources/vmread.Batch``: many ranges of a process read in one ``process_vm_readv``, a range the kernel
stops in read again with ``pread``, and the same result where ``process_vm_readv`` is refused."""

import ctypes
import mmap
import os

import pytest

from tfnative.sources import vmread
from tfnative.sources.vmread import PAGE, Batch


@pytest.fixture
def own_mem():
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    yield fd
    os.close(fd)


def _pages(fill: bytes, count: int):
    """``count`` pages of our own memory, each filled with one byte of ``fill``; (map, its address)."""
    m = mmap.mmap(-1, count * PAGE)
    for k in range(count):
        m[k * PAGE:(k + 1) * PAGE] = fill[k:k + 1] * PAGE
    return m, ctypes.addressof(ctypes.c_char.from_buffer(m))


def test_many_ranges_come_back_in_order(own_mem):
    m, base = _pages(b"abcdefgh", 8)
    ranges = [(base + k * PAGE, base + (k + 1) * PAGE) for k in (6, 1, 3)] + [(base + 10, base + 20)]
    batch = Batch(os.getpid(), ranges)
    assert batch.read(own_mem) == 3 * PAGE + 10
    assert batch.done == [PAGE, PAGE, PAGE, 10]
    assert [p[:1] for _a, p in batch.pages()] == [b"g", b"b", b"d"]  # the 10-byte range is no whole page
    assert bytes(batch.data[3 * PAGE:3 * PAGE + 10]) == b"a" * 10
    m.close()


def test_a_range_over_an_unmapped_page_keeps_what_precedes_it_and_the_ranges_after(own_mem):
    m, base = _pages(b"xyz", 3)
    hole = mmap.mmap(-1, 2 * PAGE)
    holed = ctypes.addressof(ctypes.c_char.from_buffer(hole))
    hole[:PAGE] = b"h" * PAGE
    ctypes.CDLL(None).munmap(ctypes.c_void_p(holed + PAGE), PAGE)  # its second page is gone
    batch = Batch(os.getpid(), [(base, base + PAGE), (holed, holed + 2 * PAGE), (base + 2 * PAGE, base + 3 * PAGE)])
    assert batch.read(own_mem) == 3 * PAGE
    assert batch.done == [PAGE, PAGE, PAGE]  # the call stopped in the second range; pread kept its first page
    assert [p[:1] for _a, p in batch.pages()] == [b"x", b"h", b"z"]
    m.close()


def test_without_leaves_out_what_another_batch_reads(own_mem):
    m, base = _pages(b"pqrs", 4)
    pages = Batch(os.getpid(), [(base + k * PAGE, base + (k + 1) * PAGE) for k in range(4)], whole=True)
    rest = pages.without([(base + PAGE, base + 3 * PAGE)])
    assert rest.ranges == [(base, base + PAGE), (base + 3 * PAGE, base + 4 * PAGE)] and rest.whole
    rest.read(own_mem)
    assert [(a - base) // PAGE for a, _p in rest.pages()] == [0, 3]
    assert [p[:1] for _a, p in rest.pages()] == [b"p", b"s"]
    m.close()


def test_pread_where_process_vm_readv_is_refused(own_mem, monkeypatch):
    m, base = _pages(b"kl", 2)
    monkeypatch.setattr(vmread, "_unusable", True)
    monkeypatch.setattr(vmread, "_readv", None)
    batch = Batch(os.getpid(), [(base + PAGE, base + 2 * PAGE), (base, base + PAGE), (PAGE, 2 * PAGE)])
    assert batch.read(own_mem) == 2 * PAGE
    assert batch.done == [PAGE, PAGE, 0]  # page 1 is never mapped
    assert [p[:1] for _a, p in batch.pages()] == [b"l", b"k"]
    m.close()


def test_more_ranges_than_one_call_takes(own_mem):
    m, base = _pages(b"0123", 4)
    ranges = [(base + (k % 4) * PAGE + 8, base + (k % 4) * PAGE + 16) for k in range(vmread.IOV_MAX + 500)]
    batch = Batch(os.getpid(), ranges)
    assert batch.read(own_mem) == 8 * len(ranges)
    assert bytes(batch.data[8 * 1027:8 * 1028]) == b"3" * 8  # range 1027 is in the second call
    m.close()
